package rollout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/lease/leasetest"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/snapshot/snapshottest"
)

// fakeEtcd is a Raft cluster reduced to what the engine can observe: who leads, the term, which members
// answer. Restarting the leader without a transfer costs an election (term + 1), as in etcd.
type fakeEtcd struct {
	mu sync.Mutex
	// snapshot is what Snapshot streams (nil: the fake has none to give); snapshotsFrom who was asked.
	snapshot      []byte
	snapshotsFrom []string
	ids           map[string]uint64
	// slowList makes the next MemberList answer this long (a time.Duration) after it is asked.
	slowList atomic.Int64
	// namePrefix makes etcd's member names other than the pods' (--name set from something else): the
	// member list names pod p's member namePrefix+p.
	namePrefix string
	down       map[string]bool
	leader     string
	term       uint64
	index      uint64
	moves      int
	learner    map[string]bool
	// brokenAfterRestart names members that never come back once restarted (a bad revision).
	brokenAfterRestart map[string]bool
	// crashLoopAfterRestart names members that, once restarted, answer for crashUp, then not for crashDown,
	// over and over (a revision that crash-loops); crashStart is when each such member restarted.
	crashLoopAfterRestart map[string]bool
	crashUp, crashDown    time.Duration
	crashStart            map[string]time.Time
	elections             int
	// ownElections counts a one-member etcd's restarts (elections counts them too): its only member elects
	// itself again.
	ownElections int
	forgotten    []string
	// clusterVersion is what /version says ("3.6.0"); empty: it does not answer.
	clusterVersion string
	// moveLeaderAnswersLost is how many MoveLeader calls move the leader but answer with a timeout, as when
	// the response is lost on its way back.
	moveLeaderAnswersLost int
	// leadershipLostAfterMove is how many successful MoveLeader calls are followed at once by an election that
	// takes the leadership from the new leader (it stalls, the others elect), before anyone can confirm it.
	leadershipLostAfterMove int
	// clusterVersionOnceAllRestarted, when set, becomes clusterVersion once every member has restarted (the
	// leader raising it after the last member of a minor upgrade).
	clusterVersionOnceAllRestarted string
	restartedOnce                  map[string]bool
	// serverVersions, storageVersions and downgradeTargets are what each member's Status reports; absent: empty.
	serverVersions, storageVersions, downgradeTargets map[string]string
	// clusterVersionCalls counts /version requests, so a test can hold Observe to one per look.
	clusterVersionCalls int
	// downgradeCalls records each downgrade API call as "action version"; downgradeRefused makes validate
	// (and enable) fail with that reason; downgradeEnableAnswerLost makes enable take effect but answer with a
	// timeout; versionBeforeDowngrade is the cluster version a cancel restores.
	downgradeCalls            []string
	downgradeRefused          string
	downgradeEnableAnswerLost bool
	// downgradeBroken is how many downgrade calls fail as a connection closed under them would.
	downgradeBroken int
	// downgradeBrokenBy is the error of a broken downgrade call; gRPC's Unavailable when nil.
	downgradeBrokenBy      error
	versionBeforeDowngrade string
	// storageLagsDowngrade is how many Status answers per member still report the old storage version after
	// an enable (etcd lowers it shortly after, not at once).
	storageLagsDowngrade int
	storageLag           map[string]int
	// incarnations counts each member's restarts: its Incarnation (a crash-looping member adds its cycles).
	incarnations map[string]int
	// unseen names members no look reaches (their port-forward cannot be opened), while they run on.
	unseen map[string]bool
	// noIncarnation makes Incarnation fail, as an etcd without /metrics would.
	noIncarnation bool
	// startJitter makes every other Incarnation read a second late, without a restart (bootTimeJitter);
	// jitterReads counts those reads, per member, so that which read of a member is late does not depend on
	// the order the engine reads the members in.
	startJitter bool
	jitterReads map[string]int
	// refusing names members whose client port refuses us while they still vote (and may lead): every call
	// through them fails as a member that is down would, yet they count for the cluster's quorum.
	refusing map[string]bool
	// moveDeadlines is the deadline of each MoveLeader call (zero: none).
	moveDeadlines []time.Time
	// beforeStatus, when set, runs at every Status call before it is answered, with f.mu held: a fault that
	// strikes at the moment the engine looks.
	beforeStatus func(pod string)
	// membership is who left and joined (fake_membership_test.go).
	membership membership
}

