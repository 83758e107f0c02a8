package progress

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/lease"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// Timing of the status writes.
const (
	// statusWriteTimeout bounds one write; a status write never holds the rollout up for longer.
	statusWriteTimeout = 5 * time.Second
	// statusMinInterval paces the background writes: progress lines come in bursts, and a burst becomes
	// one write of its last state instead of one per line. A second is as fresh as a person or a dashboard
	// reads it, and keeps the writes (the largest share of a rollout's API requests at 250 ms: 12 of ~57)
	// near one per second; outcomes are written at once whatever the pacing (flushNow).
	statusMinInterval = time.Second
	// statusTextLimit caps the messages published: they are for a person glancing at a dashboard.
	statusTextLimit = 1000
)

// Publisher keeps the rollout's status on its ConfigMap. It hears the engine through two funnels:
// every progress line (Engine.emit, heard by observe) and every outcome Event (Engine.record, heard by
// outcome). Progress is written in the background, paced and coalesced, so a slow or absent API server
// never slows the rollout; outcomes are written before the engine goes on, so the status is final by the
// time Run returns. Every write is best effort: errors are dropped, the next change tries again.
//
// Only the lease holder publishes: a run that is refused or only watching the lease would otherwise
// overwrite the status of the run that holds it.
type Publisher struct {
	kube      kubernetes.Interface
	namespace string
	sts       string
	holder    string
	lease     *lease.Lease
	// templateVersion is published with the target revision (Config.TemplateVersion).
	templateVersion string

	mu sync.Mutex
	// active says a run is being published; runKey tells that run from the next (its lease acquireTime);
	// finished says it reached an outcome.
	active, finished bool
	runKey           string
	conds            map[string]metav1.Condition
	revision         string
	pods             []string
	done             map[string]bool
	step, message    string
	// storedSnapshot is where the run stored its snapshot before a point of no return (EventSnapshotStored).
	storedSnapshot string
	// writeOutage is the measured outage of a one-member restart (EventWriteOutage), in the summary's words.
	writeOutage string
	version     uint64 // bumped on every change
	written     uint64 // the version last written

	// writeMu orders the writes, so an older state is never written after a newer one.
	writeMu sync.Mutex
	// base is the ConfigMap as last read or written: its conditions keep their lastTransitionTime. stored
	// says it exists on the cluster (to update) rather than being a new one (to create).
	base   *corev1.ConfigMap
	stored bool

	wake     chan struct{}
	quit     chan struct{}
	loopDone chan struct{}
}

// NewPublisher publishes the status of StatefulSet namespace/sts for the run that holds l, as holder;
// templateVersion is the caller's name for the template rolled to (Config.TemplateVersion).
func NewPublisher(kube kubernetes.Interface, namespace, sts, holder, templateVersion string, l *lease.Lease) *Publisher {
	return &Publisher{kube: kube, namespace: namespace, sts: sts, holder: holder, lease: l, templateVersion: templateVersion}
}

// Observe hears one event of the engine's. It reads the event's kind and typed fields, never its Message,
// which is only shown: rewording a progress line changes nothing that `kubectl wait` reads.
func (p *Publisher) Observe(ev Event) {
	if p == nil {
		return
	}
	key, held := p.lease.HeldSince()
	if !held {
		return
	}
	p.mu.Lock()
	newRun := !p.active || key != p.runKey
	if newRun && ev.Kind == EventTookOver {
		// Unlock takes a stale lease over too and ends without an outcome: this event alone does not start a
		// run's status (it would stay Progressing forever).
		p.mu.Unlock()
		return
	}
	if newRun {
		p.start(key, ev.Time)
	}
	step := ev.Step
	switch ev.Kind {
	case EventPlanned:
		if ev.Plan != nil {
			p.planned(*ev.Plan)
		}
	case EventMemberPassed, EventMemberRolled:
		p.done[ev.Pod] = true
	case EventMemberTakenBack:
		delete(p.done, ev.Pod)
	case EventSnapshotStored:
		if ev.Snapshot != nil {
			p.storedSnapshot = ev.Snapshot.Location
		}
	case EventWriteOutage:
		if ev.WriteOutage != nil {
			p.writeOutage = ev.WriteOutage.String()
		}
	}
	if step.Kind == planner.StepRecreate && step.Ordinal >= 0 && step.Ordinal < len(p.pods) {
		delete(p.done, p.pods[step.Ordinal]) // reverted or brought back at the current revision: not done
	}
	p.step, p.message = describeStep(step, p.pods), ev.Message
	final := false
	switch {
	case ev.Kind == EventDone:
		p.complete(ev.Time, ev.Summary)
		final = true
	case !p.finished:
		p.progress(ev.Time)
	}
	p.changed(final)
}

