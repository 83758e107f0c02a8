package rollout

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/health"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/kubeapi"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/lease"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/memberwatch"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/progress"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/statefulset"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/tlsmaterial"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/memberdial"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/podfile"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/replacerecord"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/trust"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/trustcheck"
)

// Options carries how the engine reaches the cluster and reports progress.
type Options struct {
	// RestConfig is the Kubernetes API access; required unless Kube and Dialer are both given.
	RestConfig *rest.Config
	// Kube overrides the clientset built from RestConfig (tests pass a fake).
	Kube kubernetes.Interface
	// Dialer reaches each member's client port; by default a port-forward through RestConfig. Callers
	// inside the cluster pass memberdial.NewDirect(service).
	Dialer memberdial.Dialer
	// OnEvent is called for every step started or finished, in order, from the goroutine running Run.
	OnEvent func(Event)
	// LeaseDuration is how long the rollout Lease stays valid without renewal (default 15s): the delay
	// before a run that died can be taken over.
	LeaseDuration time.Duration
	// PollInterval is how often gates look again (default 200ms). Each look is two GETs; the time a
	// member's gate passes after the member is ready is half of it on average, paid once per member.
	PollInterval time.Duration
	// StableFor is how long a member must answer healthy, without a break, before its etcd gate passes
	// (default 3s): a revision that crash-loops answers for a moment after each start, and one good look
	// would let the rollout take the next member while this one is about to die.
	StableFor time.Duration

	// etcd replaces the real member clients in unit tests.
	etcd etcdAccess
}

// Engine rolls one StatefulSet. It is not safe for concurrent Runs; the Lease keeps separate processes
// (or Engines) from rolling the same StatefulSet at once.
type Engine struct {
	cfg       Config
	kube      kubernetes.Interface
	rest      *rest.Config
	dialer    memberdial.Dialer
	etcd      etcdAccess
	onEvent   func(Event)
	pollEvery time.Duration
	stableFor time.Duration
	// stillWaitingEvery paces a waiting gate's progress lines (stillWaitingEvery in engine_gates.go; tests shorten it).
	stillWaitingEvery time.Duration
	// proven are the revisions a member held healthy on for stableFor (see provenRevisions).
	proven health.ProvenRevisions
	lease  *lease.Lease
	status *progress.Publisher
	// records keeps the replacements in flight (members whose data dies with their pod), across runs.
	records *replacerecord.Store
	// podFiles reads files the pods mount from Secrets and ConfigMaps: etcd's configuration file, where the
	// template gives it one, for where it keeps its data.
	podFiles *podfile.Reader
	// leaderSeenDown, set by a run, hears of a leader that a gate's look found down by its own answer: a member
	// the run saw pass that did so did not stay up, though the gate goes on.
	leaderSeenDown func(pod string)
	// moveSawDown, set by a run, hears of a member a leader move's looks found down by its own answer.
	moveSawDown func(pod string)
	// permitted, set by tests, hears of every permit the gate gives a run (the schedule checker's invariant p).
	permitted func(gate.Permit)

	// watch caches the StatefulSet and its pods while a run holds the lease (internal/memberwatch).
	watch *memberwatch.Watch
	// sts is the StatefulSet and its pods as the engine reads and writes them (internal/statefulset).
	sts *statefulset.Handle

	ownDialer bool
	// requests counts the API requests made through RestConfig (none when the caller passed Kube).
	requests kubeapi.Counter
	// trustCost adds up what the trust checks cost (CheckTrust), for the runs' results.
	trustCost trustCostMeter
	// undecidedSaid keeps which members' missing trust verdicts were said already: once is enough per engine.
	undecidedSaid sync.Map
}

// defaultPollInterval paces the gates. 500ms made the gate see a Ready pod 250ms late on average, once
// per member: the largest share of what the engine added to a roll's wall time in make bench's easy scenario.
const defaultPollInterval = 200 * time.Millisecond

