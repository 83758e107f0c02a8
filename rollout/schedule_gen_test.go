package rollout

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// A schedule is one randomized day in production for the executor: a starting state (members an earlier run
// left updated, a revision that crash-loops) and events injected at the engine's own request boundaries
// (before its n-th StatefulSet patch, pod delete, pod get, Lease update, or etcd call), which is where it is
// between its observation and its writes. It is made from a seed alone, so a failing one is replayed from
// the seed it prints.

// eventKind is what happens to the cluster, the API server or the engine.
type eventKind string

const (
	// evTemplate is another writer's template change (kubectl, another stack): generation and
	// status.updateRevision move; half of the new revisions crash-loop.
	evTemplate eventKind = "template"
	// evCrash is a member's etcd going down by itself (it leads: the others elect); it comes back after a
	// while from a new process, or stays down until its pod is recreated.
	evCrash eventKind = "crash"
	// evCrashLoop makes the update revision crash-loop: every member on it, and every member restarted onto
	// it later.
	evCrashLoop eventKind = "crashloop"
	// evUnreachable makes a member unreachable to every engine (no port-forward opens, or its client port
	// refuses us) while it runs on and votes.
	evUnreachable eventKind = "unreachable"
	// evOutage is the API server (or only this run's path to it) away for longer than the lease; port-forwards
	// go through it, so no etcd look reaches either.
	evOutage eventKind = "outage"
	// evSecond starts a second engine (another holder) on the same cluster, overlapping this run.
	evSecond eventKind = "second"
	// evCancel cancels the run's context (Ctrl-C, a customTimeout).
	evCancel eventKind = "cancel"
	// evKill is a SIGKILL: from then on every request of the run fails and its deferred exit writes nothing;
	// a fresh Engine with another holder resumes.
	evKill eventKind = "kill"
	// evDelete is someone else deleting a member's pod (kubectl, a node drain, the StatefulSet controller
	// acting on a stale view after an API server restart): the controller recreates it at once, at the
	// update revision if its ordinal is at or above the partition, else at the current one, and its etcd is
	// down for a while (a restart). It is drawn from a stream of its own (deleteStream), so adding it left
	// every earlier seed's other events as they were.
	evDelete eventKind = "delete"
)

var allEventKinds = []eventKind{evTemplate, evCrash, evCrashLoop, evUnreachable, evOutage, evSecond, evCancel, evKill, evDelete}

// deleteStream seeds the stream evDelete events are drawn from.
const deleteStream = 0xde1

// moveStream seeds the stream of the leader moves' faults (schedule.MoveAnswerLost, LeadershipLost).
const moveStream = 0x7a2

// longOutageStream seeds the stream that stretches one outage in eight to several leases (stretchOutages).
const longOutageStream = 0x10f6

// ephemeralStream seeds the draw of clusters whose members' data dies with their pod, and of the events moved
// into their replacements' crash windows (drawEphemeral).
const ephemeralStream = 0xe4e

// slowAPIStream seeds the draw of an API server that answers late (schedule.APILatency, WatchLag).
const slowAPIStream = 0x51a

// latencyStream seeds the latencies of one schedule's requests, drawn in the sequencer's order.
const latencyStream = 0x1a7

// maxLatency bounds a request's latency: under a quarter of the lease, the margin between the last moment a
// run writes within its lease (withinLease: three quarters of it after a renewal) and the first a takeover
// may land (a whole lease unrenewed). No engine can keep a write that arrives later than that off the next
// holder's roll, so a fair schedule draws no such latency.
const maxLatency = scheduleLease / 5

// injectionPoint names a request boundary of one engine: a Kubernetes verb and resource, or an etcd call.
type injectionPoint string

