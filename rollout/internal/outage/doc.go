// Package outage measures the write outage of a restart that no quorum covers: the restart of a one-member
// etcd's only member (issue 34). It reads through the member, linearizably, every few tens of milliseconds
// from right before the restart until the member is back, and reports the longest stretch between two
// successful reads: the last one before the restart to the first one after it. A linearizable read succeeds
// only when a leader can still commit, so no write can have been acknowledged inside that stretch.
//
// It knows nothing of etcd or Kubernetes: the engine hands it the read.
package outage