// New checks the Config and prepares cluster access; it contacts nothing yet.
func New(cfg Config, opts Options) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid rollout config: %w", err)
	}
	e := &Engine{cfg: cfg, kube: opts.Kube, rest: opts.RestConfig, dialer: opts.Dialer, etcd: opts.etcd,
		onEvent: opts.OnEvent, pollEvery: opts.PollInterval, stillWaitingEvery: stillWaitingEvery}
	if e.stableFor = opts.StableFor; e.stableFor <= 0 {
		e.stableFor = health.DefaultStableFor
	}
	if e.pollEvery <= 0 {
		e.pollEvery = defaultPollInterval
	}
	if opts.RestConfig != nil {
		e.rest = kubeapi.WithCounting(opts.RestConfig, &e.requests)
	}
	if e.kube == nil {
		if e.rest == nil {
			return nil, errors.New("rollout options: RestConfig is required")
		}
		kube, err := kubernetes.NewForConfig(kubeapi.WithRateLimits(e.rest))
		if err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
		e.kube = kube
	}
	e.watch = memberwatch.New(e.kube, cfg.Namespace, cfg.StatefulSet)
	e.sts = &statefulset.Handle{Kube: e.kube, Namespace: cfg.Namespace, Name: cfg.StatefulSet, Watch: e.watch}
	if e.etcd == nil {
		if e.dialer == nil {
			if opts.RestConfig == nil {
				return nil, errors.New("rollout options: a Dialer or a RestConfig (for port-forward) is required")
			}
			// The forwards learn each pod's UID from the watch's cache, not with a GET per forward check.
			pf, err := memberdial.NewPortForward(e.rest, memberdial.WithPodLookup(e.watch.LookupPod))
			if err != nil {
				return nil, err
			}
			e.dialer, e.ownDialer = pf, true
		}
		var tlsConfig func(context.Context) (*tls.Config, error)
		if cfg.TLS != nil {
			tlsConfig = e.loadTLS
		}
		e.etcd = member.NewClients(e.dialer, cfg.Namespace, cfg.ServiceName, cfg.ClientPort, tlsConfig)
	}
	d := opts.LeaseDuration
	if d <= 0 {
		d = 15 * time.Second
	}
	e.lease = &lease.Lease{Kube: e.kube, Namespace: cfg.Namespace, Name: lease.Name(cfg.StatefulSet), Holder: cfg.Holder, Duration: d}
	e.status = progress.NewPublisher(e.kube, cfg.Namespace, cfg.StatefulSet, cfg.Holder, cfg.TemplateVersion, e.lease)
	e.records = replacerecord.New(e.kube, cfg.Namespace, cfg.StatefulSet, kubeapi.WithRetry)
	e.podFiles = podfile.NewReader(e.kube, cfg.Namespace, kubeapi.WithRetry)
	// A takeover waits a whole lease duration before anything happens: say why, so nobody thinks it hangs.
	e.lease.Watching = func(holder string, upTo time.Duration) {
		e.emit(Step{}, "lease %s is held by %s: watching it for up to %s; it is taken over if nobody renews it, and the run is refused if someone does",
			e.lease.ID(), holder, upTo)
	}
	return e, nil
}

// Config is the configuration the Engine runs with.
func (e *Engine) Config() Config { return e.cfg }

// Close releases member connections and port-forwards, and stops the watch.
func (e *Engine) Close() error {
	e.status.Stop()
	e.watch.Close()
	err := e.etcd.Close()
	if e.ownDialer {
		err = errors.Join(err, e.dialer.Close())
	}
	return err
}

// Plan observes the cluster and plans the rollout without changing anything: what preview shows.
func (e *Engine) Plan(ctx context.Context) (ClusterState, Plan, error) {
	st, err := e.Observe(ctx)
	if err != nil {
		return st, Plan{}, explainForbidden(err)
	}
	p, err := PlanRollout(st, e.cfg.LeaderPolicy)
	p.Cooldown = e.cfg.Cooldown
	e.fillSnapshot(&p)
	if err = GatePreview(ctx, e, e.cfg, st, &p, err); err != nil {
		if hopeless := unfixableByWaiting(st); hopeless != nil && !errors.As(err, new(*MemberProblemError)) &&
			(refusedBy(err) == gate.Shape || refusedBy(err) == gate.Consent) {
			err = fmt.Errorf("%w (%w)", err, hopeless)
		}
		return st, p, explainForbidden(fmt.Errorf("planning %s/%s: %w", e.cfg.Namespace, e.cfg.StatefulSet, err))
	}
	return st, p, nil
}