// ObserveOutcome hears one Event the engine records. Every record comes from a run that held the lease (Run records
// its failure just after releasing it), so no lease check here.
func (p *Publisher) ObserveOutcome(at time.Time, eventType, reason, msg string) {
	if p == nil {
		return
	}
	key, held := p.lease.HeldSince()
	p.mu.Lock()
	if !p.active || (held && key != p.runKey) {
		p.start(key, at)
	}
	final := false
	switch {
	case reason == ReasonMemberRolled:
		// The member itself was counted done by its EventMemberRolled, just before this record.
		if !p.finished {
			p.progress(at)
		}
	case reason == ReasonRolloutDone:
		if p.finished {
			p.mu.Unlock()
			return // its EventDone already published it
		}
		p.complete(at, msg)
		final = true
	case reason == ReasonRolloutFailed || eventType == corev1.EventTypeWarning:
		// A Warning the publisher does not know (a reverted member) is a failure too. It ends the run's
		// status when the run no longer holds the lease; a run still holding it goes on to its own outcome.
		p.fail(at, reason, msg, reason == ReasonRolloutFailed || !held)
		final = true
	default:
		p.mu.Unlock()
		return
	}
	p.changed(final)
}

// start resets the status for a new run. Called with mu held.
func (p *Publisher) start(key string, at time.Time) {
	p.active, p.finished, p.runKey = true, false, key
	p.revision, p.pods, p.done = "", nil, map[string]bool{}
	p.step, p.message, p.storedSnapshot, p.writeOutage = "", "", "", ""
	p.conds = map[string]metav1.Condition{}
	p.set(ConditionFailed, metav1.ConditionFalse, StatusReasonProgressing, "a rollout is in progress", at)
	p.progress(at)
}

// planned takes the target revision and the members still to do from the run's plan. Called with mu held.
func (p *Publisher) planned(plan planner.Plan) {
	if plan.UpdateRevision != "" {
		p.revision = plan.UpdateRevision
	}
	if len(plan.Pods) == 0 {
		return
	}
	p.pods = slices.Clone(plan.Pods)
	todo := map[int]bool{}
	for _, o := range append(slices.Clone(plan.Roll), plan.Wait...) {
		todo[o] = true
	}
	for o, pod := range p.pods {
		if !todo[o] {
			p.done[pod] = true
		}
	}
}

// progress marks the run in progress. Called with mu held.
func (p *Publisher) progress(at time.Time) {
	target := "its update revision"
	if p.revision != "" {
		target = "revision " + p.revision
	}
	p.set(ConditionProgressing, metav1.ConditionTrue, StatusReasonProgressing,
		fmt.Sprintf("rolling %s/%s to %s one member at a time (run %s)", p.namespace, p.sts, target, p.holder), at)
	p.set(ConditionMembersUpdated, metav1.ConditionFalse, StatusReasonRolling, p.membersLine(), at)
}

// complete marks the run finished with every member updated. Called with mu held.
func (p *Publisher) complete(at time.Time, summary string) {
	for _, pod := range p.pods {
		p.done[pod] = true
	}
	p.finished = true
	p.set(ConditionProgressing, metav1.ConditionFalse, StatusReasonComplete, summary, at)
	p.set(ConditionMembersUpdated, metav1.ConditionTrue, StatusReasonAllUpdated, p.membersLine(), at)
	p.set(ConditionFailed, metav1.ConditionFalse, StatusReasonComplete, "the last rollout succeeded", at)
}

// fail marks the run failed; final ends it. Called with mu held.
func (p *Publisher) fail(at time.Time, reason, msg string, final bool) {
	p.set(ConditionFailed, metav1.ConditionTrue, reason, msg, at)
	if !final {
		return
	}
	p.finished = true
	p.set(ConditionProgressing, metav1.ConditionFalse, StatusReasonFailed, "the rollout stopped: "+msg, at)
	p.set(ConditionMembersUpdated, metav1.ConditionFalse, StatusReasonFailed, p.membersLine(), at)
}