func newFakeEtcd(n, leader int) *fakeEtcd {
	f := &fakeEtcd{ids: map[string]uint64{}, down: map[string]bool{}, learner: map[string]bool{}, brokenAfterRestart: map[string]bool{},
		crashLoopAfterRestart: map[string]bool{}, crashStart: map[string]time.Time{}, term: 2, index: 100}
	for i := 0; i < n; i++ {
		f.ids[planner.PodName("etcd", i)] = uint64(0xa0 + i)
	}
	f.leader = planner.PodName("etcd", leader)
	return f
}

func (f *fakeEtcd) Status(_ context.Context, pod string) (member.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.beforeStatus != nil {
		f.beforeStatus(pod)
	}
	if f.unseen[pod] {
		return member.Status{}, fmt.Errorf("%w: port-forward to db/%s: the API server is away", member.ErrNoLook, pod)
	}
	if f.isDown(pod) || f.refusing[pod] {
		return member.Status{}, fmt.Errorf("status of %s: connection refused", pod)
	}
	var leader uint64
	if !f.down[f.leader] {
		leader = f.ids[f.leader]
	}
	f.index++
	storage := f.storageVersions[pod]
	if f.storageLag[pod] > 0 && storage != "" {
		f.storageLag[pod]--
		storage = f.versionBeforeDowngrade
	}
	applied := f.index
	if f.learner[pod] && f.membership.slow[pod] {
		applied = 0
	}
	return member.Status{ID: f.ids[pod], Leader: leader, IsLearner: f.learner[pod], RaftTerm: f.term, RaftIndex: f.index, AppliedIndex: applied,
		Version: f.serverVersions[pod], StorageVersion: storage, DowngradeTarget: f.downgradeTargets[pod]}, nil
}

