// Package memberlist is one entry of etcd's member list as plain values: what the planner reads of a
// cluster's membership without importing etcd's client (internal/member fills it from etcd's answer).
package memberlist

// Member is one entry of the etcd member list.
type Member struct {
	ID        uint64
	Name      string
	IsLearner bool
	// PeerURLs are the member's advertised peer URLs: the name a replaced member keeps across its new IDs.
	PeerURLs []string
}
