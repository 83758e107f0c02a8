package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// errOutage is what every request gets while the API server is away: transient, so the engine retries.
var errOutage = apierrors.NewServiceUnavailable("injected outage: the API server is away")

// errKilled answers every request of a SIGKILLed engine: a process that is gone sends nothing, so nothing it
// would still send may reach the cluster. It is final (not found), so the dead engine's goroutines end soon
// instead of retrying into the next run.
var errKilled = apierrors.NewNotFound(schema.GroupResource{Resource: "anything"}, "the process was SIGKILLed")

// schedEngine is one engine on a world, with what the checks know of it: its own requests only.
type schedEngine struct {
	w    *world
	name string // its Lease holder identity
	// run is the run whose events its requests trigger (1-based); 0 for a second engine, which triggers none.
	run    int
	e      *Engine
	ctx    context.Context
	cancel context.CancelFunc
	killed bool
	// outageUntil cuts only this engine's path to the API server; outageHangs makes its new forwards hang.
	outageUntil time.Time
	outageHangs bool
	counts      map[injectionPoint]int
	// events counts what it said (its events): its step boundaries.
	events int

	// lastCall is when it last called each member's etcd (reached or not); lastStatus its last health look
	// (Status) that reached each member, sawDown the last such look that found it down; incarnations the
	// process names it read, and when.
	lastCall     map[string]moment
	lastStatus   map[string]statusLook
	sawDown      map[string]moment
	incarnations map[string][]incarnationRead
	// passedAt is when it last said a member passed its gates (its own events).
	passedAt map[string]moment

	startedAt moment
	// Elections counted by the fake at its start and end, and around its first and last disruption.
	elStart, elFirstDisruption, elLastDisruption int
	// restarts counts the members this engine's writes exposed to a restart (invariant e's bound on the
	// elections of a one-member etcd's own restarts).
	restarts  int
	disrupted bool

	// permits are the gate's permits to this engine's run, in the order given (invariant p); permitsMu guards
	// them, since the engine gives them outside the world's lock.
	permitsMu sync.Mutex
	permits   []gate.Permit
}

// notePermit is the engine's permitted hook: it keeps every permit the gate gave this engine's run.
func (se *schedEngine) notePermit(p gate.Permit) {
	se.permitsMu.Lock()
	defer se.permitsMu.Unlock()
	se.permits = append(se.permits, p)
}

// permitFor is the latest permit of one of kinds that se's run got for member ordinal (any member for
// ordinal -1).
func (se *schedEngine) permitFor(ordinal int, kinds ...gate.Kind) (gate.Permit, bool) {
	se.permitsMu.Lock()
	defer se.permitsMu.Unlock()
	for i := len(se.permits) - 1; i >= 0; i-- {
		p := se.permits[i]
		if slices.Contains(kinds, p.Kind) && (ordinal < 0 || p.Ordinal == ordinal) {
			return p, true
		}
	}
	return gate.Permit{}, false
}

type statusLook struct {
	at   moment
	down bool
}

type incarnationRead struct {
	at    moment
	value Incarnation
}

// newSchedEngine is what the checks know of an engine, before it made any request.
func newSchedEngine(w *world, name string, run int) *schedEngine {
	return &schedEngine{w: w, name: name, run: run, counts: map[injectionPoint]int{}, lastCall: map[string]moment{},
		lastStatus: map[string]statusLook{}, sawDown: map[string]moment{}, incarnations: map[string][]incarnationRead{},
		passedAt: map[string]moment{}}
}