const (
	atPatchSts    injectionPoint = "patch statefulsets"
	atDeletePod   injectionPoint = "delete pods"
	atGetPod      injectionPoint = "get pods"
	atUpdateLease injectionPoint = "update leases"
	atStatus      injectionPoint = "etcd Status"
	atMoveLeader  injectionPoint = "etcd MoveLeader"
	atIncarnation injectionPoint = "etcd Incarnation"
	// The membership changes of a replacement (members whose data dies with their pod): a kill or a crash
	// right before one lands in its crash window.
	atMemberRemove  injectionPoint = "etcd MemberRemove"
	atMemberAdd     injectionPoint = "etcd MemberAddAsLearner"
	atMemberPromote injectionPoint = "etcd MemberPromote"
	// atPassed is the engine's own step boundary "a member passed its gates" (its event saying so): a crash
	// loop injected there is the member that passed restarting at once and flapping from then on.
	atPassed injectionPoint = "report of a member that passed"
	// atPromoted is right after a replacement's promote landed: someone else deleting the pod there recreates
	// the new voter's pod with an empty data dir under the ID just promoted (review 3, item 1).
	atPromoted injectionPoint = "answer of a promote"
)

// pointChoices are the boundaries events are drawn on.
var pointChoices = []injectionPoint{atPatchSts, atDeletePod, atGetPod, atUpdateLease, atStatus, atMoveLeader, atIncarnation, atPassed}

// maxAfterEvent bounds how far into a run (counted in the run's own events, its step boundaries) an event
// waits: a run of 3 members says some 15 to 30 things.
const maxAfterEvent = 16

// schedEvent is one injected event: its kind, the run whose request triggers it and where, and its details.
type schedEvent struct {
	Kind eventKind
	Run  int // the run (1-based) whose request triggers it
	At   injectionPoint
	// AfterEvent: it strikes at the run's first request at At once the run has said that many things (its
	// events, which mark its steps). Tying events to the run's own steps rather than to a count of its
	// polls is what makes a replay strike at the same step.
	AfterEvent int
	// Nth, when set, makes it strike at exactly the run's nth request at At instead (follow-ups).
	Nth int
	Pod int // crash, unreachable: the member
	// For is how long a crash, an unreachability or an outage lasts; a crash with 0 stays down until its pod
	// is recreated, an unreachability with 0 lasts until the schedule ends.
	For time.Duration
	// Refused (unreachable) makes the client port refuse us instead of no port-forward opening; RunOnly
	// (outage) cuts only this run's path to the API server.
	Refused, RunOnly bool
	// Bad (template) makes the new revision crash-loop.
	Bad bool
	// WithSecond (outage) starts a second engine as the outage begins: its run overlaps the outage, which
	// is what a takeover of a live run's lease takes.
	WithSecond bool
	// Hangs (outage) makes the API server drop every port-forward and then accept new ones without answering:
	// an etcd look waits out its deadline (or the outage) and reaches nobody (drawHangingOutages).
	Hangs bool
	// ThenCrash (unreachable) crashes another member, for good, at the ThenAfter-th etcd Status call after the
	// unreachability began: a second fault while the first one hides a member.
	ThenCrash               bool
	ThenCrashPod, ThenAfter int
}

func (ev schedEvent) String() string {
	return ev.where() + ": " + ev.what()
}

// where says at which of its run's requests the event strikes.
func (ev schedEvent) where() string {
	switch {
	case ev.Nth > 0:
		return fmt.Sprintf("run-%d before its %s %s", ev.Run, ordinalWord(ev.Nth), ev.At)
	case ev.AfterEvent == 0:
		return fmt.Sprintf("run-%d before its first %s", ev.Run, ev.At)
	}
	return fmt.Sprintf("run-%d before its first %s after its %s event", ev.Run, ev.At, ordinalWord(ev.AfterEvent))
}

