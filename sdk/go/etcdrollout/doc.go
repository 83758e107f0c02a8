// Rolls etcd StatefulSets member by member with no uncontrolled Raft leader elections.
package etcdrollout