func (f *fakeEtcd) MemberList(_ context.Context, pod string) ([]member.Info, error) {
	if d := time.Duration(f.slowList.Swap(0)); d > 0 {
		time.Sleep(d) // a member list that takes its time, once (virtual time in a synctest bubble)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.isDown(pod) {
		return nil, errors.New("connection refused")
	}
	var out []member.Info
	for p, id := range f.ids {
		if f.membership.removed[p] {
			continue
		}
		name := f.namePrefix + p
		if f.membership.unstarted[p] {
			name = ""
		}
		out = append(out, member.Info{ID: id, Name: name, IsLearner: f.learner[p], PeerURLs: []string{peerURL(p)}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (f *fakeEtcd) MoveLeader(ctx context.Context, leaderPod string, to uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	deadline, _ := ctx.Deadline()
	f.moveDeadlines = append(f.moveDeadlines, deadline)
	if leaderPod != f.leader {
		return errors.New("etcdserver: not leader")
	}
	for p, id := range f.ids {
		if id == to {
			if f.down[p] {
				return errors.New("etcdserver: bad leader transferee")
			}
			f.leader = p
			f.term++
			f.moves++
			if f.leadershipLostAfterMove > 0 {
				f.leadershipLostAfterMove--
				f.electOtherThan(p)
			}
			if f.moveLeaderAnswersLost > 0 {
				f.moveLeaderAnswersLost--
				return context.DeadlineExceeded
			}
			return nil
		}
	}
	return errors.New("etcdserver: bad leader transferee")
}

func (f *fakeEtcd) LinearizableRead(_ context.Context, pod string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.isDown(pod) || f.down[f.leader] {
		return errors.New("context deadline exceeded")
	}
	return nil
}

func (f *fakeEtcd) ClusterVersion(_ context.Context, pod string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clusterVersionCalls++
	if f.isDown(pod) || f.clusterVersion == "" {
		return "", fmt.Errorf("cluster version through %s: no answer", pod)
	}
	return f.clusterVersion, nil
}

func (f *fakeEtcd) Downgrade(_ context.Context, pod string, action member.DowngradeAction, version string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.downgradeCalls = append(f.downgradeCalls, action.String()+" "+version)
	if f.downgradeBroken > 0 {
		f.downgradeBroken--
		if f.downgradeBrokenBy != nil {
			return "", f.downgradeBrokenBy
		}
		return "", status.Error(codes.Unavailable, "error reading from server: EOF")
	}
	if f.isDown(pod) {
		return "", fmt.Errorf("downgrade %s through %s: connection refused", action, pod)
	}
	switch action {
	case member.DowngradeValidate:
		if f.downgradeRefused != "" {
			return "", errors.New(f.downgradeRefused)
		}
	case member.DowngradeEnable:
		if f.downgradeRefused != "" {
			return "", errors.New(f.downgradeRefused)
		}
		f.versionBeforeDowngrade = f.clusterVersion
		f.clusterVersion = version + ".0"
		f.storageLag = map[string]int{}
		for p := range f.ids {
			f.setDowngradeTarget(p, version+".0")
			f.storageLag[p] = f.storageLagsDowngrade
		}
		if f.downgradeEnableAnswerLost {
			return "", status.Error(codes.DeadlineExceeded, "context deadline exceeded")
		}
	case member.DowngradeCancel:
		for p := range f.ids {
			f.setDowngradeTarget(p, "")
		}
		if f.versionBeforeDowngrade != "" {
			// etcd's leader sets the cluster version back to the lowest minor its members run.
			f.clusterVersion = f.lowestServerMinor(f.versionBeforeDowngrade)
			for p, v := range f.storageVersions {
				if v != "" {
					f.storageVersions[p] = f.clusterVersion
				}
			}
		}
	}
	return f.clusterVersion, nil
}

// electOtherThan makes the members other than pod elect one of them: an election nobody planned. f.mu is held.
func (f *fakeEtcd) electOtherThan(pod string) {
	for _, p := range slices.Sorted(maps.Keys(f.ids)) {
		if p != pod && !f.isDown(p) {
			f.leader = p
			f.term++
			f.elections++
			return
		}
	}
}

// lowestServerMinor is the lowest minor ("3.5.0") among the members' server versions; else fallback. f.mu is held.
func (f *fakeEtcd) lowestServerMinor(fallback string) string {
	low, found := EtcdVersion{}, false
	for _, sv := range f.serverVersions {
		if v, ok := planner.ParseVersion(sv); ok && (!found || v.Less(low)) {
			low, found = v, true
		}
	}
	if !found {
		return fallback
	}
	return low.MajorMinor() + ".0"
}

// setDowngradeTarget records target as what pod reports; a member that reports a storage version (3.6+)
// also reports its storage version lowered along with it. f.mu is held.
func (f *fakeEtcd) setDowngradeTarget(pod, target string) {
	if f.downgradeTargets == nil {
		f.downgradeTargets = map[string]string{}
	}
	f.downgradeTargets[pod] = target
	if target != "" && f.storageVersions[pod] != "" {
		f.storageVersions[pod] = target
	}
}

// runsImage makes pod report the version of image, as the binary of a restarted member does: 3.6 and later
// report a storage version (the cluster version's), 3.5 none, and only 3.6 and later report a downgrade.
func (f *fakeEtcd) runsImage(pod, image string) {
	v, ok := ImageVersion(image)
	if !ok || f.serverVersions == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.serverVersions[pod] = v.String()
	if f.storageVersions == nil {
		f.storageVersions = map[string]string{}
	}
	f.storageVersions[pod] = ""
	if v.Minor >= 6 {
		f.storageVersions[pod] = f.clusterVersion
	} else {
		delete(f.downgradeTargets, pod)
	}
}

func (f *fakeEtcd) Close() error { return nil }

func (f *fakeEtcd) Incarnation(_ context.Context, pod string) (Incarnation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.unseen[pod]:
		return Incarnation{}, fmt.Errorf("%w: port-forward to db/%s: the API server is away", member.ErrNoLook, pod)
	case f.isDown(pod) || f.refusing[pod]:
		return Incarnation{}, fmt.Errorf("process start of %s: connection refused", pod)
	case f.noIncarnation:
		return Incarnation{}, fmt.Errorf("/metrics has no process_start_time_seconds: %w", member.ErrNoIncarnation)
	}
	n := f.incarnations[pod]
	if start, looping := f.crashStart[pod]; looping {
		n += int(time.Since(start) / (f.crashUp + f.crashDown))
	}
	inc := fakeProcess(n)
	if f.startJitter {
		// Every other read is a second late, as Linux's re-derived boot time makes it (bootTimeJitter).
		if f.jitterReads == nil {
			f.jitterReads = map[string]int{}
		}
		f.jitterReads[pod]++
		inc = member.IncarnationStartedAt(inc.StartedAt().Add(time.Duration(f.jitterReads[pod]%2) * time.Second))
	}
	return inc, nil
}

// fakeProcess is the incarnation of a member's process after n restarts: started 10 s after the last one.
func fakeProcess(n int) Incarnation {
	return member.IncarnationStartedAt(time.Date(2026, 12, 3, 0, 0, 10*(n+1), 0, time.UTC))
}

// Snapshot streams f.snapshot from pod, when pod answers.
func (f *fakeEtcd) Snapshot(_ context.Context, pod string, consume func(member.SnapshotStream) error) error {
	f.mu.Lock()
	f.snapshotsFrom = append(f.snapshotsFrom, pod)
	data, refused := f.snapshot, f.unseen[pod] || f.isDown(pod) || f.refusing[pod]
	f.mu.Unlock()
	if refused || data == nil {
		return fmt.Errorf("snapshot of %s: connection refused", pod)
	}
	return consume(member.SnapshotStream{Data: bytes.NewReader(data), Revision: 1, ClusterID: 7})
}

// ActivePeers is pod's Raft view: every other member that runs, whether or not it answers us.
func (f *fakeEtcd) ActivePeers(_ context.Context, pod string) (map[uint64]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unseen[pod] || f.isDown(pod) || f.refusing[pod] {
		return nil, fmt.Errorf("peers of %s: connection refused", pod)
	}
	peers := map[uint64]bool{}
	for p, id := range f.ids {
		if p != pod && !f.isDown(p) {
			peers[id] = true
		}
	}
	return peers, nil
}

// restartQuietly restarts a member between two looks: it answers before and after, from a new process.
func (f *fakeEtcd) restartQuietly(pod string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bumpIncarnation(pod)
}

// jitterStarts makes every other read of a process start a second late from now on (startJitter).
func (f *fakeEtcd) jitterStarts() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.startJitter = true
}

// bumpIncarnation records a restart of pod; f.mu is held.
func (f *fakeEtcd) bumpIncarnation(pod string) {
	if f.incarnations == nil {
		f.incarnations = map[string]int{}
	}
	f.incarnations[pod]++
}

// setRefusing makes pod's client port refuse us (or serve again), while the member votes on.
func (f *fakeEtcd) setRefusing(pod string, refusing bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refusing == nil {
		f.refusing = map[string]bool{}
	}
	f.refusing[pod] = refusing
}

// setUnseen makes no look reach pod (or every look again), while the member runs on.
func (f *fakeEtcd) setUnseen(pod string, unseen bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unseen == nil {
		f.unseen = map[string]bool{}
	}
	f.unseen[pod] = unseen
}

func (f *fakeEtcd) Forget(pod string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgotten = append(f.forgotten, pod)
}

// restart is what the StatefulSet controller does to a member: stop it and start it at the new revision.
func (f *fakeEtcd) restart(pod string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.restartedOnce == nil {
		f.restartedOnce = map[string]bool{}
	}
	f.bumpIncarnation(pod)
	if f.restartedOnce[pod] = true; len(f.restartedOnce) == len(f.ids) && f.clusterVersionOnceAllRestarted != "" {
		f.clusterVersion = f.clusterVersionOnceAllRestarted
	}
	if f.leader == pod {
		// No hand-over: the survivors elect a new leader.
		var others []string
		for p := range f.ids {
			if p != pod && !f.down[p] {
				others = append(others, p)
			}
		}
		sort.Strings(others)
		f.term++
		f.elections++
		if len(others) == 0 {
			// The only member campaigns when it starts, and wins: when the engine restarted it, an election
			// the consent accepted (Result.WriteOutage.Elections), not one nobody planned.
			f.ownElections++
		} else {
			f.leader = others[0]
		}
	}
	if f.brokenAfterRestart[pod] {
		f.down[pod] = true
	} else {
		delete(f.down, pod) // a member down on an older revision comes up on a working one
	}
	if f.membership.ephemeral {
		f.startsEmpty(pod)
	}
	if f.crashLoopAfterRestart[pod] {
		f.crashStart[pod] = time.Now()
	}
}

// isDown says whether pod answers now; f.mu is held.
func (f *fakeEtcd) isDown(pod string) bool {
	if f.down[pod] {
		return true
	}
	start, looping := f.crashStart[pod]
	if !looping {
		return false
	}
	return time.Since(start)%(f.crashUp+f.crashDown) >= f.crashUp
}

func (f *fakeEtcd) stop(pod string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[pod] = true
}

func (f *fakeEtcd) leaderPod() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader
}

// fakeCluster is a fake clientset with a tiny StatefulSet controller: whenever a pod is read, it is moved
// to updateRevision if its ordinal is at or above the partition, and the etcd member behind it restarts.
type fakeCluster struct {
	t      *testing.T
	kube   *fake.Clientset
	etcd   *fakeEtcd
	n      int
	events atomic.Int32
	// restarted records pods in restart order.
	mu        sync.Mutex
	restarted []string
	// deleted records pods deleted through the API, in order; images is the etcd image of each revision,
	// for tests that give pods containers.
	deleted []string
	images  map[string]string
	// neverReady names pods that the controller's update leaves not Ready (a readiness probe that never passes).
	neverReady map[string]bool
	// promote makes the controller set currentRevision = updateRevision once every pod is at it.
	promote bool
	// recreations counts the pods the controller recreated at the update revision (each gets a new UID).
	recreations int
	// holdCreate, when set, is asked about every pod the controller is about to put in place of one it
	// deletes: true means the controller deletes the old pod and creates the new one later (the schedule
	// checker's slow controller), so no reader ever sees the new pod before it exists.
	holdCreate func(p *corev1.Pod) bool
}

var stsGVR = appsv1.SchemeGroupVersion.WithResource("statefulsets")
var podGVR = corev1.SchemeGroupVersion.WithResource("pods")

func newFakeCluster(t *testing.T, n, leader int, updated ...int) *fakeCluster {
	c := &fakeCluster{t: t, etcd: newFakeEtcd(n, leader), n: n}
	c.etcd.snapshot = fakeSnapshot(t)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "db", UID: "sts-uid", Generation: 1},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(n)), ServiceName: "etcd",
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(int32(n))}},
		},
		Status: appsv1.StatefulSetStatus{UpdateRevision: newRev, CurrentRevision: oldRev, ObservedGeneration: 1},
	}
	objs := []runtime.Object{sts}
	isUpdated := map[int]bool{}
	for _, u := range updated {
		isUpdated[u] = true
	}
	for i := 0; i < n; i++ {
		rev := oldRev
		if isUpdated[i] {
			rev = newRev
		}
		objs = append(objs, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: planner.PodName("etcd", i), Namespace: "db", UID: "pod-uid",
				Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: rev}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		})
	}
	// The plain object tracker, not NewClientset's field-managed one: that one builds a REST mapper for the
	// whole scheme on every write (testrestmapper.TestOnlyStaticRESTMapper), which was half the CPU of the
	// schedule checker, and the engine uses no server-side apply. Leases get the API server's optimistic
	// concurrency, which the lease's takeover and confirm rely on.
	c.kube = fake.NewSimpleClientset(objs...)
	leasetest.Versioned(c.kube)
	c.kube.PrependReactor("get", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		c.reconcile(action.(k8stesting.GetAction).GetName())
		return false, nil, nil
	})
	c.kube.PrependReactor("delete", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, c.recreate(action.(k8stesting.DeleteActionImpl))
	})
	c.kube.PrependReactor("patch", "statefulsets", c.reconcileOnPatch)
	c.kube.PrependReactor("create", "events", func(action k8stesting.Action) (bool, runtime.Object, error) {
		ev := action.(k8stesting.CreateAction).GetObject().(*corev1.Event)
		ev.Name = ev.GenerateName + strconv.Itoa(int(c.events.Add(1)))
		return false, nil, nil
	})
	return c
}

