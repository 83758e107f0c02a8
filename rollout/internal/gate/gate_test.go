package gate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeChecks answers each rule from a table and records what it was asked.
type fakeChecks struct {
	answers map[Rule]error
	holds   map[error]bool
	until   time.Time
	asked   []Rule
}

func (f *fakeChecks) Check(_ context.Context, rule Rule, _ Request) error {
	f.asked = append(f.asked, rule)
	return f.answers[rule]
}

func (f *fakeChecks) Holds(err error) bool  { return f.holds[err] }
func (f *fakeChecks) LeaseUntil() time.Time { return f.until }

// The table is the contract every procedure relies on: a step that takes a member down, changes membership or
// crosses a point of no return confirms the lease last, and one that takes a member down keeps one at a time
// and the quorum.
func TestEverySequenceKeepsTheRules(t *testing.T) {
	disrupts := map[Kind]bool{MoveLeader: true, Restart: true, RemoveMember: true, ReleaseData: true, ChangeMembership: true,
		DeletePod: true, PointOfNoReturn: true}
	takesDown := []Kind{Restart, RemoveMember, ReleaseData, DeletePod}
	for _, k := range Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			seq := Sequence(k)
			require.NotEmpty(t, seq, "a kind without a sequence cannot be asked about")
			assert.Equal(t, disrupts[k], slices.Contains(seq, Lease), "the lease is confirmed exactly for the steps that write")
			if i := slices.Index(seq, Lease); i >= 0 {
				assert.Equal(t, len(seq)-1, i, "the lease is confirmed last, so its time left is measured at the step")
			}
			if slices.Contains(takesDown, k) {
				assert.Contains(t, seq, Quorum)
				assert.Contains(t, seq, OneAtATime)
			}
			for _, r := range seq {
				assert.NotContains(t, r.String(), "Rule(", "every rule has a name")
			}
		})
	}
	for _, k := range []Kind{Restart, RemoveMember} {
		assert.Subset(t, Sequence(k), []Rule{LeaderOff, Trust, Snapshot}, "%s", k)
	}
	assert.Subset(t, Sequence(PointOfNoReturn), []Rule{Version, Snapshot})
	assert.Subset(t, Sequence(Preview), []Rule{Shape, Version, Consent, Trust})
}

func TestCheck(t *testing.T) {
	held, refused, other := errors.New("a member is still starting"), errors.New("no consent"), errors.New("peers refuse")
	later := time.Now().Add(time.Minute)
	tests := []struct {
		name    string
		kind    Kind
		answers map[Rule]error
		until   time.Time
		need    time.Duration
		// wantRule is the rule that refused (0: a permit); wantHeld says the refusal is a hold.
		wantRule  Rule
		wantHeld  bool
		wantErr   error
		wantAsked []Rule
	}{
		{name: "every rule passes", kind: Restart, until: later,
			wantAsked: []Rule{LeaderOff, OneAtATime, Trust, Quorum, Controller, Snapshot, Lease}},
		{name: "the first refusal ends the sequence", kind: Restart, until: later, answers: map[Rule]error{Trust: other},
			wantRule: Trust, wantErr: other, wantAsked: []Rule{LeaderOff, OneAtATime, Trust}},
		{name: "a hold skips the rules that need a plan but not the consent", kind: Start,
			answers:  map[Rule]error{Shape: held},
			wantRule: Shape, wantHeld: true, wantErr: held, wantAsked: []Rule{Shape, Consent}},
		{name: "a missing consent is refused before a hold is waited out", kind: Preview,
			answers:  map[Rule]error{Shape: held, Consent: refused},
			wantRule: Consent, wantErr: refused, wantAsked: []Rule{Shape, Consent}},
		{name: "a hold late in the sequence", kind: DeletePod, until: later, answers: map[Rule]error{Quorum: held},
			wantRule: Quorum, wantHeld: true, wantErr: held, wantAsked: []Rule{OneAtATime, Quorum}},
		{name: "a lease with too little time left", kind: ChangeMembership, until: time.Now().Add(time.Second), need: time.Minute,
			wantRule: Lease, wantErr: ErrLeaseShort, wantAsked: []Rule{Lease}},
		{name: "a lease already run out", kind: MoveLeader, until: time.Now().Add(-time.Second),
			wantRule: Lease, wantErr: ErrLeaseShort, wantAsked: []Rule{Lease}},
		{name: "a kind the gate has no sequence for", kind: Kind(99), wantErr: ErrNoSequence},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeChecks{answers: tt.answers, holds: map[error]bool{held: true}, until: tt.until}
			p, err := Check(context.Background(), f, Request{Kind: tt.kind, Ordinal: 1, Pod: "etcd-1", Need: tt.need})
			assert.Equal(t, tt.wantAsked, f.asked)
			if tt.wantErr == nil {
				require.NoError(t, err)
				assert.Equal(t, Sequence(tt.kind), p.Checked)
				assert.Equal(t, tt.until, p.LeaseUntil)
				assert.Equal(t, "etcd-1", p.Pod)
				assert.False(t, p.At.IsZero())
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			assert.Zero(t, p, "no permit with a refusal")
			var refusal *Refusal
			require.ErrorAs(t, err, &refusal)
			assert.Equal(t, tt.wantRule, refusal.Rule)
			assert.Equal(t, tt.wantHeld, refusal.Held)
		})
	}
}

// A preview holds no lease: its permit carries none, and no lease is asked for.
func TestAPreviewPermitHasNoLease(t *testing.T) {
	f := &fakeChecks{until: time.Now().Add(time.Hour)}
	p, err := Check(context.Background(), f, Request{Kind: Preview, Ordinal: -1})
	require.NoError(t, err)
	assert.True(t, p.LeaseUntil.IsZero())
	assert.NotContains(t, f.asked, Lease)
	assert.Equal(t, "preview permitted (shape, version, consent, trust)", p.String())
}

// A step made under a permit cannot outlive its lease; under a zero permit it cannot go out at all.
func TestAStepUnderAPermitEndsWithItsLease(t *testing.T) {
	ctx, cancel := Permit{}.Within(context.Background())
	defer cancel()
	assert.Error(t, ctx.Err(), "a zero permit's lease ran out long ago")
	until := time.Now().Add(time.Hour)
	ctx, cancel = Permit{LeaseUntil: until}.Within(context.Background())
	defer cancel()
	deadline, ok := ctx.Deadline()
	assert.True(t, ok)
	assert.Equal(t, until, deadline)
}

// The architecture page shows the gate's table as it is: a newcomer reads the sequences there.
func TestTheArchitecturePageShowsTheGatesTable(t *testing.T) {
	page, err := os.ReadFile("../../../docs/architecture.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(page), "<!-- gate-sequences:begin -->\n")
	require.True(t, ok, "docs/architecture.md has no gate table")
	table, _, ok = strings.Cut(table, "<!-- gate-sequences:end -->")
	require.True(t, ok)
	want := "| kind | rules, in order |\n|---|---|\n"
	for _, k := range Kinds() {
		var rules []string
		for _, r := range Sequence(k) {
			rules = append(rules, r.String())
		}
		want += fmt.Sprintf("| %s | %s |\n", k, strings.Join(rules, ", "))
	}
	assert.Equal(t, want, table)
}