// newEngine makes an Engine whose every request goes through w: its own clientset that forwards to the fake
// cluster's, and its own etcd access that forwards to the fake etcd.
func (w *world) newEngine(name string, run int) *schedEngine {
	se := newSchedEngine(w, name, run)
	se.ctx, se.cancel = context.WithTimeout(w.ctx, scheduleGuard)
	kube := &worldKube{Clientset: fake.NewSimpleClientset(),
		react: func(ctx context.Context, a k8stesting.Action) (bool, runtime.Object, error) {
			return w.request(ctx, se, a)
		},
		watch: func(a k8stesting.Action) (bool, watch.Interface, error) { return w.watchRequest(se, a) }}
	cfg := NewConfig("etcd", "db", "etcd")
	cfg.Holder = name
	cfg.Cooldown = w.s.Cooldown
	cfg.ReadyTimeout = 1500 * time.Millisecond
	cfg.HealthTimeout = time.Second
	cfg.SnapshotTo = w.snapshotDir
	cfg.AcceptWriteOutage = w.s.AcceptOutage
	if w.s.APILatency || w.s.WatchLag > 0 || w.s.SlowRecreate > 0 {
		// A slow API server or controller stretches every step by its latencies and lags, as in production, where
		// the timeouts (5 minutes to be Ready) dwarf them; here they would not, and a gate would run out for
		// the API server's slowness alone: a failure blamed on a member that did nothing wrong, which no
		// engine could avoid. Timeouts four times as long keep the same proportion.
		cfg.ReadyTimeout, cfg.HealthTimeout = 4*cfg.ReadyTimeout, 4*cfg.HealthTimeout
	}
	opts := Options{Kube: kube, etcd: &scheduledEtcd{w: w, se: se}, PollInterval: schedulePoll,
		LeaseDuration: scheduleLease, StableFor: scheduleStableFor,
		OnEvent: func(ev Event) {
			w.mu.Lock()
			if se.killed {
				w.mu.Unlock()
				return
			}
			w.logf(name, "%s", ev.Message)
			se.events++
			w.mu.Unlock()
			if pod, ok := passedIn(ev); ok {
				// In its turn, like a request: the events it fires change pods, whose watch events must reach
				// the engines' caches before the engine reads them (the sequencer answers once they have).
				w.serialize(name+" passed "+pod, func() {
					w.mu.Lock()
					defer w.mu.Unlock()
					if !se.killed {
						se.passedAt[pod] = w.now()
						w.fireAt(se, atPassed, pod)
					}
				})
			}
		}}
	e, err := New(cfg, opts)
	if err != nil {
		w.t.Fatalf("new engine: %v", err)
	}
	se.e = e
	e.permitted = se.notePermit
	w.mu.Lock()
	w.engines = append(w.engines, se)
	w.mu.Unlock()
	return se
}

// worldKube is an engine's clientset on a world: every request goes to the world (react, watch), through a
// k8stesting.Fake of its own. One Fake per call, not one per clientset: a Fake holds its lock for the whole
// reaction, and a request waits for its turn in the sequencer, so one Fake would make the engine's other
// goroutines (its gates, lease renewal, status writer, informers) wait on that lock, which is not a wait
// synctest can see through (a mutex is not durably blocking), and virtual time would never advance.
type worldKube struct {
	*fake.Clientset // the rest of kubernetes.Interface, which the engine does not call
	react           func(context.Context, k8stesting.Action) (bool, runtime.Object, error)
	watch           k8stesting.WatchReactionFunc
}

// fake is a Fake for one call made with ctx (schedule_ctx_test.go).
func (k *worldKube) fake(ctx context.Context) *k8stesting.Fake {
	f := &k8stesting.Fake{}
	f.AddReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) { return k.react(ctx, a) })
	f.AddWatchReactor("*", k.watch)
	return f
}

// request is every Kubernetes request of se, served in its turn (serialize): events due fire first, then the
// request is refused (an outage, a dead process) or forwarded to the fake cluster and judged.
func (w *world) request(ctx context.Context, se *schedEngine, a k8stesting.Action) (handled bool, obj runtime.Object, err error) {
	w.serializeRequest(ctx, kubeKey(se, a), func(late bool) {
		if err = ctx.Err(); err != nil && !late {
			handled = true // never sent: client-go fails a request whose context has ended
			return
		}
		handled, obj, err = w.serveKube(se, a)
		if cerr := ctx.Err(); late && cerr != nil {
			// Sent in time, it reached the API server after the caller gave up: applied, its answer lost.
			obj, err = nil, cerr
		}
	})
	return handled, obj, err
}

// kubeKey names a Kubernetes request for the sequencer's order: the engine, then what it asks of what.
func kubeKey(se *schedEngine, a k8stesting.Action) string {
	name := ""
	if named, ok := a.(interface{ GetName() string }); ok {
		name = named.GetName()
	}
	return se.name + " kube " + a.GetVerb() + " " + a.GetResource().Resource + " " + name
}