func (c *fakeCluster) reconcile(pod string) {
	obj, err := c.kube.Tracker().Get(stsGVR, "db", "etcd")
	require.NoError(c.t, err)
	sts := obj.(*appsv1.StatefulSet)
	ordinal, _ := strconv.Atoi(strings.TrimPrefix(pod, "etcd-"))
	if ordinal < int(*sts.Spec.UpdateStrategy.RollingUpdate.Partition) {
		return
	}
	pobj, err := c.kube.Tracker().Get(podGVR, "db", pod)
	if err != nil {
		return
	}
	p := pobj.(*corev1.Pod).DeepCopy()
	if p.Labels[appsv1.ControllerRevisionHashLabelKey] == sts.Status.UpdateRevision {
		return
	}
	if c.anyPodNotReady() {
		// Kubernetes 1.35+ under Parallel: unavailable pods at any ordinal use up maxUnavailable (1); under
		// OrderedReady the controller updates no pod while one is not Running and Ready, that pod included
		// (kubernetes#67250): the engine deletes such a pod itself.
		return
	}
	p.Labels[appsv1.ControllerRevisionHashLabelKey] = sts.Status.UpdateRevision
	c.mu.Lock()
	c.recreations++
	p.UID = types.UID(fmt.Sprintf("pod-uid-r%d", c.recreations)) // the controller deletes the pod and creates another
	c.mu.Unlock()
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if c.neverReady[pod] {
		p.Status.Conditions[0].Status = corev1.ConditionFalse
	}
	if img := c.images[sts.Status.UpdateRevision]; img != "" && len(p.Spec.Containers) > 0 {
		p.Spec.Containers[0].Image = img
		c.etcd.runsImage(pod, img)
	}
	c.replacePod(p)
	c.etcd.restart(pod)
	if c.promote && !slices.Contains(c.revisions(), sts.Status.CurrentRevision) {
		// Every pod updated (and, here, Ready): the controller makes the update revision current.
		sts = sts.DeepCopy()
		sts.Status.CurrentRevision = sts.Status.UpdateRevision
		require.NoError(c.t, c.kube.Tracker().Update(stsGVR, sts, "db"))
	}
	c.mu.Lock()
	c.restarted = append(c.restarted, pod)
	c.mu.Unlock()
}

