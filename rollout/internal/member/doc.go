// Package member is the engine's access to etcd members, one member at a time: a single-endpoint etcd
// client per member (so a request reaches the member it names: a balancing client would send MoveLeader to a
// follower), reached through a memberdial.Dialer, with TLS verified against each member's own names.
//
// It also says what a failed call means, as types the engine branches on: ErrNoLook (the look never reached
// etcd: nothing is known of the member), ClientPortRefusedError (etcd does not accept connections),
// CertRefusedError and MemberCertError (the member's certificate was refused), ErrForwardEnded, and
// Transient for the downgrade API. The engine (package rollout) holds it behind the interface it calls
// (etcdAccess) and imports no etcd, gRPC or zap package itself.
package member