// what describes the event itself.
func (ev schedEvent) what() string {
	lasting := func() string {
		if ev.For == 0 {
			return ""
		}
		return " for " + ev.For.String()
	}
	switch ev.Kind {
	case evTemplate:
		if ev.Bad {
			return "template written by someone else (its revision crash-loops)"
		}
		return "template written by someone else"
	case evCrash:
		if ev.For == 0 {
			return fmt.Sprintf("etcd-%d crashes and stays down until its pod is recreated", ev.Pod)
		}
		return fmt.Sprintf("etcd-%d crashes, back from a new process after %s", ev.Pod, ev.For)
	case evCrashLoop:
		if ev.At == atPassed {
			return "the member that passed restarts at once and crash-loops from then on"
		}
		return "the update revision starts crash-looping"
	case evUnreachable:
		how := "no port-forward to it opens"
		if ev.Refused {
			how = "its client port refuses us"
		}
		what := fmt.Sprintf("etcd-%d unreachable to us, still voting (%s)%s", ev.Pod, how, lasting())
		if ev.ThenCrash {
			what += fmt.Sprintf("; %s Status calls later etcd-%d crashes and stays down", strconv.Itoa(ev.ThenAfter), ev.ThenCrashPod)
		}
		return what
	case evOutage:
		what := "API server outage" + lasting()
		if ev.RunOnly {
			what = "this run's path to the API server is cut" + lasting()
		}
		if ev.Hangs {
			what += " (forwards dropped; new ones hang unanswered)"
		}
		if ev.WithSecond {
			what += ", and a second engine starts a run meanwhile"
		}
		return what
	case evSecond:
		return "a second engine starts a run"
	case evCancel:
		return "the run's context is cancelled"
	case evKill:
		return "the run is SIGKILLed; a fresh engine resumes"
	case evDelete:
		if ev.At == atPromoted {
			return fmt.Sprintf("someone else deletes the promoted member's pod; the controller recreates it, its etcd back after %s", ev.For)
		}
		return fmt.Sprintf("someone else deletes etcd-%d's pod; the controller recreates it, its etcd back after %s", ev.Pod, ev.For)
	}
	return string(ev.Kind)
}

func ordinalWord(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return fmt.Sprintf("%dth", n)
	case n%10 == 1:
		return fmt.Sprintf("%dst", n)
	case n%10 == 2:
		return fmt.Sprintf("%dnd", n)
	case n%10 == 3:
		return fmt.Sprintf("%drd", n)
	}
	return fmt.Sprintf("%dth", n)
}

// schedule is the starting state and the events of one randomized test.
type schedule struct {
	Seed    uint64
	Members int
	Leader  int
	// Updated are members an earlier run left at the update revision.
	Updated []int
	// BadRevision makes the update revision crash-loop from the start.
	BadRevision bool
	// SlowLoop makes crash loops slower than the stability window (up longer than it), else faster.
	SlowLoop bool
	Cooldown time.Duration
	// StartJitter makes every other read of a member's process start a second late without a restart, as
	// Linux reports it now and then (bootTimeJitter).
	StartJitter bool
	// MoveAnswerLost makes the first MoveLeader move the leader but answer with a timeout, as when its answer
	// is lost on the way back; LeadershipLost makes the first successful one followed at once by an election
	// that takes the leadership from the new leader (moveStream).
	MoveAnswerLost, LeadershipLost bool
	// Ephemeral makes every member keep its data on an emptyDir: every roll is a replacement (remove, learner,
	// promote), and a pod recreated while its member is listed comes back under its old ID with an empty log.
	Ephemeral bool
	// SlowLearner (with Ephemeral) names the member whose learner never catches up once it is replaced: its
	// applied index stays at 0 and etcd refuses to promote it.
	SlowLearner string
	// APILatency makes one request in three reach the API server (or, through its port-forward, a member) up
	// to maxLatency after it was sent: a write can land after the confirmation of the lease it was decided on,
	// and after its caller's deadline (applied, its answer lost). WatchLag delays every event of the engines'
	// watches by that much: their caches lag the API server.
	APILatency bool
	WatchLag   time.Duration
	// SlowRecreate is how long the StatefulSet controller takes to create a pod our writes made it recreate
	// (0: at once): the pod is gone meanwhile (drawSlowController).
	SlowRecreate time.Duration
	// MinorUpgrade makes the template move the members from etcd 3.5 to 3.6: a snapshot comes before the first
	// disruption (drawMinorUpgrade).
	MinorUpgrade bool
	// MemberNames makes etcd's member names other than the pods' (--name from something else): members are
	// found by ID and peer URL (drawShapes). DigestImages (with MinorUpgrade) pins both revisions' images by
	// tag and digest. OmitsInitialState (with Ephemeral) gives the template an etcd command without
	// --initial-cluster-state: every run must refuse it before it touches anything (invariant r).
	MemberNames, DigestImages, OmitsInitialState bool
	// OneMember makes the StatefulSet a one-member etcd (drawOneMember); AcceptOutage gives the engines
	// Config.AcceptWriteOutage: only then may its member restart, after a verified snapshot.
	OneMember, AcceptOutage bool
	// Runs is how many runs may go: each one that does not succeed is resumed by a fresh engine.
	Runs   int
	Events []schedEvent
}