// replacePod puts p in place of the pod of its name: at once, or, when holdCreate holds it, the old pod goes and
// p comes later (holdCreate's owner creates it).
func (c *fakeCluster) replacePod(p *corev1.Pod) {
	if c.holdCreate != nil && c.holdCreate(p) {
		require.NoError(c.t, c.kube.Tracker().Delete(podGVR, "db", p.Name))
		return
	}
	require.NoError(c.t, c.kube.Tracker().Update(podGVR, p, "db"))
}

// anyPodNotReady says whether one of the StatefulSet's pods is not Ready.
func (c *fakeCluster) anyPodNotReady() bool {
	for i := 0; i < c.n; i++ {
		obj, err := c.kube.Tracker().Get(podGVR, "db", planner.PodName("etcd", i))
		if err != nil {
			return true
		}
		for _, cond := range obj.(*corev1.Pod).Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status != corev1.ConditionTrue {
				return true
			}
		}
	}
	return false
}

// recreate is the controller's answer to a deleted pod: a new pod (new UID) at the update revision if its
// ordinal is at or above the partition, else at the current revision. A member back at the current
// revision is healthy again (what failed was the new revision); one at the update revision restarts as
// reconcile does. A UID precondition that does not match is a conflict, as on a real API server.
func (c *fakeCluster) recreate(del k8stesting.DeleteActionImpl) error {
	obj, err := c.kube.Tracker().Get(stsGVR, "db", "etcd")
	require.NoError(c.t, err)
	sts := obj.(*appsv1.StatefulSet)
	pobj, err := c.kube.Tracker().Get(podGVR, "db", del.Name)
	if err != nil {
		return err
	}
	p := pobj.(*corev1.Pod).DeepCopy()
	if pre := del.DeleteOptions.Preconditions; pre != nil && pre.UID != nil && *pre.UID != p.UID {
		return apierrors.NewConflict(podGVR.GroupResource(), del.Name, fmt.Errorf("UID precondition %s, pod has %s", *pre.UID, p.UID))
	}
	ordinal, _ := strconv.Atoi(strings.TrimPrefix(del.Name, "etcd-"))
	rev := sts.Status.CurrentRevision
	if ordinal >= int(*sts.Spec.UpdateStrategy.RollingUpdate.Partition) {
		rev = sts.Status.UpdateRevision
	}
	c.mu.Lock()
	c.deleted = append(c.deleted, del.Name)
	p.UID = types.UID(fmt.Sprintf("pod-uid-%d", len(c.deleted)))
	c.mu.Unlock()
	p.Labels[appsv1.ControllerRevisionHashLabelKey] = rev
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if img := c.images[rev]; img != "" && len(p.Spec.Containers) > 0 {
		p.Spec.Containers[0].Image = img
		c.etcd.runsImage(del.Name, img)
	}
	c.replacePod(p)
	if rev == sts.Status.CurrentRevision {
		c.etcd.revive(del.Name)
	} else {
		c.etcd.restart(del.Name)
	}
	return nil
}

