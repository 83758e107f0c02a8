package rollout

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/lease"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// The timings of every schedule: short, so that many schedules fit in a test run, and ordered so that the
// faults mean what they say (an outage outlasts the lease; a fast crash loop goes down within the stability
// window, a slow one stays up longer than it). No check depends on them: every verdict is taken from the
// fakes' state at the moment of a request, in the order the requests happen.
const (
	scheduleLease = time.Second
	// schedulePoll is the engines' poll interval: 5ms less a microsecond, so that a poll's timer never falls on
	// the same virtual instant as a deadline or a lease renewal (whole milliseconds), where Go would pick at
	// random between two ready cases of a select and a seed would not replay alike.
	schedulePoll      = 5*time.Millisecond - time.Microsecond
	scheduleStableFor = 150 * time.Millisecond
	fastLoopUp        = 40 * time.Millisecond
	fastLoopDown      = 30 * time.Millisecond
	slowLoopUp        = 250 * time.Millisecond
	slowLoopDown      = 50 * time.Millisecond
	// scheduleGuard cancels a run that has not returned by then (a hang): the run is then checked like any
	// cancelled one, and the log says so.
	scheduleGuard = 60 * time.Second
)

var scheduleLeaseGVR = coordinationv1.SchemeGroupVersion.WithResource("leases")

// moment is when something happened in a schedule, for the checks: the virtual clock's reading, for the
// account, and its place in the world's order of happenings, for every before-or-after. On virtual time many
// things happen at the same instant (a request takes no time), so only the order says which came first.
type moment struct {
	at  time.Time
	seq uint64
}

func (m moment) Before(o moment) bool { return m.seq < o.seq }
func (m moment) After(o moment) bool  { return m.seq > o.seq }
func (m moment) IsZero() bool         { return m.seq == 0 }

// now is this moment of the world, later than every moment stamped before it; w.mu is held.
func (w *world) now() moment {
	w.seq++
	return moment{at: time.Now(), seq: w.seq}
}

// world is one schedule's cluster: the unit fakes, the truth the checks read (which member really is up,
// which revision crash-loops, who holds the Lease), every engine on it, and the account of what happened.
//
// Every request of every engine, every injected event and every check runs under mu, so each request is
// atomic: its verdict compares the state right before it with the state right after it, and no other
// engine's request can fall in between.
type world struct {
	t *testing.T
	s schedule
	c *fakeCluster
	f *fakeEtcd

	mu    sync.Mutex
	start time.Time
	// seq orders every moment stamped (now).
	seq uint64
	// order serves the engines' requests one at a time in a fixed order (schedule_sequencer_test.go).
	order *sequencer
	// lines is the account: injected events, engine events, results and violations, in order.
	lines      []string
	violations []violation
	fired      map[int]bool
	// followUps are events that other events scheduled (ThenCrash), at a request count of the same run.
	followUps []schedEvent

	// badRevs are the revisions that crash-loop; loops the members crash-looping now, and since when.
	// loopsStale says something may have changed what loops (an event, a member back from a crash) since
	// syncLoops last ran: an etcd call syncs only then, as pod revisions do not change under it.
	loopsStale bool
	badRevs    map[string]bool
	loops      map[string]crashLoop
	lastInc    map[string]int
	// crashed are members down by themselves (evCrash), since when; revive when each comes back (zero: not
	// by itself).
	crashed map[string]moment
	revive  map[string]time.Time
	// unreachable are members no engine can reach while they run on.
	unreachable map[string]unreach
	outageUntil time.Time
	// outageHangs makes the outage one whose new port-forwards hang unanswered (schedEvent.Hangs).
	outageHangs bool
	templates   int
	// touched are the members the world did something to (a crash, a crash loop, unreachability), and
	// touchedAll says it did something that may reach any member (a revision that crash-loops, an outage, a
	// second engine): only those may a run fail as the member's own failure (invariant f).
	touched    map[string]bool
	touchedAll bool
	// replacedAt is when someone else last deleted each member's pod (evDelete).
	replacedAt map[string]moment
	// hidden are pods a slow controller has not created yet (schedule.SlowRecreate).
	hidden map[string]hiddenPod

	// disrupted are the members our writes restarted or deleted that have not been truly healthy since.
	disrupted map[string]bool
	// lowerer is the engine whose write left the partition lowered ("" while it is locked); killedLowered
	// is set when that engine was SIGKILLed, or returned after another run took its lease over, until somebody
	// locks the partition again: the next holder must lock it before anything else.
	lowerer, killedLowered string

	// lastDisruption is when each engine last disrupted something.
	lastDisruption map[string]moment

	// snapshotDir is where a minor upgrade's engines store their snapshots; snapshotSeen says a verified one
	// is there (invariant s).
	snapshotDir  string
	snapshotSeen bool

	engines []*schedEngine
	seconds int
	wg      sync.WaitGroup
	// ctx ends every engine's context when the schedule is over.
	ctx    context.Context
	cancel context.CancelFunc
}

