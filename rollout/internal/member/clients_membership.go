package member

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// The membership changes a replacement makes (issue 32: a member whose data dies with its pod is removed,
// added back as a learner and promoted), each sent through one member that answers, like every other call.
// etcd's own refusals that say the change is done already, or not yet possible, are typed, so that a run
// resumed after a kill can tell "done" from "failed" without reading prose.

// ErrMemberNotFound is returned by MemberRemove and MemberPromote when etcd lists no such member ID: a remove
// that a killed run sent already landed.
var ErrMemberNotFound = errors.New("etcd lists no such member")

// ErrLearnerNotReady is returned by MemberPromote while the learner is not caught up enough for etcd: retry.
var ErrLearnerNotReady = errors.New("the learner is not caught up with the leader yet")

// ErrNotLearner is returned by MemberPromote for a member that votes already: a promote that a killed run sent
// already landed.
var ErrNotLearner = errors.New("the member is a voter already")

// ErrPeerURLExists is returned by MemberAddAsLearner when a member has the peer URL already: an add that a
// killed run sent already landed, or the old member was never removed. etcd derives a new member's ID from its
// peer URLs and the second it is added, so an add repeated within the second is refused for its ID ("member
// ID already exist") before its URL is checked: that answer means the same here.
var ErrPeerURLExists = errors.New("a member has this peer URL already")

// ErrClusterNotReadyForChange is returned when etcd refuses a membership change because it would leave too few
// members it has heard from for long enough ("etcdserver: unhealthy cluster": with strict reconfiguration
// checks, the default, a peer counts only once connected for five seconds, so a remove right after a member
// (re)joined is refused; "not enough started members": a voter has not started). Retry; a refusal that lasts
// means a member really is down.
var ErrClusterNotReadyForChange = errors.New("etcd refuses the change while too few members are connected")

// ErrTooManyLearners is returned by MemberAddAsLearner when etcd holds as many learners as it allows (one by
// default, --max-learners): a learner someone else added, or one a killed run left.
var ErrTooManyLearners = errors.New("etcd holds as many learners as it allows")

// MemberRemove removes member id, through pod.
func (m *Clients) MemberRemove(ctx context.Context, pod string, id uint64) error {
	return m.write(ctx, pod, fmt.Sprintf("remove member %x", id), func(ctx context.Context, c *memberClient) error {
		_, err := c.cli.MemberRemove(ctx, id)
		return err
	})
}

// MemberAddAsLearner adds a learner with peerURL, through pod, and returns it as etcd registered it (its new
// ID; no name until its process starts).
func (m *Clients) MemberAddAsLearner(ctx context.Context, pod, peerURL string) (Info, error) {
	var added Info
	err := m.write(ctx, pod, "add a learner at "+peerURL, func(ctx context.Context, c *memberClient) error {
		resp, err := c.cli.MemberAddAsLearner(ctx, []string{peerURL})
		if err == nil {
			added = Info{ID: resp.Member.ID, Name: resp.Member.Name, IsLearner: resp.Member.IsLearner, PeerURLs: resp.Member.PeerURLs}
		}
		return err
	})
	return added, err
}

// MemberPromote makes learner id a voter, through pod (etcd forwards it to the leader).
func (m *Clients) MemberPromote(ctx context.Context, pod string, id uint64) error {
	return m.write(ctx, pod, fmt.Sprintf("promote learner %x", id), func(ctx context.Context, c *memberClient) error {
		_, err := c.cli.MemberPromote(ctx, id)
		return err
	})
}

// write sends one membership change through pod and types etcd's answers that say where the change stands.
// A call that ended without an answer (AnswerLost) may have landed: the caller looks at the member list again.
func (m *Clients) write(ctx context.Context, pod, what string, call func(context.Context, *memberClient) error) error {
	c, err := m.client(ctx, pod)
	if err != nil {
		return err
	}
	ctx, done := c.bound(ctx)
	defer done()
	err = call(ctx, c)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrMemberNotFound):
		err = ErrMemberNotFound
	case errors.Is(err, rpctypes.ErrMemberLearnerNotReady):
		err = ErrLearnerNotReady
	case errors.Is(err, rpctypes.ErrMemberNotLearner):
		err = ErrNotLearner
	case errors.Is(err, rpctypes.ErrUnhealthy), errors.Is(err, rpctypes.ErrMemberNotEnoughStarted):
		err = ErrClusterNotReadyForChange
	case errors.Is(err, rpctypes.ErrTooManyLearners):
		err = ErrTooManyLearners
	case errors.Is(err, rpctypes.ErrPeerURLExist), errors.Is(err, rpctypes.ErrMemberExist):
		err = ErrPeerURLExists
	default:
		err = explain(ctx, err)
	}
	return fmt.Errorf("%s through %s: %w", what, pod, err)
}
