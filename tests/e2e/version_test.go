//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// The etcd releases of the local cluster (tests/harness: the version annotation picks the binary).
const (
	etcd35 = "3.5.35"
	etcd36 = "3.6.8"
)

// preloadKeys is the data the cluster holds through every version change: enough that a restarted member has
// real catching up to do, few enough to write in a second.
const preloadKeys = 3000

// Issue 13's acceptance through `pulumi up` (examples/ts-managed), plain and mTLS, one cluster per mode carried
// through the whole sequence: created at 3.5.35 with data and the background client running, (1) upgraded
// to 3.6.8, (2) refused a 3.5.35 template carrying --feature-gates, (3) a downgrade cancelled right after
// etcd's downgrade was enabled, (4) downgraded to 3.5.35, (5) upgraded again and (6) a downgrade cancelled
// after its first member, finished by the next up. Each roll: previewed with its version path, 0 unplanned
// elections (the stack output and the raft term), a majority answering throughout, every member's server
// version and the cluster version as expected, the keyspace checksum unchanged; the background client's
// history is checked linearizable at the end. A stage that stops on a failed requirement ends the sequence
// (the next ones need its outcome); one whose checks failed otherwise (a preview line) lets it go on.
func TestVersionChanges(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"http", false}, {"mtls", true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newVersionStack(t, p, c, tc.tls)
			start := time.Now()
			for _, stage := range []struct {
				name string
				run  func(*testing.T)
			}{
				{"upgrade 3.5.35 to 3.6.8", s.upgrade},
				{"--feature-gates refused for 3.5", s.flagRefused},
				{"downgrade cancelled after enable", s.cancelAfterEnable},
				{"downgrade 3.6.8 to 3.5.35", s.downgrade},
				{"upgrade again", s.upgrade},
				{"downgrade cancelled after one member, resumed", s.cancelAfterOneMember},
			} {
				stageStart, completed := time.Now(), false
				t.Run(stage.name, func(t *testing.T) { stage.run(t); completed = true })
				t.Logf("stage %q: %s (%s since the stack was created)", stage.name, time.Since(stageStart).Round(time.Second), time.Since(start).Round(time.Second))
				if !completed {
					return // it stopped on a state the next stages cannot start from
				}
			}
			require.NoError(t, s.r.destroy(t.Context()))
		})
	}
}

// versionStack is one ts-managed stack on the local cluster and what the stages check against.
type versionStack struct {
	ctx      context.Context
	c        *harness.Cluster
	ns       string
	r        *procRunner
	config   func(rev string) map[string]string
	e        *harness.Etcd
	termZero uint64 // raft term when the stack was created: every stage counts elections from it
	checksum string // of the keyspace once the data was written
}