// crashLoop is a member crash-looping since a moment. onRestart says it began with the member's start on a
// revision that crash-loops (a fresh process no run has watched yet), not on a member running already.
type crashLoop struct {
	since     moment
	onRestart bool
	// passedBy is the engine that had just said the member passed when it restarted and began to loop (a
	// member flapping for reasons of its own, not its revision): that engine checks it before its next
	// disruption, by the project's rules, and the check shows the new process.
	passedBy string
}

type unreach struct {
	until   time.Time // zero: until the schedule ends
	refused bool
}

// violation is one breach of a non-negotiable, found from the fakes' truth.
type violation struct {
	invariant string // "a" .. "f", as in TestSchedules' doc comment
	at        time.Duration
	engine    string
	text      string
}

func (v violation) String() string {
	return fmt.Sprintf("+%s VIOLATION (%s) %s: %s", v.at.Round(time.Millisecond), v.invariant, v.engine, v.text)
}

func newWorld(t *testing.T, s schedule) *world {
	c := newFakeCluster(t, s.Members, s.Leader, s.Updated...)
	w := &world{t: t, s: s, c: c, f: c.etcd, start: time.Now(), fired: map[int]bool{},
		badRevs: map[string]bool{}, loops: map[string]crashLoop{}, lastInc: map[string]int{},
		crashed: map[string]moment{}, revive: map[string]time.Time{}, unreachable: map[string]unreach{},
		disrupted: map[string]bool{}, lastDisruption: map[string]moment{}, touched: map[string]bool{},
		replacedAt: map[string]moment{}, hidden: map[string]hiddenPod{}}
	w.f.crashUp, w.f.crashDown = fastLoopUp, fastLoopDown
	if s.SlowLoop {
		w.f.crashUp, w.f.crashDown = slowLoopUp, slowLoopDown
	}
	w.f.startJitter = s.StartJitter
	w.slowController()
	if s.MoveAnswerLost {
		w.f.moveLeaderAnswersLost = 1
	}
	if s.LeadershipLost {
		w.f.leadershipLostAfterMove = 1
	}
	if s.MinorUpgrade {
		w.makeMinorUpgrade()
	}
	if s.Ephemeral {
		w.keepDataOnEmptyDir()
	}
	if s.SlowLearner != "" {
		w.f.membership.mark(&w.f.membership.slow, s.SlowLearner)
	}
	if s.MemberNames {
		w.f.namePrefix = "infra-"
	}
	if s.OneMember && w.snapshotDir == "" {
		w.snapshotDir = t.TempDir()
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	t.Cleanup(w.cancel)
	if s.BadRevision {
		w.touchedAll = true
		w.badRevs[newRev] = true
		w.syncLoops() // members already updated crash-loop from the start, as fresh processes
	}
	return w
}

// keepDataOnEmptyDir gives the StatefulSet's template an emptyDir data dir and makes the fake etcd's members
// lose their data with their pod, as etcd does with such a template.
func (w *world) keepDataOnEmptyDir() {
	obj, err := w.c.kube.Tracker().Get(stsGVR, "db", "etcd")
	if err != nil {
		w.t.Fatal(err)
	}
	sts := obj.(*appsv1.StatefulSet).DeepCopy()
	image := "registry.k8s.io/etcd:3.6.8-0"
	if cs := sts.Spec.Template.Spec.Containers; len(cs) > 0 && cs[0].Image != "" {
		image = cs[0].Image // a minor upgrade's (makeMinorUpgrade comes first)
	}
	etcd := corev1.Container{Name: "etcd", Image: image, Args: []string{"--data-dir=/var/lib/etcd/data"},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}}}
	if w.s.OmitsInitialState {
		// etcd's own command line, without --initial-cluster-state: it starts as "new", and no replaced member
		// can join as its learner. Every run must refuse it before it touches anything (invariant r).
		etcd.Command, etcd.Args = []string{"etcd", "--data-dir=/var/lib/etcd/data"}, nil
	}
	sts.Spec.Template.Spec = corev1.PodSpec{
		Containers: []corev1.Container{etcd},
		Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
	if err := w.c.kube.Tracker().Update(stsGVR, sts, "db"); err != nil {
		w.t.Fatal(err)
	}
	w.f.membership.ephemeral = true
}

