package member

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/testetcd"
)

// The membership changes of a replacement, against real etcd processes: a learner added for a free peer URL,
// promoted only once its process has started and caught up, then removed; and each of etcd's answers that
// says a change landed already (what a run resumed after a kill sees) comes back typed.
func TestMembershipChangesAgainstRealEtcd(t *testing.T) {
	bin := testetcd.Binary(t, "etcd")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m0, m1 := testetcd.NewMember(t, "etcd-0"), testetcd.NewMember(t, "etcd-1")
	m0.Start(t, bin, "etcd-0="+m0.PeerURL(), "new")
	clients := NewClients(testetcd.Dialer{"etcd-0": m0.ClientAddr(), "etcd-1": m1.ClientAddr()}, "db", "etcd", 2379, nil)
	defer clients.Close()
	until(t, ctx, func() error { return clients.LinearizableRead(ctx, "etcd-0") })

	learner, err := clients.MemberAddAsLearner(ctx, "etcd-0", m1.PeerURL())
	require.NoError(t, err)
	assert.True(t, learner.IsLearner)
	assert.Equal(t, []string{m1.PeerURL()}, learner.PeerURLs)
	assert.Empty(t, learner.Name, "no name until its process starts")
	_, err = clients.MemberAddAsLearner(ctx, "etcd-0", m1.PeerURL())
	require.ErrorIs(t, err, ErrPeerURLExists, "an add that landed already")
	require.ErrorIs(t, clients.MemberPromote(ctx, "etcd-0", learner.ID), ErrLearnerNotReady, "not started: not caught up")

	m1.Start(t, bin, fmt.Sprintf("etcd-0=%s,etcd-1=%s", m0.PeerURL(), m1.PeerURL()), "existing")
	until(t, ctx, func() error { return clients.MemberPromote(ctx, "etcd-0", learner.ID) })
	// etcd judges the member's progress before whether it is a learner at all: a repeat right after the promote
	// can be refused as "not caught up" until the new voter has caught up (1 in 8 runs beside a busy machine).
	err = clients.MemberPromote(ctx, "etcd-0", learner.ID)
	for errors.Is(err, ErrLearnerNotReady) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		err = clients.MemberPromote(ctx, "etcd-0", learner.ID)
	}
	require.ErrorIs(t, err, ErrNotLearner, "a promote that landed already")
	list, err := clients.MemberList(ctx, "etcd-0")
	require.NoError(t, err)
	require.Len(t, list, 2)
	for _, m := range list {
		assert.False(t, m.IsLearner, "%s votes", m.Name)
		if m.ID == learner.ID {
			assert.Equal(t, "etcd-1", m.Name)
			assert.Equal(t, []string{m1.PeerURL()}, m.PeerURLs)
		}
	}

	// Just promoted, etcd-1 has been connected for less than etcd's five seconds: the remove is refused as
	// not ready, typed, until it has.
	err = clients.MemberRemove(ctx, "etcd-0", learner.ID)
	if err != nil {
		require.ErrorIs(t, err, ErrClusterNotReadyForChange)
		until(t, ctx, func() error { return clients.MemberRemove(ctx, "etcd-0", learner.ID) })
	}
	require.ErrorIs(t, clients.MemberRemove(ctx, "etcd-0", learner.ID), ErrMemberNotFound, "a remove that landed already")
	list, err = clients.MemberList(ctx, "etcd-0")
	require.NoError(t, err)
	assert.Len(t, list, 1)
}

// until retries call until it succeeds or ctx ends (a bound for a broken process, not a timing claim).
func until(t *testing.T, ctx context.Context, call func() error) {
	t.Helper()
	var err error
	for ctx.Err() == nil {
		if err = call(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("gave up: %v", err)
}
