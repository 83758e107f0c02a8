// Package memberapi is the contract between the member daemon (cmd/etcd-members), the manifests and the
// tests: the labels and annotations by which a pod template opts in and chooses what its member runs, and
// the daemon's HTTP control API with its Go client.
package memberapi

// A pod template opts in to a real etcd member by carrying LabelMember: "true". Such pods get the member
// kwok stages (tests/cluster/member-stages.yaml): the daemon, not kwok, decides when they are Ready and when
// their deletion ends.
const LabelMember = "etcd-rollout.test/member"

// Annotations read from the pod (set them in the pod template, so a template change is a new revision).
const (
	// AnnotationVersion chooses the etcd binary: "3.6" (default, .tools/bin/etcd) or "3.5" (.tools/bin/etcd-v3.5).
	AnnotationVersion = "etcd-rollout.test/etcd-version"
	// AnnotationBroken set to "true" makes the member fail to start (etcd exits on an unknown flag), as a
	// bad image or a bad flag would: the pod never turns Ready and the member is restarted with back-off.
	AnnotationBroken = "etcd-rollout.test/broken"
	// AnnotationTLSDir names the mount path of the Secret volume with the member certificates
	// (default DefaultTLSDir). A pod with a Secret volume mounted there runs client and peer mTLS.
	AnnotationTLSDir = "etcd-rollout.test/tls-dir"
)

// AnnotationReady is set by the daemon, never by a person: the member kwok stages make the pod Ready exactly
// while it is "true".
const AnnotationReady = "etcd-rollout.test/ready"

// DefaultTLSDir is where the keyspace-etcd-group manifests mount their cluster Secret.
const DefaultTLSDir = "/var/lib/etcd-tls"

// Keys of the TLS Secret. The server certificate serves clients, the peer certificate serves and dials peers
// (both carry serverAuth and clientAuth), the client certificate is for etcdctl, the engine and the tests.
const (
	SecretCA         = "ca.crt"
	SecretServerCert = "server.crt"
	SecretServerKey  = "server.key"
	SecretPeerCert   = "peer.crt"
	SecretPeerKey    = "peer.key"
	SecretClientCert = "client.crt"
	SecretClientKey  = "client.key"
)

// Container ports of the etcd container, as in the production manifests; PortForward rules map them to the
// member's local ports.
const (
	PortNameClient    = "client"
	PortNamePeer      = "peer"
	DefaultClientPort = 2379
	DefaultPeerPort   = 2380
)