// logf adds a line to the account; w.mu is held.
func (w *world) logf(who, format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if w.snapshotDir != "" {
		// The test's own temporary directory differs between two plays of a seed: the account names it alike.
		line = strings.ReplaceAll(line, w.snapshotDir, "<snapshot dir>")
	}
	w.lines = append(w.lines, fmt.Sprintf("+%s %s: %s", time.Since(w.start).Round(time.Millisecond), who, line))
}

// violate records a breach; w.mu is held.
func (w *world) violate(invariant string, se *schedEngine, format string, args ...any) {
	v := violation{invariant: invariant, at: time.Since(w.start), engine: se.name, text: fmt.Sprintf(format, args...)}
	w.violations = append(w.violations, v)
	w.lines = append(w.lines, v.String())
}

// since formats a moment of the schedule for the account.
func (w *world) since(m moment) string {
	return "+" + m.at.Sub(w.start).Round(time.Millisecond).String()
}

// fire applies the events due at se's request at point; w.mu is held.
func (w *world) fire(se *schedEngine, point injectionPoint) {
	w.fireAt(se, point, "")
}

// fireAt is fire for a boundary about one member (atPassed: the member that passed); w.mu is held.
func (w *world) fireAt(se *schedEngine, point injectionPoint, member string) {
	if se.run == 0 || se.killed {
		return // second engines trigger nothing (their requests are only judged), nor does a dead process
	}
	se.counts[point]++
	for i, ev := range w.s.Events {
		if w.fired[i] || ev.Run != se.run || ev.At != point || se.events < ev.AfterEvent {
			continue
		}
		w.fired[i] = true
		w.logf(se.name, "INJECTED before its %s %s (after %d of its events): %s", ordinalWord(se.counts[point]), point, se.events, ev.what())
		w.apply(se, ev, member)
	}
	for i, ev := range w.followUps {
		if ev.Run == se.run && ev.At == point && ev.Nth == se.counts[point] {
			w.followUps = slices.Delete(w.followUps, i, i+1)
			w.logf(se.name, "INJECTED before its %s %s: %s", ordinalWord(ev.Nth), point, ev.what())
			w.apply(se, ev, member)
			break
		}
	}
}

