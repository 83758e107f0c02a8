package rollout

import (
	"context"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
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
	// outageUntil cuts only this engine's path to the API server.
	outageUntil time.Time
	counts      map[injectionPoint]int
	// events counts what it said (its events): its step boundaries.
	events int

	// lastCall is when it last called each member's etcd (reached or not); lastStatus its last health look
	// (Status) that reached each member, sawDown the last such look that found it down; incarnations the
	// process names it read, and when.
	lastCall     map[string]time.Time
	lastStatus   map[string]statusLook
	sawDown      map[string]time.Time
	incarnations map[string][]incarnationRead
	// passedAt is when it last said a member passed its gates (its own events).
	passedAt map[string]time.Time

	startedAt time.Time
	// Elections counted by the fake at its start and end, and around its first and last disruption.
	elStart, elFirstDisruption, elLastDisruption int
	disrupted                                    bool
}

type statusLook struct {
	at   time.Time
	down bool
}

type incarnationRead struct {
	at    time.Time
	value Incarnation
}

// newSchedEngine is what the checks know of an engine, before it made any request.
func newSchedEngine(w *world, name string, run int) *schedEngine {
	return &schedEngine{w: w, name: name, run: run, counts: map[injectionPoint]int{}, lastCall: map[string]time.Time{},
		lastStatus: map[string]statusLook{}, sawDown: map[string]time.Time{}, incarnations: map[string][]incarnationRead{},
		passedAt: map[string]time.Time{}}
}

// newEngine makes an Engine whose every request goes through w: its own clientset that forwards to the fake
// cluster's, and its own etcd access that forwards to the fake etcd.
func (w *world) newEngine(name string, run int) *schedEngine {
	se := newSchedEngine(w, name, run)
	se.ctx, se.cancel = context.WithTimeout(w.ctx, scheduleGuard)
	kube := fake.NewClientset()
	kube.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) { return w.request(se, a) })
	kube.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) { return w.watchRequest(se, a) })
	cfg := NewConfig("etcd", "db", "etcd")
	cfg.Holder = name
	cfg.Cooldown = w.s.Cooldown
	cfg.ReadyTimeout = 1500 * time.Millisecond
	cfg.HealthTimeout = time.Second
	opts := Options{Kube: kube, etcd: &scheduledEtcd{w: w, se: se}, PollInterval: 5 * time.Millisecond,
		LeaseDuration: scheduleLease, StableFor: scheduleStableFor,
		OnEvent: func(ev Event) {
			w.mu.Lock()
			defer w.mu.Unlock()
			if se.killed {
				return
			}
			w.logf(name, "%s", ev.Message)
			se.events++
			if pod, ok := passedIn(ev); ok {
				se.passedAt[pod] = time.Now()
				w.fireAt(se, atPassed, pod)
			}
		}}
	e, err := New(cfg, opts)
	if err != nil {
		w.t.Fatalf("new engine: %v", err)
	}
	se.e = e
	w.mu.Lock()
	w.engines = append(w.engines, se)
	w.mu.Unlock()
	return se
}

// request is every Kubernetes request of se: events due fire first, then the request is refused (an
// outage, a dead process) or forwarded to the fake cluster and judged.
func (w *world) request(se *schedEngine, a k8stesting.Action) (bool, runtime.Object, error) {
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
	return true, obj, err
}

func (w *world) watchRequest(se *schedEngine, a k8stesting.Action) (bool, watch.Interface, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.refusedKube(se); err != nil {
		return true, nil, err
	}
	wi, err := w.c.kube.InvokesWatch(a)
	return true, wi, err
}

// scheduledEtcd is se's etcd access: each call may fire events, be refused without reaching the member
// (unreachable, an outage, a dead process), and tells the checks what se could know of each member.
type scheduledEtcd struct {
	w  *world
	se *schedEngine
}

// call runs one etcd call of se to pod under w.mu; point is its injection point ("" for none).
func (s *scheduledEtcd) call(point injectionPoint, pod string, do func() error) error {
	w, se := s.w, s.se
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tick()
	if point != "" {
		w.fire(se, point)
	}
	se.lastCall[pod] = time.Now()
	if err := w.refusedEtcd(se, pod); err != nil {
		return err
	}
	err := do()
	w.syncLoops()
	return err
}

// Status is the engine's health look at a member: what it answers is what the engine knows of the member
// (lastStatus, sawDown), while its other calls (a member list, a read) only serve other purposes.
func (s *scheduledEtcd) Status(ctx context.Context, pod string) (st member.Status, err error) {
	err = s.call(atStatus, pod, func() error {
		st, err = s.w.f.Status(ctx, pod)
		now, down := time.Now(), err != nil && s.w.downNow(pod)
		s.se.lastStatus[pod] = statusLook{at: now, down: down}
		if down {
			s.se.sawDown[pod] = now
		}
		return err
	})
	return st, err
}

func (s *scheduledEtcd) MemberList(ctx context.Context, pod string) (list []member.Info, err error) {
	err = s.call("", pod, func() error { list, err = s.w.f.MemberList(ctx, pod); return err })
	return list, err
}

func (s *scheduledEtcd) MoveLeader(ctx context.Context, leaderPod string, to uint64) error {
	return s.call(atMoveLeader, leaderPod, func() error {
		pre := s.w.snapshot()
		err := s.w.f.MoveLeader(ctx, leaderPod, to)
		if to := s.w.f.leaderPod(); to != pre.leader {
			s.w.judgeMoveLeader(s.se, pre, to)
		}
		return err
	})
}

func (s *scheduledEtcd) LinearizableRead(ctx context.Context, pod string) error {
	return s.call("", pod, func() error { return s.w.f.LinearizableRead(ctx, pod) })
}

func (s *scheduledEtcd) ClusterVersion(ctx context.Context, pod string) (v string, err error) {
	err = s.call("", pod, func() error { v, err = s.w.f.ClusterVersion(ctx, pod); return err })
	return v, err
}

func (s *scheduledEtcd) Downgrade(ctx context.Context, pod string, action member.DowngradeAction, version string) (v string, err error) {
	err = s.call("", pod, func() error { v, err = s.w.f.Downgrade(ctx, pod, action, version); return err })
	return v, err
}

func (s *scheduledEtcd) Incarnation(ctx context.Context, pod string) (inc Incarnation, err error) {
	err = s.call(atIncarnation, pod, func() error {
		inc, err = s.w.f.Incarnation(ctx, pod)
		if err == nil {
			s.se.incarnations[pod] = append(s.se.incarnations[pod], incarnationRead{at: time.Now(), value: inc})
		}
		return err
	})
	return inc, err
}

// ActivePeers is pod's Raft view, the truth of who runs: it reaches pod like any other call.
func (s *scheduledEtcd) ActivePeers(ctx context.Context, pod string) (peers map[uint64]bool, err error) {
	err = s.call("", pod, func() error { peers, err = s.w.f.ActivePeers(ctx, pod); return err })
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
	pod := podName("etcd", ev.Step.Ordinal)
	if ev.Message == pod+" healthy" || strings.HasPrefix(ev.Message, pod+" rolled in ") {
		return pod, true
	}
	return "", false
}