func (w *world) serveKube(se *schedEngine, a k8stesting.Action) (bool, runtime.Object, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tick()
	w.fire(se, injectionPoint(a.GetVerb()+" "+a.GetResource().Resource))
	if err := w.refusedKube(se); err != nil {
		return true, nil, err
	}
	pre := w.snapshot()
	obj, err := w.c.kube.Invokes(a, nil)
	w.syncLoops()
	w.judgeRequest(se, a, pre, err)
	w.recreateSlowly(pre)
	return true, obj, err
}

func (w *world) watchRequest(se *schedEngine, a k8stesting.Action) (handled bool, wi watch.Interface, err error) {
	w.serialize(kubeKey(se, a), func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		handled = true
		if err = w.refusedKube(se); err == nil {
			wi, err = w.c.kube.InvokesWatch(a)
		}
		if err == nil && w.s.WatchLag > 0 {
			wi = w.lagged(wi, w.s.WatchLag, "~watch "+kubeKey(se, a))
		}
	})
	return handled, wi, err
}

// scheduledEtcd is se's etcd access: each call may fire events, be refused without reaching the member
// (unreachable, an outage, a dead process), and tells the checks what se could know of each member.
type scheduledEtcd struct {
	w  *world
	se *schedEngine
}

// call runs one etcd call of se to pod under w.mu, in its turn (serialize); point is its injection point
// ("" for none), method names the call for the sequencer's order.
func (s *scheduledEtcd) call(ctx context.Context, point injectionPoint, method, pod string, do func() error) (err error) {
	s.w.serializeRequest(ctx, s.se.name+" etcd "+method+" "+pod, func(late bool) {
		if cerr := ctx.Err(); cerr != nil && !late {
			err = fmt.Errorf("%s of %s: %w", method, pod, cerr) // never sent, as etcd's client does
			return
		}
		err = s.serve(point, pod, do)
		if cerr := ctx.Err(); late && cerr != nil {
			err = fmt.Errorf("%s of %s: %w", method, pod, cerr) // reached the member, its answer lost
		}
	})
	var hang *hangingForward
	if errors.As(err, &hang) {
		err = hang.wait(ctx)
	}
	return err
}

func (s *scheduledEtcd) serve(point injectionPoint, pod string, do func() error) error {
	w, se := s.w, s.se
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tick()
	if point != "" {
		w.fire(se, point)
	}
	se.lastCall[pod] = w.now()
	if err := w.refusedEtcd(se, pod); err != nil {
		return err
	}
	err := do()
	if w.loopsStale {
		w.syncLoops()
	}
	return err
}

// Status is the engine's health look at a member: what it answers is what the engine knows of the member
// (lastStatus, sawDown), while its other calls (a member list, a read) only serve other purposes.
func (s *scheduledEtcd) Status(ctx context.Context, pod string) (st member.Status, err error) {
	err = s.call(ctx, atStatus, "Status", pod, func() error {
		st, err = s.w.f.Status(ctx, pod)
		now, down := s.w.now(), err != nil && s.w.downNow(pod)
		s.se.lastStatus[pod] = statusLook{at: now, down: down}
		if down {
			s.se.sawDown[pod] = now
		}
		return err
	})
	return st, err
}

func (s *scheduledEtcd) MemberList(ctx context.Context, pod string) (list []member.Info, err error) {
	err = s.call(ctx, "", "MemberList", pod, func() error { list, err = s.w.f.MemberList(ctx, pod); return err })
	return list, err
}

func (s *scheduledEtcd) MoveLeader(ctx context.Context, leaderPod string, to uint64) error {
	return s.call(ctx, atMoveLeader, "MoveLeader", leaderPod, func() error {
		pre := s.w.snapshot()
		err := s.w.f.MoveLeader(ctx, leaderPod, to)
		if to := s.w.f.leaderPod(); to != pre.leader {
			s.w.judgeMoveLeader(s.se, pre, to, sentBy(ctx))
		}
		return err
	})
}

// MemberRemove is a disruption of the member removed, judged like a restart; adding and promoting a learner
// disrupt nobody but are writes only the lease holder may make.
func (s *scheduledEtcd) MemberRemove(ctx context.Context, pod string, id uint64) error {
	return s.call(ctx, atMemberRemove, "MemberRemove", pod, func() error {
		pre := s.w.snapshot()
		target, listed := s.w.memberOfID(id)
		err := s.w.f.MemberRemove(ctx, pod, id)
		if err == nil && listed {
			s.w.judgeMembership(s.se, pre, fmt.Sprintf("removed member %x (%s)", id, target), target, sentBy(ctx))
		}
		return err
	})
}