// revive brings a member back healthy: it was restarted onto a revision that works.
func (f *fakeEtcd) revive(pod string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bumpIncarnation(pod)
	delete(f.down, pod)
	delete(f.crashStart, pod)
	if f.membership.ephemeral {
		f.startsEmpty(pod)
	}
}

// containerRestarted is the kubelet's account of a container that exited and was started again in the same
// pod: its restart count rises, the pod stays (Ready again by the next reading).
func (c *fakeCluster) containerRestarted(pod string) {
	obj, err := c.kube.Tracker().Get(podGVR, "db", pod)
	require.NoError(c.t, err)
	p := obj.(*corev1.Pod).DeepCopy()
	if len(p.Status.ContainerStatuses) == 0 {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd"}}
	}
	p.Status.ContainerStatuses[0].RestartCount++
	require.NoError(c.t, c.kube.Tracker().Update(podGVR, p, "db"))
}

func (c *fakeCluster) deletedPods() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.deleted...)
}

func (c *fakeCluster) partition() int {
	obj, err := c.kube.Tracker().Get(stsGVR, "db", "etcd")
	require.NoError(c.t, err)
	return int(*obj.(*appsv1.StatefulSet).Spec.UpdateStrategy.RollingUpdate.Partition)
}

func (c *fakeCluster) revisions() []string {
	var out []string
	for i := 0; i < c.n; i++ {
		obj, err := c.kube.Tracker().Get(podGVR, "db", planner.PodName("etcd", i))
		require.NoError(c.t, err)
		out = append(out, obj.(*corev1.Pod).Labels[appsv1.ControllerRevisionHashLabelKey])
	}
	return out
}