// newVersionStack creates the stack at 3.5.35, writes preloadKeys keys, takes the checksum and starts the
// background client (its history is checked when the test ends).
func newVersionStack(t *testing.T, p paths, c *harness.Cluster, tls bool) *versionStack {
	ctx := t.Context()
	ns := c.Namespace(t)
	e, err := c.AttachEtcd(ns, harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", Replicas: 3, TLS: tls})
	require.NoError(t, err)
	if tls {
		m := createTLSSecret(ctx, t, c, ns)
		e.TLS = &m
	}
	r, config := nodeExample("ts-managed", tls)(t, p, c, ns)
	s := &versionStack{ctx: ctx, c: c, ns: ns, r: r.(*procRunner), config: config, e: e}
	res, err := s.r.up(ctx, s.cfg(etcd35))
	require.NoError(t, err, "first up at %s:\n%s", etcd35, res.explained())
	require.NoError(t, e.WaitHealthy(ctx))
	requireVersions(ctx, t, e, etcd35, "3.5")

	cli, err := e.Client(ctx)
	require.NoError(t, err)
	_, err = harness.Preload(ctx, cli, "data/", preloadKeys, 512)
	require.NoError(t, cli.Close())
	require.NoError(t, err)
	var n int
	s.checksum, n = keyspaceChecksum(ctx, t, e)
	require.Equal(t, preloadKeys, n, "every preloaded key is read back")
	recordHistory(ctx, t, e)
	s.termZero = e.Must(t).Term()
	return s
}

// cfg is the stack config for etcd version with extra etcd flags; every key the stages change is set each
// time (stack config persists between operations).
func (s *versionStack) cfg(version string, extraArgs ...string) map[string]string {
	m := s.config("1")
	args, _ := json.Marshal(append([]string{}, extraArgs...))
	m["etcdVersion"], m["extraArgs"], m["cooldownSeconds"] = version, string(args), "1"
	return m
}

// plan is the Rollout's plan in a preview, which must have exactly one Rollout step.
func plan(t *testing.T, pv result) []string {
	t.Helper()
	steps := pv.rolloutSteps()
	require.Len(t, steps, 1, "one Rollout step in the preview:\n%s", pv.explained())
	p := planOf(steps[0])
	require.NotEmpty(t, p, "the preview's plan:\n%s", pv.explained())
	t.Logf("plan: %q", p)
	return p
}

// upgrade: the preview shows `etcd 3.5.35 → 3.6.8 (cluster version 3.5 → 3.6 once <last member> is rolled)`,
// and the up rolls every member onto 3.6.8 with the cluster version at 3.6.
func (s *versionStack) upgrade(t *testing.T) {
	pv, err := s.r.preview(s.ctx, s.cfg(etcd36))
	require.NoError(t, err, "preview of the upgrade:\n%s", pv.explained())
	p := plan(t, pv)
	order := rolled(p)
	require.Len(t, order, 3, "every member is rolled")
	want := fmt.Sprintf("etcd %s → %s (cluster version 3.5 → 3.6 once %s is rolled)", etcd35, etcd36, order[2])
	assert.Equal(t, want, p[0], "the version path comes first, naming the point of no return")
	assert.Contains(t, pv.Text, want, "the CLI prints the version path")
	assert.Contains(t, p[1], "a verified snapshot of the leader before "+order[0]+" restarts, to ", "then the snapshot before the point of no return")

	res := s.roll(t, s.cfg(etcd36), etcd36, "3.6")
	assert.Regexp(t, `cluster version is 3\.6\.\d+ \(`, res.Text, "the up reports the cluster version it reached")
	assert.Regexp(t, `snapshot before the first restart: file://\S+/etcd-rollout/snapshots/`+s.ns+`/etcd/\S+\.db \(revision \d+, sha256 [0-9a-f]{64}\)`, res.Text,
		"the up's summary names the snapshot it stored")
}

// downgrade: the preview shows the downgrade steps, and the up rolls every member onto 3.5.35 with the
// cluster version at 3.5.
func (s *versionStack) downgrade(t *testing.T) {
	pv, err := s.r.preview(s.ctx, s.cfg(etcd35))
	require.NoError(t, err, "preview of the downgrade:\n%s", pv.explained())
	p := plan(t, pv)
	order := rolled(p)
	require.Len(t, order, 3, "every member is rolled")
	want := fmt.Sprintf("etcd %s → %s (downgrade to 3.5: validate ok; enable before %s; cluster version 3.6 → 3.5)", etcd36, etcd35, order[0])
	assert.Equal(t, want, p[0], "the version path and the downgrade steps come first")
	assert.Contains(t, pv.Text, want, "the CLI prints them")
	assert.Contains(t, p[1], "a verified snapshot of the leader before "+order[0]+" restarts, to ", "then the snapshot, before etcd's downgrade is enabled")

	res := s.roll(t, s.cfg(etcd35), etcd35, "3.5")
	assert.Contains(t, res.Text, "snapshot before the first restart: file://", "the up's summary names the snapshot it stored")
}

// roll runs an up that must roll every member, and checks what every roll promises.
func (s *versionStack) roll(t *testing.T, cfg map[string]string, server, clusterMinor string) result {
	t.Helper()
	_, uidsBefore := s.e.Must(t).Pods()
	q := watchQuorum(s.ctx, s.e)
	start := time.Now()
	res, err := s.r.up(s.ctx, cfg)
	q.stop(t, "up to "+server)
	require.NoError(t, err, "up to %s:\n%s", server, res.explained())
	t.Logf("up to %s took %s; %v leader transfers", server, time.Since(start).Round(time.Second), res.Outputs["leaderTransfers"])
	requireRolledAndLocked(t, viewStatefulSet(s.ctx, t, s.c, s.ns))
	assert.Len(t, res.Outputs["membersRolled"], 3, "every member rolled")
	_, uidsAfter := s.e.Must(t).Pods()
	for i := range uidsBefore {
		assert.NotEqual(t, uidsBefore[i], uidsAfter[i], "etcd-%d was restarted", i)
	}
	s.requireIntact(t, res, server, clusterMinor)
	return res
}

// requireIntact checks the state after an up: healthy, no unplanned election (the up's output and the raft
// term since the stack was created), the versions, and the keyspace checksum.
func (s *versionStack) requireIntact(t *testing.T, res result, server, clusterMinor string) {
	t.Helper()
	require.NoError(t, s.e.WaitHealthy(s.ctx))
	if res.Outputs != nil {
		assert.EqualValues(t, 0, res.Outputs["unplannedElections"], "the up reports no unplanned election")
	}
	assert.Zero(t, unplannedElections(s.ctx, t, s.c, s.ns, s.termZero, s.e.Must(t).Term()), "the raft term rose by the leader transfers only")
	requireVersions(s.ctx, t, s.e, server, clusterMinor)
	sum, n := keyspaceChecksum(s.ctx, t, s.e)
	assert.Equal(t, preloadKeys, n, "keys read back")
	assert.Equal(t, s.checksum, sum, "the keyspace checksum is unchanged")
}

// flagRefused: a 3.5.35 template carrying --feature-gates (a 3.6 flag) is refused in preview and by the up,
// naming the flag and the version, and nothing restarts; the up of the running template then restarts nothing
// either (its outputs are the last roll's: an update that rolls nothing leaves them).
func (s *versionStack) flagRefused(t *testing.T) {
	const flag = "--feature-gates=InitialCorruptCheck=true"
	const want = "etcd 3.5 does not accept --feature-gates"
	bad := s.cfg(etcd35, flag)
	_, uidsBefore := s.e.Must(t).Pods()
	pv, err := s.r.preview(s.ctx, bad)
	if assert.Error(t, err, "the preview is refused:\n%s", pv.explained()) {
		assert.Contains(t, pv.Text+err.Error(), want)
	}
	res, err := s.r.up(s.ctx, bad)
	if assert.Error(t, err, "the up is refused:\n%s", res.explained()) {
		assert.Contains(t, res.Text+err.Error(), want)
	}
	s.requireNothingRestarted(t, uidsBefore)

	res, err = s.r.up(s.ctx, s.cfg(etcd36))
	require.NoError(t, err, "the up of the running template:\n%s", res.explained())
	s.requireNothingRestarted(t, uidsBefore)
	s.requireIntact(t, res, etcd36, "3.6")
}

func (s *versionStack) requireNothingRestarted(t *testing.T, uidsBefore []types.UID) {
	t.Helper()
	v := viewStatefulSet(s.ctx, t, s.c, s.ns)
	assert.Equal(t, v.Replicas, v.Partition, "the partition is locked")
	_, uids := s.e.Must(t).Pods()
	assert.Equal(t, uidsBefore, uids, "no pod was recreated")
}

// cancelAfterEnable: Ctrl-C on the downgrade's up as soon as a member reports etcd's downgrade enabled (the
// engine then waits for etcd to lower the cluster and storage versions, which etcd's leader does within a
// few seconds, before it restarts anyone): the up fails, etcd's downgrade is cancelled, the cluster version
// is 3.6 again, the partition is locked and no member restarted.
func (s *versionStack) cancelAfterEnable(t *testing.T) {
	_, uidsBefore := s.e.Must(t).Pods()
	cli, err := s.e.Client(s.ctx)
	require.NoError(t, err)
	defer cli.Close()

	up := s.startUp(t, s.cfg(etcd35))
	var target string
	waitFor(t, up, "etcd's downgrade enabled", func() bool {
		var ok bool
		target, ok = downgradeEnabled(s.ctx, s.e, cli)
		return ok
	})
	cluster, _ := s.e.ClusterVersion(s.ctx, 0)
	t.Logf("downgrade to %s enabled; cluster version %s when the cancel is sent", target, cluster)
	u := up.cancel(t)
	t.Logf("cancelled up, its lines on the downgrade:\n%s", linesWith(u.res.Text+fmt.Sprint(u.err), "downgrade"))
	require.Error(t, u.err, "a cancelled up fails")
	assert.Contains(t, u.res.Text+fmt.Sprint(u.err), "etcd's downgrade to 3.5 was cancelled", "the up says what became of the downgrade")
	assert.Equal(t, 1, s.eventCount(t, rollout.ReasonDowngradeCancelled), "one %s Event", rollout.ReasonDowngradeCancelled)

	s.requireNothingRestarted(t, uidsBefore)
	if target, ok := downgradeEnabled(s.ctx, s.e, cli); ok {
		t.Errorf("etcd's downgrade to %s is still enabled: the cancelled run did not cancel it", target)
	}
	s.requireIntact(t, result{}, etcd36, "3.6")
}

// cancelAfterOneMember: Ctrl-C on the downgrade's up once its first member has passed its gates on 3.5.35
// (a 30 s cool-down keeps the up there): the partition is locked, that member runs 3.5.35, etcd's downgrade
// stays enabled (the member needs it); the preview says so, and the next up rolls the other two only and
// ends with every member on 3.5.35.
func (s *versionStack) cancelAfterOneMember(t *testing.T) {
	_, uidsBefore := s.e.Must(t).Pods()
	slow := s.cfg(etcd35)
	slow["cooldownSeconds"] = "30"
	q := watchQuorum(s.ctx, s.e)
	running := viewStatefulSet(s.ctx, t, s.c, s.ns).UpdateRevision
	up := s.startUp(t, slow)
	waitFor(t, up, "the first member rolled", func() bool { return s.membersDone(running) >= 1 })
	u := up.cancel(t)
	t.Logf("cancelled up:\n%s", tail(u.res.Text, 30))
	require.Error(t, u.err, "a cancelled up fails")

	v := viewStatefulSet(s.ctx, t, s.c, s.ns)
	require.Equal(t, v.Replicas, v.Partition, "the partition is locked")
	_, uids := s.e.Must(t).Pods()
	var first int
	restarted := 0
	for i := range uids {
		if uids[i] != uidsBefore[i] {
			first, restarted = i, restarted+1
		}
	}
	require.Equal(t, 1, restarted, "one member was rolled before the cancel")
	require.NoError(t, s.e.WaitHealthy(s.ctx))
	st, err := s.e.Status(s.ctx, first)
	require.NoError(t, err)
	assert.Equal(t, etcd35, st.Version, "%s runs %s", s.e.PodName(first), etcd35)

	pv, err := s.r.preview(s.ctx, s.cfg(etcd35))
	require.NoError(t, err, "preview after the cancel:\n%s", pv.explained())
	p := plan(t, pv)
	assert.Contains(t, p[0], "downgrade to 3.5: enabled; cluster version 3.5", "the preview says where the downgrade stands")
	assert.NotContains(t, rolled(p), s.e.PodName(first), "the member on %s is not rolled again", etcd35)

	res, err := s.r.up(s.ctx, s.cfg(etcd35))
	q.stop(t, "the cancelled downgrade and the up that finished it")
	require.NoError(t, err, "the up that finishes the downgrade:\n%s", res.explained())
	requireRolledAndLocked(t, viewStatefulSet(s.ctx, t, s.c, s.ns))
	membersRolled, _ := res.Outputs["membersRolled"].([]any)
	assert.Len(t, membersRolled, 2, "the other two members are rolled")
	assert.NotContains(t, membersRolled, s.e.PodName(first))
	_, uidsAfter := s.e.Must(t).Pods()
	assert.Equal(t, uids[first], uidsAfter[first], "%s was not restarted again", s.e.PodName(first))
	s.requireIntact(t, res, etcd35, "3.5")
}

// eventCount counts the namespace's Events of reason.
func (s *versionStack) eventCount(t *testing.T, reason string) int {
	t.Helper()
	events, err := s.c.Kube.CoreV1().Events(s.ns).List(s.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	n := 0
	for _, ev := range events.Items {
		if ev.Reason == reason {
			n++
		}
	}
	return n
}

// linesWith is the lines of text that contain word, for a test log.
func linesWith(text, word string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// membersDone is the status ConfigMap's count of members that passed their gates on the StatefulSet's
// current update revision, once that is no longer the running one (-1 before: the last run's count).
func (s *versionStack) membersDone(running string) int {
	cm, err := s.c.Kube.CoreV1().ConfigMaps(s.ns).Get(s.ctx, rollout.StatusConfigMapName("etcd"), metav1.GetOptions{})
	if err != nil {
		return -1
	}
	sts, err := s.c.Kube.AppsV1().StatefulSets(s.ns).Get(s.ctx, "etcd", metav1.GetOptions{})
	target := cm.Data[rollout.StatusKeyTargetRevision]
	if err != nil || target == running || target != sts.Status.UpdateRevision {
		return -1
	}
	n, err := strconv.Atoi(cm.Data[rollout.StatusKeyMembersDone])
	if err != nil {
		return -1
	}
	return n
}

// upInFlight is a `pulumi up` running in the background, to be cancelled as Ctrl-C would.
type upInFlight struct {
	cancelCtx context.CancelFunc
	done      chan upOutcome
}

type upOutcome struct {
	res result
	err error
}

func (s *versionStack) startUp(t *testing.T, cfg map[string]string) *upInFlight {
	t.Helper()
	ctx, cancel := context.WithCancel(s.ctx)
	u := &upInFlight{cancelCtx: cancel, done: make(chan upOutcome, 1)}
	go func() {
		res, err := s.r.up(ctx, cfg)
		u.done <- upOutcome{res, err}
	}()
	t.Cleanup(cancel)
	return u
}

// cancel sends the up SIGINT (procRunner cancels through the context) and waits for it to end.
func (u *upInFlight) cancel(t *testing.T) upOutcome {
	t.Helper()
	u.cancelCtx()
	select {
	case o := <-u.done:
		return o
	case <-time.After(5 * time.Minute):
		t.Fatal("the cancelled up did not return")
		return upOutcome{}
	}
}

// waitFor polls cond every 20 ms until it holds; it fails the test when the up ends first or after 5 min.
func waitFor(t *testing.T, up *upInFlight, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case o := <-up.done:
			t.Fatalf("the up ended before %s: %v\n%s", what, o.err, tail(o.res.Text, 40))
		default:
		}
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