func (s schedule) String() string {
	var b strings.Builder
	loop := "fast (down within the stability window)"
	if s.SlowLoop {
		loop = "slow (up for longer than the stability window)"
	}
	if s.OneMember {
		fmt.Fprintf(&b, "one-member etcd, write outage accepted: %v; ", s.AcceptOutage)
	}
	if s.MemberNames || s.DigestImages || s.OmitsInitialState {
		fmt.Fprintf(&b, "member names other than the pods': %v, images pinned by tag@digest: %v, template without --initial-cluster-state: %v; ", s.MemberNames, s.DigestImages, s.OmitsInitialState)
	}
	fmt.Fprintf(&b, "seed %d: %d members, leader etcd-%d, updated already %v, update revision crash-loops from the start: %v, crash loops %s, cool-down %s, process starts jitter by a second: %v, first leader move's answer lost: %v, first moved leadership lost at once: %v, data dies with the pod: %v, learner that never catches up: %q, requests late by up to %s: %v, watches lag by %s, pods recreated after %s, 3.5 → 3.6: %v, up to %d runs\n",
		s.Seed, s.Members, s.Leader, podNames(s.Updated), s.BadRevision, loop, s.Cooldown, s.StartJitter, s.MoveAnswerLost, s.LeadershipLost, s.Ephemeral, s.SlowLearner, maxLatency, s.APILatency, s.WatchLag, s.SlowRecreate, s.MinorUpgrade, s.Runs)
	for _, ev := range s.Events {
		fmt.Fprintf(&b, "  event: %s\n", ev)
	}
	return b.String()
}

func podNames(ordinals []int) []string {
	out := make([]string, 0, len(ordinals))
	for _, o := range ordinals {
		out = append(out, planner.PodName("etcd", o))
	}
	return out
}