func (c *fakeCluster) eventReasons() map[string]int {
	list, err := c.kube.CoreV1().Events("db").List(context.Background(), metav1.ListOptions{})
	require.NoError(c.t, err)
	out := map[string]int{}
	for _, e := range list.Items {
		out[e.Reason]++
	}
	return out
}

func (c *fakeCluster) stsPatches() int {
	n := 0
	for _, a := range c.kube.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "statefulsets" {
			n++
		}
	}
	return n
}

func (c *fakeCluster) engine(t *testing.T, mutate func(*Config, *Options)) *Engine {
	cfg := NewConfig("etcd", "db", "etcd")
	cfg.Cooldown = 0
	cfg.ReadyTimeout = 2e9
	cfg.HealthTimeout = 2e9
	cfg.SnapshotTo = t.TempDir()
	opts := Options{Kube: c.kube, etcd: c.etcd, PollInterval: 5e6, LeaseDuration: 3e9, StableFor: 20e6}
	if mutate != nil {
		mutate(&cfg, &opts)
	}
	e, err := New(cfg, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

var (
	fakeSnapshotOnce  sync.Once
	fakeSnapshotBytes []byte
)

// fakeSnapshot is what every fake member streams as its snapshot: a small file laid out as etcd's, made once.
func fakeSnapshot(t testing.TB) []byte {
	fakeSnapshotOnce.Do(func() { fakeSnapshotBytes = snapshottest.Bytes(t, 40, "") })
	return fakeSnapshotBytes
}