func (p *Publisher) set(typ string, status metav1.ConditionStatus, reason, msg string, at time.Time) {
	p.conds[typ] = metav1.Condition{Type: typ, Status: status, Reason: reason, Message: publishable(msg),
		LastTransitionTime: metav1.NewTime(at.UTC().Truncate(time.Second))}
}

func (p *Publisher) membersLine() string {
	if len(p.pods) == 0 {
		return "members not observed yet"
	}
	target := "the update revision"
	if p.revision != "" {
		target = "revision " + p.revision
	}
	return fmt.Sprintf("%d of %d members at %s and healthy", p.doneCount(), len(p.pods), target)
}

func (p *Publisher) doneCount() int {
	n := 0
	for _, pod := range p.pods {
		if p.done[pod] {
			n++
		}
	}
	return n
}

// describeStep names a step for the status: its kind and the member it acts on.
func describeStep(s planner.Step, pods []string) string {
	name := func(o int) string {
		if o >= 0 && o < len(pods) {
			return pods[o]
		}
		return strconv.Itoa(o)
	}
	switch s.Kind {
	case "":
		return "observe"
	case planner.StepTransferLeader:
		return fmt.Sprintf("%s %s→%s", s.Kind, name(s.From), name(s.To))
	case planner.StepLowerPartition, planner.StepWaitMember, planner.StepRecreate:
		return fmt.Sprintf("%s %s", s.Kind, name(s.Ordinal))
	}
	return string(s.Kind)
}

var pemBlock = regexp.MustCompile(`(?s)-----BEGIN [A-Z0-9 ]+-----.*?(-----END [A-Z0-9 ]+-----|$)`)

// publishable is a message fit for a ConfigMap anyone with read access sees: the engine's progress lines
// already hold no secrets (they go to logs), and as a second guard any PEM block is cut out and the length
// capped.
func publishable(s string) string {
	return planner.Truncate(pemBlock.ReplaceAllString(s, "[redacted PEM block]"), statusTextLimit)
}

// poke asks the background writer to publish the latest state, starting it when needed.
func (p *Publisher) poke() {
	p.mu.Lock()
	if p.quit == nil {
		p.wake, p.quit, p.loopDone = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		go p.loop(p.wake, p.quit, p.loopDone)
	}
	wake := p.wake
	p.mu.Unlock()
	select {
	case wake <- struct{}{}:
	default: // a write is due already; it takes the latest state
	}
}

func (p *Publisher) loop(wake, quit, done chan struct{}) {
	defer close(done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-quit:
			return
		case <-wake:
		}
		p.Flush(ctx)
		select {
		case <-quit:
			return
		case <-time.After(statusMinInterval):
		}
	}
}

// Stop ends the background writer, cancelling a write in flight.
func (p *Publisher) Stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	quit, done := p.quit, p.loopDone
	p.quit, p.wake, p.loopDone = nil, nil, nil
	p.mu.Unlock()
	if quit != nil {
		close(quit)
		<-done
	}
}

// flushNow writes an outcome before the engine goes on: the background writer is stopped first, so it
// cannot write an older state afterwards.
func (p *Publisher) flushNow() {
	p.Stop()
	p.Flush(context.Background())
}

// Flush writes the latest state unless it is written already.
func (p *Publisher) Flush(ctx context.Context) {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if p.lease.TakenOver() {
		return // the status is the new holder's to write
	}
	p.mu.Lock()
	if p.version == p.written {
		p.mu.Unlock()
		return
	}
	version, snap := p.version, p.snapshot()
	p.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, statusWriteTimeout)
	defer cancel()
	if err := p.write(wctx, snap); err != nil {
		return // best effort: the next change tries again
	}
	p.mu.Lock()
	p.written = max(p.written, version)
	p.mu.Unlock()
}

// statusSnapshot is what one write publishes.
type statusSnapshot struct {
	conds           []metav1.Condition
	revision        string
	templateVersion string
	members, done   int
	pending         []string
	step, message   string
	storedSnapshot  string
	writeOutage     string
}

// snapshot copies the state to write. Called with mu held.
func (p *Publisher) snapshot() statusSnapshot {
	s := statusSnapshot{revision: p.revision, templateVersion: p.templateVersion, members: len(p.pods), done: p.doneCount(), step: p.step,
		message: publishable(p.message), storedSnapshot: p.storedSnapshot, writeOutage: p.writeOutage}
	for _, pod := range p.pods {
		if !p.done[pod] {
			s.pending = append(s.pending, pod)
		}
	}
	for _, c := range p.conds {
		s.conds = append(s.conds, c)
	}
	return s
}