// loadTLS reads the client certificate material from the first member pod that exists.
func (e *Engine) loadTLS(ctx context.Context) (*tls.Config, error) {
	pod, err := e.anyPod(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading TLS material: %w", err)
	}
	t, err := tlsmaterial.ClientTLS(ctx, tlsmaterial.PodFileReader(e.kube, e.rest, pod), *e.cfg.TLS)
	if err != nil {
		return nil, fmt.Errorf("reading TLS material from pod %s: %w", pod.Name, err)
	}
	return t, nil
}

func (e *Engine) anyPod(ctx context.Context) (*corev1.Pod, error) {
	sts, _ := e.sts.FromWatch(0, &statefulset.WatchLag{})
	if sts == nil {
		var err error
		if sts, err = e.kube.AppsV1().StatefulSets(e.cfg.Namespace).Get(ctx, e.cfg.StatefulSet, metav1.GetOptions{}); err != nil {
			return nil, err
		}
	}
	replicas := 1
	if sts.Spec.Replicas != nil {
		replicas = int(*sts.Spec.Replicas)
	}
	for i := 0; i < replicas; i++ {
		pod, err := e.sts.ReadPod(ctx, planner.PodName(e.cfg.StatefulSet, i))
		if err == nil && pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning {
			return pod, nil
		}
	}
	return nil, fmt.Errorf("no running pod of StatefulSet %s to read it from", e.cfg.StatefulSet)
}

// emit reports progress to the caller, and to the status published on the cluster (internal/progress).
func (e *Engine) emit(step Step, format string, args ...any) {
	e.announce(Event{Step: step}, format, args...)
}

// announce sends ev, with its Message made from format and args, to the status ConfigMap and the OnEvent
// callback; emit is announce of an EventProgress.
func (e *Engine) announce(ev Event, format string, args ...any) {
	ev.Time, ev.Message = time.Now(), fmt.Sprintf(format, args...)
	e.status.Observe(ev)
	if e.onEvent != nil {
		e.onEvent(ev)
	}
}

// LeaseHolder says who holds the StatefulSet's rollout Lease; "" when no rollout holds it (or it was never
// created). expiresIn is an estimate for display only: the holder's renewTime plus the lease duration,
// minus the local clock, so clocks that disagree skew it, and <= 0 means "looks stale". Whether a lease
// may be taken over is decided by watching it (acquire, which Run and Unlock use), never by this.
func (e *Engine) LeaseHolder(ctx context.Context) (holder string, expiresIn time.Duration, err error) {
	l, err := e.kube.CoordinationV1().Leases(e.cfg.Namespace).Get(ctx, e.lease.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("reading lease %s: %w", e.lease.ID(), err)
	}
	d := lease.RecordDuration(l, e.lease.Duration)
	return ptr.Deref(l.Spec.HolderIdentity, ""), lease.RenewTime(l).Add(d).Sub(time.Now()), nil
}