// generateSchedule draws a schedule from seed, with events of the enabled kinds only.
func generateSchedule(seed uint64, enabled []eventKind) schedule {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	s := schedule{Seed: seed, Members: 3, Runs: 1}
	// Drawn from a stream of its own, so that adding it left every earlier seed's schedule as it was.
	s.StartJitter = rand.New(rand.NewPCG(seed, 0x717)).IntN(2) == 0
	moves := rand.New(rand.NewPCG(seed, moveStream))
	s.MoveAnswerLost, s.LeadershipLost = moves.IntN(6) == 0, moves.IntN(6) == 0
	if rng.IntN(5) == 0 {
		s.Members = 5
	}
	s.Leader = rng.IntN(s.Members)
	if rng.IntN(3) == 0 {
		// An earlier run left the highest members updated (partitions go N-1 down to 0).
		for i := s.Members - 1; i >= s.Members-1-rng.IntN(2); i-- {
			s.Updated = append(s.Updated, i)
		}
	}
	s.BadRevision = slices.Contains(enabled, evCrashLoop) && rng.IntN(3) == 0
	s.SlowLoop = rng.IntN(3) == 0
	if rng.IntN(3) == 0 {
		s.Cooldown = 100 * time.Millisecond
	}
	s.Events = drawDeletes(seed, enabled, s)
	enabled = slices.DeleteFunc(slices.Clone(enabled), func(k eventKind) bool { return k == evDelete })
	if len(enabled) == 0 {
		return s
	}
	n := 1 + rng.IntN(4)
	for i := 0; i < n; i++ {
		ev := drawEvent(rng, enabled[rng.IntN(len(enabled))], s)
		ev.WithSecond = ev.Kind == evOutage && slices.Contains(enabled, evSecond) && rng.IntN(2) == 0
		if ev.Kind == evUnreachable && slices.Contains(enabled, evCrash) && rng.IntN(2) == 0 {
			ev.ThenCrash, ev.ThenCrashPod, ev.ThenAfter = true, (ev.Pod+1+rng.IntN(s.Members-1))%s.Members, 3+rng.IntN(30)
		}
		s.Events = append(s.Events, ev)
		s.Runs = max(s.Runs, ev.Run)
		if ev.Kind == evCancel || ev.Kind == evKill {
			s.Runs = max(s.Runs, ev.Run+1)
		}
	}
	if rng.IntN(2) == 0 {
		s.Runs++ // one more resume, after whatever failure the schedule causes
	}
	s.Runs = min(s.Runs, 3)
	stretchOutages(seed, s.Events)
	drawEphemeral(seed, &s)
	drawSlowAPI(seed, &s)
	drawSlowController(seed, &s)
	drawMinorUpgrade(seed, &s)
	drawOneMember(seed, &s)
	drawShapes(seed, &s)
	drawHangingOutages(seed, s.Events)
	drawDeleteAfterPromote(seed, &s)
	return s
}

// shapesStream seeds drawShapes, hangStream drawHangingOutages, promotedDeleteStream drawDeleteAfterPromote.
const shapesStream, hangStream, promotedDeleteStream = 0x9a3, 0x4a9, 0xa9a

// drawShapes draws review 3's shapes (issue 43), each from a stream of its own: member names other than the
// pods' in one schedule in four; with a minor upgrade, images pinned by tag@digest in one in two, and data
// that dies with the pod in one in three of the ephemeral ones; with ephemeral members, a template without
// --initial-cluster-state in one in six.
func drawShapes(seed uint64, s *schedule) {
	rng := rand.New(rand.NewPCG(seed, shapesStream))
	s.MemberNames = rng.IntN(4) == 0
	if s.Ephemeral && !s.OneMember && rng.IntN(3) == 0 {
		s.MinorUpgrade = true
	}
	s.DigestImages = s.MinorUpgrade && rng.IntN(2) == 0
	s.OmitsInitialState = s.Ephemeral && rng.IntN(6) == 0
}

// drawHangingOutages makes one outage in two one whose API server drops every port-forward and leaves new ones
// hanging (review 2, item 5): an etcd look then waits out its deadline instead of failing at once.
func drawHangingOutages(seed uint64, events []schedEvent) {
	rng := rand.New(rand.NewPCG(seed, hangStream))
	for i := range events {
		if events[i].Kind == evOutage {
			events[i].Hangs = rng.IntN(2) == 0
		}
	}
}

// drawDeleteAfterPromote gives one ephemeral schedule in three someone else's delete of a replaced member's pod
// right after its promote landed (review 3, item 1): the pod comes back empty under the ID just promoted.
func drawDeleteAfterPromote(seed uint64, s *schedule) {
	rng := rand.New(rand.NewPCG(seed, promotedDeleteStream))
	if !s.Ephemeral || rng.IntN(3) > 0 {
		return
	}
	s.Events = append(s.Events, schedEvent{Kind: evDelete, Run: 1, At: atPromoted, AfterEvent: rng.IntN(maxAfterEvent),
		For: time.Duration(100+rng.IntN(600)) * time.Millisecond})
}