// write publishes snap, creating the ConfigMap on the first run. A conflict (someone edited it) is read
// again and retried once.
func (p *Publisher) write(ctx context.Context, snap statusSnapshot) error {
	cms := p.kube.CoreV1().ConfigMaps(p.namespace)
	for attempt := 0; ; attempt++ {
		if p.base == nil {
			cur, err := cms.Get(ctx, StatusConfigMapName(p.sts), metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				p.base, p.stored = &corev1.ConfigMap{ObjectMeta: p.newMeta(ctx)}, false
			case err != nil:
				return err
			default:
				p.base, p.stored = cur, true
			}
		}
		next := p.base.DeepCopy()
		next.Data = renderStatus(next.Data, snap, p.holder, time.Now())
		var (
			saved *corev1.ConfigMap
			err   error
		)
		if !p.stored {
			saved, err = cms.Create(ctx, next, metav1.CreateOptions{FieldManager: "etcd-rollout"})
		} else {
			saved, err = cms.Update(ctx, next, metav1.UpdateOptions{FieldManager: "etcd-rollout"})
		}
		if err == nil {
			p.base, p.stored = saved, true
			return nil
		}
		p.base = nil
		if attempt > 0 || !(apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) {
			return err
		}
	}
}

// newMeta is the new ConfigMap's metadata: owned by the StatefulSet when it can be read, so it is collected
// with it (no blockOwnerDeletion, which would need more rights on the StatefulSet).
func (p *Publisher) newMeta(ctx context.Context) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: StatusConfigMapName(p.sts), Namespace: p.namespace,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "etcd-rollout", "etcd-rollout.pulumi.com/statefulset": p.sts}}
	if sts, err := p.kube.AppsV1().StatefulSets(p.namespace).Get(ctx, p.sts, metav1.GetOptions{}); err == nil && sts.UID != "" {
		m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: p.sts, UID: sts.UID}}
	}
	return m
}

// renderStatus is the ConfigMap data for snap. The previous conditions are the base, so a condition whose
// status did not change keeps its lastTransitionTime (meta.SetStatusCondition's rule).
func renderStatus(prev map[string]string, snap statusSnapshot, holder string, now time.Time) map[string]string {
	var conds []metav1.Condition
	_ = json.Unmarshal([]byte(prev[StatusKeyConditions]), &conds)
	for _, c := range snap.conds {
		meta.SetStatusCondition(&conds, c)
	}
	sort.SliceStable(conds, func(i, j int) bool { return conditionRank(conds[i].Type) < conditionRank(conds[j].Type) })
	data := map[string]string{
		StatusKeyStep:      snap.step,
		StatusKeyMessage:   snap.message,
		StatusKeyRun:       holder,
		StatusKeyUpdatedAt: now.UTC().Format(time.RFC3339),
		StatusKeyPending:   strings.Join(snap.pending, ","),
	}
	if raw, err := json.Marshal(conds); err == nil {
		data[StatusKeyConditions] = string(raw)
	}
	for _, c := range conds {
		data[c.Type] = string(c.Status)
	}
	if snap.revision != "" {
		data[StatusKeyTargetRevision] = snap.revision
		if snap.templateVersion != "" {
			data[StatusKeyTemplateVersion] = snap.templateVersion
		}
	}
	if snap.members > 0 {
		data[StatusKeyMembers] = strconv.Itoa(snap.members)
		data[StatusKeyMembersDone] = strconv.Itoa(snap.done)
	}
	// The last snapshot stays until a later run stores another: it is the rollback path, whoever reads it.
	if last := cmp.Or(snap.storedSnapshot, prev[StatusKeySnapshot]); last != "" {
		data[StatusKeySnapshot] = last
	}
	// So does the last one-member restart's outage: what the last consented restart cost.
	if last := cmp.Or(snap.writeOutage, prev[StatusKeyWriteOutage]); last != "" {
		data[StatusKeyWriteOutage] = last
	}
	return data
}

func conditionRank(typ string) int {
	switch typ {
	case ConditionProgressing:
		return 0
	case ConditionMembersUpdated:
		return 1
	case ConditionFailed:
		return 2
	}
	return 3
}

// changed ends a change made with mu held: it unlocks, then writes the status at once (an outcome) or soon
// (progress).
func (p *Publisher) changed(final bool) {
	p.version++
	p.mu.Unlock()
	if final {
		p.flushNow()
	} else {
		p.poke()
	}
}