// Run rolls every member that is not yet at the StatefulSet's updateRevision and healthy, one at a time,
// and returns once all are, with the partition back at replicas. It re-observes the cluster before every
// step, so it resumes wherever an earlier run stopped. On error it returns what it did so far; the
// partition is re-locked on every exit path, including a cancelled ctx and a panic (which is re-raised).
func (e *Engine) Run(ctx context.Context) (res Result, err error) {
	defer func() { err = explainForbidden(err) }() // runs last: after the re-lock and the lease release
	res.StartedAt = time.Now()
	requestsBefore := e.requests.Count()
	defer func() { res.APIRequests = int(e.requests.Count() - requestsBefore) }() // the lease release included
	trustBefore := e.trustCost.total()
	defer func() { res.TrustChecks = e.trustCost.total().minus(trustBefore) }()
	// A StatefulSet that is not there gets no Lease either: bad input leaves no trace.
	if _, err := e.settledStatefulSet(ctx); err != nil {
		res.FinishedAt = time.Now()
		return res, err
	}
	held, err := e.lease.Acquire(ctx)
	if err != nil {
		res.FinishedAt = time.Now()
		return res, err
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopRenew := e.lease.KeepRenewed(runCtx, cancel)

	r := &run{e: e, res: &res, lease: held, passed: map[int]*passedMember{}, unproven: map[int]*passedMember{}, rolledFrom: map[int]string{}, requestsBefore: requestsBefore,
		trustProbes: trustcheck.NewMemo()}
	e.leaderSeenDown, e.moveSawDown = r.sawDown, r.sawDownOnTheWay
	defer func() { e.leaderSeenDown, e.moveSawDown = nil, nil }()
	defer func() {
		p := recover()
		if p != nil {
			err = errors.Join(err, fmt.Errorf("panic during rollout: %v", p))
		}
		err = r.exit(ctx, err, stopRenew)
		if p != nil {
			panic(p)
		}
	}()

	err = r.execute(runCtx)
	if err != nil && context.Cause(runCtx) != nil && ctx.Err() == nil {
		// The run's own context ended (lost lease): say so rather than "context canceled".
		err = fmt.Errorf("%w (%v)", context.Cause(runCtx), err)
	}
	return res, err
}

// CheckTrust refuses restarting the members of ordinals onto the template's TLS material when that would cut
// one off its peers or its clients as they run now (issue 33). Peer side: the new leaf presented to every
// other member's running peer trust, the new trust file against the leaf each one serves, the leaf on its
// own. Client side: the new trust file against the engine's client certificate and the server certificates
// the others serve, the new server certificate as the engine's connections will judge it. A *TrustError
// (ErrPeerTrust, ErrClientTrust) then says who refuses what; waiting changes nothing, so it is not
// ErrBlocked. Material no Secret or ConfigMap holds cannot be read, and is said, not judged. It probes every
// member afresh; a run's own checks keep what they found (checkTrust).
func (e *Engine) CheckTrust(ctx context.Context, st ClusterState, ordinals []int) error {
	return e.checkTrust(ctx, st, ordinals, nil)
}

// checkTrust is CheckTrust answering from, and keeping in, probes (nil: none; trustcheck.Memo says when an
// answer stands).
func (e *Engine) checkTrust(ctx context.Context, st ClusterState, ordinals []int, probes *trustcheck.Memo) error {
	prober, ok := e.etcd.(trustcheck.Prober)
	if !ok || st.PodTemplate == nil || len(ordinals) == 0 {
		return nil
	}
	c := EtcdContainer(st.PodTemplate.Containers)
	t := trustcheck.Template{Spec: st.PodTemplate, Container: c, Flags: EtcdFlagValues(c)}
	_, peerTLS := trustcheck.FilesOf(t.Flags)
	_, clientTLS := trustcheck.ClientFilesOf(t.Flags)
	if !peerTLS && !clientTLS {
		return nil
	}
	var restart []string
	for _, o := range ordinals {
		restart = append(restart, st.Members[o].Pod)
	}
	var members []trustcheck.Member
	for _, m := range st.Members {
		if info, ok := planner.ListedAs(st, m); ok && len(info.PeerURLs) > 0 {
			members = append(members, trustcheck.Member{Pod: m.Pod, PeerURL: info.PeerURLs[0], Reachable: m.Reachable, UID: m.PodUID, Restarts: m.Restarts})
		}
	}
	checker := trustcheck.Checker{Files: e.podFiles.Memo(), Prober: prober, Probes: probes, ClientPort: e.cfg.ClientPort, Now: time.Now}
	checker.Engine, _ = e.etcd.(trustcheck.Engine)
	began, requestsBefore := time.Now(), e.requests.Count()
	report, err := checker.Check(ctx, t, restart, members)
	e.trustCost.add(TrustCheckCost{Checks: 1, Probes: report.Probes, Duration: time.Since(began),
		APIRequests: int(e.requests.Count() - requestsBefore)})
	if undecided := strings.Join(report.Undecided, ", "); undecided != "" {
		if _, said := e.undecidedSaid.LoadOrStore(undecided, true); !said {
			e.emit(Step{}, "%s gave no verdict on the new peer certificate (closed without an answer, as etcd does when a certificate does not name the address a port-forward connects from): its trust of it is not known; the chain it serves was judged against the new trust", undecided)
		}
	}
	var side *trustcheck.SideError
	switch {
	case len(report.Refusals) > 0:
		return &TrustError{Refusals: report.Refusals}
	case errors.Is(err, trustcheck.ErrUnreadable):
		e.emit(Step{}, "TLS trust not checked before restarting %s: %v", strings.Join(restart, ", "), err)
		return nil
	case err != nil:
		which := trust.Peer
		if errors.As(err, &side) {
			which = side.Side
		}
		return fmt.Errorf("%w: restarting %s onto %s material that cannot be read: %v; fix the Secret the template mounts, then run again",
			sideError(which), strings.Join(restart, ", "), which, err)
	}
	return nil
}

// trustCostMeter adds up TrustCheckCosts; the provider's preview and a run may check at once.
type trustCostMeter struct {
	mu  sync.Mutex
	sum TrustCheckCost
}

func (m *trustCostMeter) add(c TrustCheckCost) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sum = m.sum.plus(c)
}

