package provider

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// The first line of a stopped run's error says what happened, to which member, what was done and what to do,
// for the five commonest failures; the run's whole account follows on the next line.
func TestFailureReasonSaysWhatHappenedFirst(t *testing.T) {
	neverServes := &rollout.GateTimeoutError{Pod: "etcd-2", Gate: rollout.GateEtcdHealth, Timeout: time.Minute,
		LastSeen: "etcd does not accept connections on its client port (the port-forward to it ended before etcd ever answered)"}
	crashLoop := &rollout.GateTimeoutError{Pod: "etcd-1", Gate: rollout.GateEtcdHealth, Timeout: time.Minute,
		PassedAt: time.Date(2026, 12, 3, 10, 4, 5, 0, time.UTC), LastSeen: "not voting: a learner"}
	tests := []struct {
		name   string
		err    error
		last   *RolloutFailure
		rolled []string
		want   string
	}{
		{name: "a bad revision, reverted",
			err: fmt.Errorf("%w; etcd-2 is healthy on rev-a again", &rollout.RevertedError{Pod: "etcd-2", From: "rev-b", To: "rev-a", Cause: neverServes}),
			want: "etcd-2 failed the etcd health gate on revision rev-b (last seen: etcd does not accept connections on its client port " +
				"(the port-forward to it ended before etcd ever answered)) and was reverted to rev-a; the partition is locked, so no other " +
				"member restarts: fix the pod template (etcd-2's events and logs from the failed start say why), then run pulumi up again"},
		{name: "not healthy in time, past the point of no return",
			err:    fmt.Errorf("%w; the partition is locked again", crashLoop),
			last:   &RolloutFailure{Member: "etcd-1", RevertError: "past the point of no return"},
			rolled: []string{"etcd-2"},
			want: "etcd-1 passed the etcd health gate at 10:04:05, then did not stay healthy (last seen: not voting: a learner); " +
				"it was not reverted: past the point of no return; the partition is locked, so no other member restarts: look at etcd-1 " +
				"(its events and logs), fix the template or the member, then run pulumi up again"},
		{name: "not healthy in time, and the re-lock failed",
			err: errors.Join(neverServes, fmt.Errorf("%w: re-locking db/etcd failed", rollout.ErrPartitionNotLocked)),
			want: "etcd-2 did not pass the etcd health gate within 1m0s (last seen: etcd does not accept connections on its client port " +
				"(the port-forward to it ended before etcd ever answered)); it was not reverted; the partition may still be lowered " +
				"(the next pulumi up re-locks it first; `etcd-rollout unlock` does it now), so no other member restarts: look at etcd-2 " +
				"(its events and logs), fix the template or the member, then run pulumi up again"},
		{name: "blocked by quorum",
			err: fmt.Errorf("held for 1m0s: %w", &rollout.BlockedError{Reason: "restarting etcd-2 would leave 1 healthy member(s), quorum is 2 of 3 (etcd-0 down)"}),
			want: "db/etcd: no member was restarted for this step because restarting etcd-2 would leave 1 healthy member(s), quorum is 2 of 3 " +
				"(etcd-0 down); the partition is locked: bring the members back to health (or wait until they are), then run pulumi up again"},
		{name: "another holder",
			err: &rollout.LockedError{Lease: "db/etcd-etcd-rollout", Holder: "ci-runner-7", Renewed: time.Now().Add(-5 * time.Second), ExpiresIn: 10 * time.Second},
			want: "db/etcd: another rollout holds lease db/etcd-etcd-rollout (ci-runner-7, renewed 5s ago), so nothing was changed: " +
				"wait for it to finish, or if it is gone, run pulumi up again after 10s"},
		{name: "someone else's write",
			err: &rollout.InterferenceError{Action: "lowering the partition to 1", Generation: 7, Expected: 6, Writer: "kubectl-edit"},
			want: `db/etcd was changed by someone else (last written by "kubectl-edit" (managedFields)) before lowering the partition to 1, ` +
				"so nothing was written and the partition is locked: find who changed it and why, then run pulumi up again to roll to its current template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason := failureReason("db/etcd", tt.rolled, tt.err, tt.last)
			first, account, found := strings.Cut(reason, "\n")
			assert.True(t, found, "a headline, then the account: %q", reason)
			assert.Equal(t, tt.want, first)
			want := fmt.Sprintf("rollout of db/etcd stopped before any member was rolled: %v", tt.err)
			if len(tt.rolled) > 0 {
				want = fmt.Sprintf("rollout of db/etcd stopped after %d member(s) (%s): %v", len(tt.rolled), strings.Join(tt.rolled, ", "), tt.err)
			}
			assert.Equal(t, want, account)
		})
	}
}

// A failure without a headline keeps the one-line account.
func TestFailureReasonWithoutAHeadlineIsTheAccount(t *testing.T) {
	assert.Equal(t, "rollout of db/etcd stopped before any member was rolled: boom", failureReason("db/etcd", nil, errors.New("boom"), nil))
	assert.Equal(t, "rollout of db/etcd stopped after 1 member(s) (etcd-2): boom", failureReason("db/etcd", []string{"etcd-2"}, errors.New("boom"), nil))
}