func (s *scheduledEtcd) MemberAddAsLearner(ctx context.Context, pod, url string) (info member.Info, err error) {
	err = s.call(ctx, atMemberAdd, "MemberAddAsLearner", pod, func() error {
		pre := s.w.snapshot()
		if info, err = s.w.f.MemberAddAsLearner(ctx, pod, url); err == nil {
			s.w.judgeMembership(s.se, pre, "added a learner at "+url, "", sentBy(ctx))
		}
		return err
	})
	return info, err
}

func (s *scheduledEtcd) MemberPromote(ctx context.Context, pod string, id uint64) error {
	return s.call(ctx, atMemberPromote, "MemberPromote", pod, func() error {
		pre := s.w.snapshot()
		err := s.w.f.MemberPromote(ctx, pod, id)
		if err == nil {
			s.w.judgeMembership(s.se, pre, fmt.Sprintf("promoted learner %x", id), "", sentBy(ctx))
			if promoted, ok := s.w.memberOfID(id); ok {
				s.w.fireAt(s.se, atPromoted, promoted)
			}
		}
		return err
	})
}

func (s *scheduledEtcd) LinearizableRead(ctx context.Context, pod string) error {
	return s.call(ctx, "", "LinearizableRead", pod, func() error { return s.w.f.LinearizableRead(ctx, pod) })
}

func (s *scheduledEtcd) ClusterVersion(ctx context.Context, pod string) (v string, err error) {
	err = s.call(ctx, "", "ClusterVersion", pod, func() error { v, err = s.w.f.ClusterVersion(ctx, pod); return err })
	return v, err
}

func (s *scheduledEtcd) Downgrade(ctx context.Context, pod string, action member.DowngradeAction, version string) (v string, err error) {
	err = s.call(ctx, "", "Downgrade", pod, func() error {
		if v, err = s.w.f.Downgrade(ctx, pod, action, version); err == nil && action == member.DowngradeEnable {
			// A point of no return: after it only a snapshot rolls back (invariant p wants its permit).
			s.w.checkPermit(s.se, "enabled etcd's downgrade to "+version, -1, sentBy(ctx), gate.PointOfNoReturn)
		}
		return err
	})
	return v, err
}

func (s *scheduledEtcd) Incarnation(ctx context.Context, pod string) (inc Incarnation, err error) {
	err = s.call(ctx, atIncarnation, "Incarnation", pod, func() error {
		inc, err = s.w.f.Incarnation(ctx, pod)
		if err == nil {
			s.se.incarnations[pod] = append(s.se.incarnations[pod], incarnationRead{at: s.w.now(), value: inc})
		}
		return err
	})
	return inc, err
}

// ActivePeers is pod's Raft view, the truth of who runs: it reaches pod like any other call.
func (s *scheduledEtcd) ActivePeers(ctx context.Context, pod string) (peers map[uint64]bool, err error) {
	err = s.call(ctx, "", "ActivePeers", pod, func() error { peers, err = s.w.f.ActivePeers(ctx, pod); return err })
	return peers, err
}

func (s *scheduledEtcd) Forget(pod string) { s.w.f.Forget(pod) }

func (s *scheduledEtcd) Close() error { return nil }

// downNow says whether pod's etcd is down at this moment (crashed, or in a crash loop's down phase).
func (w *world) downNow(pod string) bool {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	return w.f.isDown(pod)
}

// passedIn names the member an event says passed its gates. The engine has no typed "passed" event, so this
// reads its two sentences for it ("etcd-2 rolled in 310ms", "etcd-2 healthy"); a reworded sentence only makes
// the checks more lenient (a pass they do not see), never stricter.
func passedIn(ev Event) (string, bool) {
	if ev.Step.Kind != StepWaitMember {
		return "", false
	}
	pod := planner.PodName("etcd", ev.Step.Ordinal)
	if ev.Message == pod+" healthy" || strings.HasPrefix(ev.Message, pod+" rolled in ") {
		return pod, true
	}
	return "", false
}