// apply makes one event happen; w.mu is held.
func (w *world) apply(se *schedEngine, ev schedEvent, member string) {
	w.loopsStale = true
	pod := planner.PodName("etcd", ev.Pod)
	switch ev.Kind {
	case evTemplate:
		w.touchedAll = w.touchedAll || ev.Bad
		w.writeTemplate(ev.Bad)
	case evCrash:
		w.touched[pod] = true
		w.crash(pod, ev.For)
	case evCrashLoop:
		if member != "" {
			w.touched[member] = true
			w.flapAfterPass(se, member)
			return
		}
		w.touchedAll = true
		w.startCrashLoop()
	case evUnreachable:
		w.touched[pod] = true
		u := unreach{refused: ev.Refused}
		if ev.For > 0 {
			u.until = time.Now().Add(ev.For)
		}
		w.unreachable[pod] = u
		if ev.ThenCrash {
			w.followUps = append(w.followUps, schedEvent{Kind: evCrash, Run: se.run, At: atStatus, Nth: se.counts[atStatus] + ev.ThenAfter, Pod: ev.ThenCrashPod})
		}
	case evOutage:
		w.touchedAll = true
		until := time.Now().Add(ev.For)
		if ev.RunOnly {
			se.outageUntil, se.outageHangs = until, ev.Hangs
		} else {
			w.outageUntil, w.outageHangs = until, ev.Hangs
		}
		if ev.WithSecond {
			w.startSecond()
		}
	case evSecond:
		w.touchedAll = true
		w.startSecond()
	case evDelete:
		if member != "" {
			pod = member // the member the boundary is about (atPromoted: the one just promoted)
		}
		w.deleteByOther(pod, ev.For)
	case evCancel:
		se.cancel()
	case evKill:
		se.killed = true
		se.cancel()
		if w.lowerer == se.name {
			w.killedLowered = se.name
		}
	}
}

// writeTemplate is another writer's apply of a new pod template: the generation moves and the controller
// observes it at once, with a new update revision; it rolls nothing by itself while the partition is locked.
func (w *world) writeTemplate(bad bool) {
	obj, err := w.c.kube.Tracker().Get(stsGVR, "db", "etcd")
	if err != nil {
		w.logf("world", "template not written: %v", err)
		return
	}
	sts := obj.(*appsv1.StatefulSet).DeepCopy()
	w.templates++
	rev := fmt.Sprintf("etcd-rev%d", w.templates+2)
	if sts.Spec.Template.Annotations == nil {
		sts.Spec.Template.Annotations = map[string]string{}
	}
	sts.Spec.Template.Annotations["written-by"] = rev
	sts.Generation++
	sts.Status.ObservedGeneration = sts.Generation
	sts.Status.UpdateRevision = rev
	w.badRevs[rev] = bad
	if err := w.c.kube.Tracker().Update(stsGVR, sts, "db"); err != nil {
		w.logf("world", "template not written: %v", err)
		return
	}
	w.logf("world", "StatefulSet generation %d, updateRevision %s", sts.Generation, rev)
}

// crash takes a member down by itself; if it led, the others elect (an election nobody planned). At most a
// minority is down by itself at once, so the fakes always have someone to elect.
func (w *world) crash(pod string, lasting time.Duration) {
	if w.minorityDown("crash", pod) {
		return
	}
	f := w.f
	f.mu.Lock()
	f.down[pod] = true
	if f.leader == pod {
		var up []string
		for p := range f.ids {
			if !f.isDown(p) {
				up = append(up, p)
			}
		}
		sort.Strings(up)
		if len(up) > 0 {
			f.leader = up[0]
			f.term++
			f.elections++
		}
	}
	f.mu.Unlock()
	w.crashed[pod] = w.now()
	if lasting > 0 {
		w.revive[pod] = time.Now().Add(lasting)
	}
}

// minorityDown says as many members are down by themselves as the world lets be, so that the fakes always
// have a majority to elect from; it then logs that the crash or delete of pod is skipped. w.mu is held.
func (w *world) minorityDown(what, pod string) bool {
	if len(w.crashed) < (w.s.Members-1)/2 {
		return false
	}
	w.logf("world", "%s of %s skipped: %d member(s) down by themselves already", what, pod, len(w.crashed))
	return true
}

// deleteByOther is someone else's delete of a member's pod: the controller recreates it (fakeCluster.recreate
// picks the revision from the partition) and its etcd is down for lasting, as after any restart. Like a
// crash it leaves a majority up: one skipped is logged. A member replaced after it passed is no failure of
// the revision (checkBlame); w.mu is held.
func (w *world) deleteByOther(pod string, lasting time.Duration) {
	if w.minorityDown("delete", pod) {
		return
	}
	if err := w.c.recreate(k8stesting.NewDeleteAction(podGVR, "db", pod)); err != nil {
		w.logf("world", "delete of %s failed: %v", pod, err)
		return
	}
	w.replacedAt[pod] = w.now()
	// Whatever our writes did to the member, it is someone else's doing from here on: (a) is about the members
	// our writes disrupted (seed 7402 of 10,000 held a member that a stranger's delete took down against a run
	// that never touched it).
	delete(w.disrupted, pod)
	ordinal, _ := planner.OrdinalOf("etcd", pod)
	w.logf("world", "%s's pod deleted by someone else; recreated at %s", pod, w.revisionsNow()[ordinal])
	w.crash(pod, lasting)
}

