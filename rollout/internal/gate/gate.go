// Package gate is the one place that decides whether a member may be disrupted. Every procedure of the engine
// (the restart roll, a replacement, a revert, the version change) asks it before a step that takes a member
// down, changes etcd's membership, or crosses a point of no return; the preview, `etcd-rollout plan` and a
// run's first look ask it whether the plan may start at all. It runs the whole refusal sequence for the kind
// of step in one function (Check), in one order, and answers with a Permit (what was checked, when, under
// which lease) or a *Refusal naming the rule that refused.
//
// The gate owns the sequence, not the checks: each rule is judged by the engine (Checks), which alone can
// read the cluster. What the gate guarantees is that no kind of step skips a rule of its sequence (Sequence),
// that a rule that holds (waiting may cure it) does not hide a later rule that refuses for good, and that a
// permit is given only with the lease confirmed last, with time left for the step.
package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Kind is what a step does to a member, or, for Preview and Start, to the cluster as a whole.
type Kind int

const (
	// Preflight is the input judged before any member is contacted: the template's image against the
	// members' images. It touches nothing.
	Preflight Kind = iota + 1
	// Preview is a rollout about to be planned and shown: a preview, `etcd-rollout plan`. It touches nothing
	// and holds no lease.
	Preview
	// Start is a run about to act on its plan: the look before each step. It touches nothing itself; its
	// refusals stop the run before the step, its holds make it wait.
	Start
	// MoveLeader moves the leader off a member about to stop.
	MoveLeader
	// Restart lowers the partition for a member: the StatefulSet controller restarts its pod on the update
	// revision.
	Restart
	// RemoveMember removes a voter from etcd's membership: a replacement's first disruption.
	RemoveMember
	// ReleaseData lets the pod that held a removed member's data go (deleted, or restarted by a lowered
	// partition): after it, that data is gone.
	ReleaseData
	// ChangeMembership adds a learner or promotes one: it takes no member down, but only the lease holder may
	// change etcd's membership.
	ChangeMembership
	// Revert decides that a failed member goes back to the current revision; its leader move and its pod's
	// delete then ask for permits of their own.
	Revert
	// Recreate decides that a member down on an older revision is brought back on the current one; its pod's
	// delete then asks for a permit of its own.
	Recreate
	// DeletePod deletes a member's pod, judged on a look taken right before.
	DeletePod
	// PointOfNoReturn is a step only a snapshot can undo: etcd's downgrade enabled.
	PointOfNoReturn
)

var kindNames = map[Kind]string{
	Preflight: "preflight", Preview: "preview", Start: "start", MoveLeader: "move the leader", Restart: "restart",
	RemoveMember: "remove the member", ReleaseData: "release the data", ChangeMembership: "change membership",
	Revert: "revert", Recreate: "recreate", DeletePod: "delete the pod", PointOfNoReturn: "point of no return",
}

func (k Kind) String() string { return nameOf(kindNames, k, "Kind") }

// Rule is one check of the refusal sequence.
type Rule int

const (
	// Shape is the planner's own word on the cluster: durability (data that dies with the pod is replaced,
	// never restarted), an update strategy and peer URLs a rollout can work with, and the quorum the plan
	// holds for.
	Shape Rule = iota + 1
	// Version is the version path (no skipped minor, the v2 store gone before 3.6) and, at a point of no
	// return, etcd's own validation of the downgrade.
	Version
	// Consent is what needs the user's word: a preStop hook that removes the member, a one-member etcd's write
	// outage.
	Consent
	// Controller says the StatefulSet controller will act on the step (OrderedReady, Parallel's maxUnavailable).
	Controller
	// LeaderOff says the member to stop does not lead: the leader is moved off first.
	LeaderOff
	// OneAtATime says every member this run disrupted is back, and that the step exposes no member but its own.
	OneAtATime
	// Trust says the member's peers and clients, as they run now, will talk to it once it restarts on the new
	// material, and that it will trust theirs.
	Trust
	// Quorum says the members other than the target keep a quorum of the voters on a fresh look; learners do
	// not count.
	Quorum
	// Snapshot says a verified snapshot is stored before a point of no return (or the user said to go on
	// without one).
	Snapshot
	// Lease says this run still holds the rollout Lease, with time left for the step. It is checked last, so
	// that the time left is measured from the moment the step goes out.
	Lease
)

var ruleNames = map[Rule]string{
	Shape: "shape", Version: "version", Consent: "consent", Controller: "controller", LeaderOff: "leader off",
	OneAtATime: "one at a time", Trust: "trust", Quorum: "quorum", Snapshot: "snapshot", Lease: "lease",
}

func (r Rule) String() string { return nameOf(ruleNames, r, "Rule") }

// nameOf is v's name in names, or typ(v) for a value without one.
func nameOf[T ~int](names map[T]string, v T, typ string) string {
	if n, ok := names[v]; ok {
		return n
	}
	return fmt.Sprintf("%s(%d)", typ, int(v))
}

// sequences is the refusal sequence of every kind of step, in the order the rules run. It is the one table
// that says what each kind must pass: a procedure cannot pick its own subset.
var sequences = map[Kind][]Rule{
	Preflight:        {Version},
	Preview:          {Shape, Version, Consent, Trust},
	Start:            {Shape, Version, Consent, Controller, Trust},
	MoveLeader:       {Lease},
	Restart:          {LeaderOff, OneAtATime, Trust, Quorum, Controller, Snapshot, Lease},
	RemoveMember:     {LeaderOff, OneAtATime, Trust, Quorum, Snapshot, Lease},
	ReleaseData:      {OneAtATime, Quorum, Controller, Lease},
	ChangeMembership: {Lease},
	Revert:           {OneAtATime, Version, Trust, Quorum},
	Recreate:         {Version},
	DeletePod:        {OneAtATime, Quorum, Lease},
	PointOfNoReturn:  {Version, Snapshot, Lease},
}

