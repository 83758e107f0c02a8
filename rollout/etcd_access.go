package rollout

import (
	"context"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
)

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