// startCrashLoop makes the update revision crash-loop from now on, on the members running it too.
func (w *world) startCrashLoop() {
	rev := w.stsNow().Status.UpdateRevision
	w.badRevs[rev] = true
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	for i, r := range w.revisionsNow() {
		pod := planner.PodName("etcd", i)
		if r == rev && !w.f.down[pod] {
			w.f.crashStart[pod] = time.Now()
			w.loops[pod] = crashLoop{since: w.now()}
		}
	}
}

// flapAfterPass restarts a member that se just said passed, and makes it crash-loop from then on, whatever
// its revision (until its pod is restarted); w.mu is held.
func (w *world) flapAfterPass(se *schedEngine, pod string) {
	f := w.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[pod] {
		return
	}
	w.foldLoop(pod)
	f.bumpIncarnation(pod)
	w.lastInc[pod] = f.incarnations[pod]
	f.crashStart[pod] = time.Now()
	w.loops[pod] = crashLoop{since: w.now(), passedBy: se.name}
}

// tick brings back the crashed members that are due, and forgets crashes that ended otherwise (their pod was
// recreated); w.mu is held.
func (w *world) tick() {
	w.createDue()
	f := w.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for pod, since := range w.crashed {
		at, timed := w.revive[pod]
		switch {
		case !f.down[pod]:
			w.logf("world", "%s (crashed at %s) is up again: its pod was restarted", pod, w.since(since))
		case timed && !time.Now().Before(at):
			delete(f.down, pod)
			f.bumpIncarnation(pod)
			w.loopsStale = true
			w.logf("world", "%s (crashed at %s) is back, from a new process", pod, w.since(since))
		default:
			continue
		}
		delete(w.crashed, pod)
		delete(w.revive, pod)
	}
}

// syncLoops keeps crash loops on the revisions that crash-loop: a member started on such a revision loops
// from its start, one started on another revision stops looping; w.mu is held.
func (w *world) syncLoops() {
	w.loopsStale = false
	revs := w.revisionsNow()
	f := w.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, rev := range revs {
		pod := planner.PodName("etcd", i)
		_, looping := f.crashStart[pod]
		restarted := f.incarnations[pod] != w.lastInc[pod]
		switch {
		case w.badRevs[rev] && (!looping || restarted) && !f.down[pod]:
			w.foldLoop(pod)
			f.crashStart[pod] = time.Now()
			w.loops[pod] = crashLoop{since: w.now(), onRestart: true}
		case looping && w.loops[pod].passedBy != "" && !restarted:
			// a member flapping by itself keeps flapping until its pod restarts
		case !w.badRevs[rev] && looping:
			w.foldLoop(pod)
			delete(f.crashStart, pod)
			delete(w.loops, pod)
		}
		w.lastInc[pod] = f.incarnations[pod]
	}
}

// foldLoop adds the restarts of a member's crash loop so far to its incarnations, so the process names it
// reports never repeat once the loop restarts or ends; f.mu is held.
func (w *world) foldLoop(pod string) {
	f := w.f
	if f.incarnations == nil {
		f.incarnations = map[string]int{}
	}
	if start, ok := f.crashStart[pod]; ok {
		f.incarnations[pod] += int(time.Since(start) / (f.crashUp + f.crashDown))
	}
}

// refusedKube is the error se's Kubernetes request gets instead of an answer, if any; w.mu is held.
func (w *world) refusedKube(se *schedEngine) error {
	switch {
	case se.killed:
		return errKilled
	case time.Now().Before(w.outageUntil) || time.Now().Before(se.outageUntil):
		return errOutage
	}
	return nil
}