// Sequence is the rules a step of kind k passes, in order.
func Sequence(k Kind) []Rule {
	return append([]Rule(nil), sequences[k]...)
}

// Kinds is every kind of step, in the order they are declared.
func Kinds() []Kind {
	return []Kind{Preflight, Preview, Start, MoveLeader, Restart, RemoveMember, ReleaseData, ChangeMembership, Revert, Recreate,
		DeletePod, PointOfNoReturn}
}

// judgedEvenWhenHeld are the rules that still run after an earlier rule held: a hold is waited out, and a
// refusal no waiting cures (a consent not given) must be said first, not after the wait.
var judgedEvenWhenHeld = map[Rule]bool{Consent: true}

// Request is one question to the gate: may the step of kind Kind disrupt member Ordinal (its pod Pod)?
// Preflight, Preview and Start name no member (Ordinal -1).
type Request struct {
	Kind    Kind
	Ordinal int
	Pod     string
	// Need is the time the step needs under the lease once permitted; the permit is refused when the lease
	// confirmed has less left. Zero: any time left.
	Need time.Duration
}

// Checks judges the rules; the engine implements it, since only it can read the cluster.
type Checks interface {
	// Check judges one rule for req: nil when it passes.
	Check(ctx context.Context, rule Rule, req Request) error
	// Holds says err is a hold that waiting may cure (a member still starting, a quorum not yet back), rather
	// than a refusal that stands until something is changed.
	Holds(err error) bool
	// LeaseUntil is when the lease the Lease rule confirmed runs out (zero: no lease, as in a preview).
	LeaseUntil() time.Time
}

// Permit says a step may go out: what it is, which rules it passed, when, and until when the lease it was
// checked under surely stays this run's. A procedure that holds one makes its step within LeaseUntil (Within).
type Permit struct {
	Kind       Kind
	Ordinal    int
	Pod        string
	Checked    []Rule
	At         time.Time
	LeaseUntil time.Time
}

// Within bounds ctx to the permit's lease: a step made under it cannot land after the lease it was checked
// under runs out (a write retried past an API server that answers again late). A zero Permit's lease ran out
// long ago: nothing goes out under it.
func (p Permit) Within(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, p.LeaseUntil)
}

func (p Permit) String() string {
	var rules []string
	for _, r := range p.Checked {
		rules = append(rules, r.String())
	}
	what := p.Kind.String()
	if p.Pod != "" {
		what += " " + p.Pod
	}
	return fmt.Sprintf("%s permitted (%s)", what, strings.Join(rules, ", "))
}

// Refusal is the gate's no: the rule that refused, and its own error, which Unwrap gives (the engine's
// typed errors stay matchable with errors.Is and errors.As). Held says waiting may cure it.
type Refusal struct {
	Kind Kind
	Rule Rule
	Held bool
	Err  error
}

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

// ErrLeaseShort is the Lease rule's refusal when the lease has less time left than the step needs.
var ErrLeaseShort = errors.New("the rollout lease has too little time left for the step")

// ErrNoSequence is returned for a kind of step the gate has no sequence for: a new procedure's step must be
// given one before it can go out.
var ErrNoSequence = errors.New("the gate has no refusal sequence for this kind of step")

// Check runs req's refusal sequence. The first refusal that stands ends it; a hold is kept while the rules
// judged even when held run, and is returned if none of them refuses. A permit is returned only when every
// rule passed.
func Check(ctx context.Context, c Checks, req Request) (Permit, error) {
	seq, ok := sequences[req.Kind]
	if !ok {
		return Permit{}, &Refusal{Kind: req.Kind, Err: fmt.Errorf("%w: %s", ErrNoSequence, req.Kind)}
	}
	permit := Permit{Kind: req.Kind, Ordinal: req.Ordinal, Pod: req.Pod}
	var held *Refusal
	for _, rule := range seq {
		if held != nil && !judgedEvenWhenHeld[rule] {
			continue
		}
		err := c.Check(ctx, rule, req)
		if err == nil && rule == Lease {
			err = leaseLeft(c.LeaseUntil(), req.Need)
		}
		switch {
		case err == nil:
			permit.Checked = append(permit.Checked, rule)
		case c.Holds(err):
			if held == nil {
				held = &Refusal{Kind: req.Kind, Rule: rule, Held: true, Err: err}
			}
		default:
			return Permit{}, &Refusal{Kind: req.Kind, Rule: rule, Err: err}
		}
	}
	if held != nil {
		return Permit{}, held
	}
	permit.At = time.Now()
	if slices.Contains(seq, Lease) {
		permit.LeaseUntil = c.LeaseUntil()
	}
	return permit, nil
}

// leaseLeft refuses a lease that runs out before the step's need is over.
func leaseLeft(until time.Time, need time.Duration) error {
	if left := time.Until(until); left <= need {
		return fmt.Errorf("%w: %s left, %s needed", ErrLeaseShort, left.Round(time.Millisecond), need)
	}
	return nil
}

// UnlessHeld is err, the gate's refusal, as a procedure returns it: nil for a hold (the run looks again), the
// refusal itself otherwise.
func UnlessHeld(err error) error {
	var refusal *Refusal
	if errors.As(err, &refusal) && refusal.Held {
		return nil
	}
	return err
}