func (m *trustCostMeter) total() TrustCheckCost {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sum
}

// etcdAccess is everything the engine asks of etcd. Every call names the member (pod) it goes through,
// because etcd answers Status for the member that serves it and MoveLeader only on the leader.
type etcdAccess interface {
	Status(ctx context.Context, pod string) (member.Status, error)
	MemberList(ctx context.Context, pod string) ([]member.Info, error)
	// MoveLeader must be sent to the current leader; to is the transferee's member ID.
	MoveLeader(ctx context.Context, leaderPod string, to uint64) error
	// LinearizableRead is a quorum read served through pod: it passes only when pod can reach a leader
	// that can still commit, which is what "healthy" means for etcd.
	LinearizableRead(ctx context.Context, pod string) error
	// ClusterVersion is the version the cluster runs at, as pod reports it ("3.6.0").
	ClusterVersion(ctx context.Context, pod string) (string, error)
	// Downgrade calls etcd's downgrade API through pod with a target minor ("3.5") and returns the cluster
	// version etcd answers with.
	Downgrade(ctx context.Context, pod string, action member.DowngradeAction, version string) (string, error)
	// Incarnation names the etcd process serving pod (its start time): one not Same as before means it
	// restarted.
	Incarnation(ctx context.Context, pod string) (Incarnation, error)
	// MemberRemove, MemberAddAsLearner and MemberPromote change etcd's membership through pod, a member that
	// answers (a replacement: issue 32). etcd's answers that say a change landed already, or cannot yet, come
	// back typed (member.ErrMemberNotFound, ErrPeerURLExists, ErrNotLearner, ErrLearnerNotReady,
	// ErrClusterNotReadyForChange, ErrTooManyLearners).
	MemberRemove(ctx context.Context, pod string, id uint64) error
	MemberAddAsLearner(ctx context.Context, pod, peerURL string) (member.Info, error)
	MemberPromote(ctx context.Context, pod string, id uint64) error
	// Snapshot streams a point-in-time snapshot of pod's data to consume (etcd's bbolt file and its sha256),
	// ending the stream when consume returns.
	Snapshot(ctx context.Context, pod string, consume func(member.SnapshotStream) error) error
	// ActivePeers is the set of member IDs pod's Raft transport is connected to, by pod's own word.
	ActivePeers(ctx context.Context, pod string) (map[uint64]bool, error)
	// Forget closes every connection to the member. The engine calls it right before the member restarts:
	// an etcd that still has client connections open can outlive its SIGTERM until the grace period ends
	// and it is killed (seen with plain-HTTP members), which would slow every restart to the grace period.
	Forget(pod string)
	Close() error
}

// Incarnation names one etcd process of a member (its start time, from the member's /metrics): a member whose
// incarnation is not Same as when it passed has restarted since. Result.Members reports it by name.
type Incarnation = member.Incarnation

// memberCallTimeout bounds each etcd call made while observing, so a member that is down costs seconds,
// not the caller's whole deadline.
const memberCallTimeout = 3 * time.Second