// refusedEtcd is the error se's etcd call to pod gets without reaching it, if any; w.mu is held.
func (w *world) refusedEtcd(se *schedEngine, pod string) error {
	switch {
	case se.killed:
		return fmt.Errorf("etcd call to %s: process killed", pod)
	case time.Now().Before(w.outageUntil) && w.outageHangs:
		return &hangingForward{pod: pod, until: w.outageUntil}
	case time.Now().Before(se.outageUntil) && se.outageHangs:
		return &hangingForward{pod: pod, until: se.outageUntil}
	case time.Now().Before(w.outageUntil) || time.Now().Before(se.outageUntil):
		return fmt.Errorf("%w: port-forward to db/%s: the API server is away", member.ErrNoLook, pod)
	}
	u, ok := w.unreachable[pod]
	if !ok || (!u.until.IsZero() && !time.Now().Before(u.until)) {
		return nil
	}
	if u.refused {
		return fmt.Errorf("status of %s: connection refused", pod)
	}
	return fmt.Errorf("%w: port-forward to db/%s: no route to the kubelet", member.ErrNoLook, pod)
}

// stsNow is the StatefulSet as the tracker holds it; w.mu is held.
func (w *world) stsNow() *appsv1.StatefulSet {
	obj, err := w.c.kube.Tracker().Get(stsGVR, "db", "etcd")
	if err != nil {
		w.t.Errorf("reading the fake StatefulSet: %v", err)
		return &appsv1.StatefulSet{}
	}
	return obj.(*appsv1.StatefulSet)
}

// revisionsNow is each pod's revision, "" for a pod that does not exist; w.mu is held.
func (w *world) revisionsNow() []string {
	out := make([]string, w.s.Members)
	for i := range out {
		if obj, err := w.c.kube.Tracker().Get(podGVR, "db", planner.PodName("etcd", i)); err == nil {
			out[i] = obj.(*corev1.Pod).Labels[appsv1.ControllerRevisionHashLabelKey]
		}
	}
	return out
}

// holderNow is who holds the rollout Lease in the tracker ("" for nobody); w.mu is held.
func (w *world) holderNow() string {
	obj, err := w.c.kube.Tracker().Get(scheduleLeaseGVR, "db", lease.Name("etcd"))
	if err != nil {
		return ""
	}
	return ptr.Deref(obj.(*coordinationv1.Lease).Spec.HolderIdentity, "")
}

func (w *world) electionsNow() int {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	return w.f.elections
}

// report is what a failing schedule prints: the schedule, the account, the violations and how to replay it.
func (w *world) report(kinds []eventKind) string {
	var b strings.Builder
	b.WriteString(w.s.String())
	b.WriteString("account:\n")
	for _, l := range w.lines {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("violations:\n")
	for _, v := range w.violations {
		b.WriteString("  " + v.String() + "\n")
	}
	fmt.Fprintf(&b, "replay: %s\n", replayCommand(w.s.Seed, kinds))
	return b.String()
}

func replayCommand(seed uint64, kinds []eventKind) string {
	names := make([]string, 0, len(kinds))
	for _, k := range kinds {
		names = append(names, string(k))
	}
	return fmt.Sprintf("ROLLOUT_SCHEDULE_SEED=%d ROLLOUT_SCHEDULE_EVENTS=%s go test ./rollout/ -run 'TestSchedules$' -count=1 -v",
		seed, strings.Join(names, ","))
}

// hangingForward is an etcd call on a port-forward that an API server dropped and whose new one it accepts
// without answering: the call waits out its deadline, or the outage, and reaches nobody (member.ErrNoLook, as
// the member layer says of a call whose path was still opening: memberdial.Opening).
type hangingForward struct {
	pod   string
	until time.Time
}

func (h *hangingForward) Error() string {
	return fmt.Sprintf("port-forward to db/%s: the API server dropped the forward and does not answer a new one", h.pod)
}

// wait holds the call until ctx ends or the outage does, outside the world's lock, and says what it came to.
func (h *hangingForward) wait(ctx context.Context) error {
	t := time.NewTimer(time.Until(h.until))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return fmt.Errorf("%w: %v: %w", member.ErrNoLook, h, context.DeadlineExceeded)
}