// drawSlowAPI makes one schedule in four one whose requests are late (APILatency), and one in four (drawn
// apart) one whose watches lag the API server by 20 to 500 ms, a tenth to a half of the lease: in
// production's 15 s lease, seconds (issue 31, item 4). It draws from a stream of its own, so every other draw
// of a seed stays as it was.
func drawSlowAPI(seed uint64, s *schedule) {
	rng := rand.New(rand.NewPCG(seed, slowAPIStream))
	s.APILatency = rng.IntN(4) == 0
	if rng.IntN(4) == 0 {
		s.WatchLag = time.Duration(20+rng.IntN(481)) * time.Millisecond
	}
}

// drawEphemeral makes one schedule in four a cluster whose members' data dies with their pod (issue 32), moves
// half of its events to a replacement's own request boundaries (remove, add, promote), so that kills,
// crashes, cancels and outages land in its crash windows, and gives one in three a learner that never
// catches up. It draws from a stream of its own, so every other
// draw of a seed stays as it was.
func drawEphemeral(seed uint64, s *schedule) {
	rng := rand.New(rand.NewPCG(seed, ephemeralStream))
	if rng.IntN(4) > 0 {
		return
	}
	s.Ephemeral = true
	points := []injectionPoint{atMemberRemove, atMemberAdd, atMemberPromote}
	for i := range s.Events {
		if at := points[rng.IntN(len(points))]; rng.IntN(2) == 0 && s.Events[i].At != atPassed && s.Events[i].Nth == 0 {
			s.Events[i].At = at
		}
	}
	if rng.IntN(3) == 0 {
		s.SlowLearner = fmt.Sprintf("etcd-%d", rng.IntN(s.Members))
	}
}

// stretchOutages makes one outage in eight last 3 to 12 leases instead of up to two: longer than both gates'
// timeouts and than a takeover takes, as an API server restart outlasts a 15 s lease by tens of seconds (issue
// 31, item 4). It draws from a stream of its own, so every other draw of a seed stays as it was.
func stretchOutages(seed uint64, events []schedEvent) {
	rng := rand.New(rand.NewPCG(seed, longOutageStream))
	for i := range events {
		if events[i].Kind == evOutage && rng.IntN(8) == 0 {
			events[i].For = time.Duration(3+rng.IntN(10))*scheduleLease + time.Duration(rng.IntN(1000))*time.Millisecond
		}
	}
}

// drawDeletes draws a schedule's evDelete events, one in three schedules, from their own stream.
func drawDeletes(seed uint64, enabled []eventKind, s schedule) []schedEvent {
	if !slices.Contains(enabled, evDelete) {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, deleteStream))
	if rng.IntN(3) > 0 {
		return nil
	}
	ev := drawEvent(rng, evDelete, s)
	ev.Run = 1
	return []schedEvent{ev}
}

// drawEvent draws where and how an event of kind strikes.
func drawEvent(rng *rand.Rand, kind eventKind, s schedule) schedEvent {
	ev := schedEvent{Kind: kind, Run: 1 + rng.IntN(2), At: pointChoices[rng.IntN(len(pointChoices))], AfterEvent: rng.IntN(maxAfterEvent),
		Pod: rng.IntN(s.Members)}
	if rng.IntN(2) == 0 {
		ev.Run = 1
	}
	switch kind {
	case evTemplate:
		ev.Bad = rng.IntN(2) == 0
	case evCrash:
		if rng.IntN(3) > 0 {
			ev.For = time.Duration(100+rng.IntN(600)) * time.Millisecond
		}
	case evUnreachable:
		ev.Refused = rng.IntN(3) == 0
		if rng.IntN(3) > 0 {
			ev.For = time.Duration(200+rng.IntN(1500)) * time.Millisecond
		}
	case evDelete:
		ev.For = time.Duration(100+rng.IntN(600)) * time.Millisecond
	case evOutage:
		ev.RunOnly = rng.IntN(2) == 0
		ev.For = scheduleLease + time.Duration(50+rng.IntN(1200))*time.Millisecond
	}
	return ev
}
