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
	// AnnotationVersion chooses the etcd binary: "3.6" (default, .tools/bin/etcd), "3.5" (.tools/bin/etcd-v3.5)
	// or an exact release X.Y.Z (.tools/bin/etcd-vX.Y.Z, such as 3.5.21: tools/build.sh builds the ones the
	// tests use).
	AnnotationVersion = "etcd-rollout.test/etcd-version"
	// AnnotationBroken set to "true" makes the member fail to start (etcd exits on an unknown flag), as a
	// bad image or a bad flag would: the pod never turns Ready and the member is restarted with back-off.
	AnnotationBroken = "etcd-rollout.test/broken"
	// AnnotationTLSDir names the mount path of the Secret volume with the member certificates
	// (default DefaultTLSDir). A pod with a Secret volume mounted there runs client and peer mTLS.
	AnnotationTLSDir = "etcd-rollout.test/tls-dir"

	// The three below make a member start the ways production members do that the plain harness hides.
	// Values are seconds (see ParseSeconds); every pod of a template that carries one behaves so (unless
	// AnnotationFaultOrdinals picks some), so a template change that adds one makes the new revision slow
	// or crashing.

	// AnnotationStartDelay keeps a new pod Pending (not Running, not Ready) that long after the daemon first
	// sees it before its etcd process starts: an image pull or a volume attach. Once per pod: a container
	// restart inside the same pod does not wait again.
	AnnotationStartDelay = "etcd-rollout.test/start-delay"
	// AnnotationServeDelay starts the container (pod Running, and Ready at once when it has no
	// readinessProbe, as a kubelet would) but starts etcd, and so opens its ports, only that long later: a
	// large database being opened. On every start of the container.
	AnnotationServeDelay = "etcd-rollout.test/serve-delay"
	// AnnotationCrashAfter kills the container (SIGKILL) that long after each start of it, counted from the
	// container start (so a crash-after below the serve delay crashes before serving); the daemon restarts
	// it with CrashLoopBackOff-like back-off (1 s doubling to 10 s).
	AnnotationCrashAfter = "etcd-rollout.test/crash-after"

	// AnnotationClientsRefused set to "true" runs etcd normally (its peer port works: it joins Raft as a
	// voting member, the leader learns its version, so the cluster version can move) but refuses every
	// connection to its client port, as a misconfigured client listener would: whatever reaches the pod's
	// client port — a port-forward (kubectl, the engine), `kubectl exec ... etcdctl` — is refused at once. The
	// daemon's own status API and the harness's health checks still reach the member directly.
	AnnotationClientsRefused = "etcd-rollout.test/clients-refused"

	// AnnotationFaultOrdinals, when set ("0", "0,2": see ParseOrdinals), limits the start faults of the
	// template (broken, start-delay, serve-delay, crash-after, clients-refused) to the pods of those
	// ordinals; the other pods of the same revision start normally. So one revision can fail on one chosen
	// member, such as the last one a rollout reaches.
	AnnotationFaultOrdinals = "etcd-rollout.test/fault-ordinals"
)

// AnnotationStarted is set by the daemon, never by a person, when it starts the pod's container; the member
// kwok stage etcd-member-running makes the pod Running only then, so a start delay keeps the pod Pending.
// It stays while the pod lives: a restarting container leaves the pod Running, as on a real node.
const AnnotationStarted = "etcd-rollout.test/started"

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
	// SecretForeignCA, when present, is the CA that signed server.crt instead of ca.crt (a negative test of
	// the clients): the daemon and the harness trust it too, to check the member's health; etcd does not
	// use it.
	SecretForeignCA = "harness-foreign-ca.crt"
)

// Container ports of the etcd container, as in the production manifests; PortForward rules map them to the
// member's local ports.
const (
	PortNameClient    = "client"
	PortNamePeer      = "peer"
	DefaultClientPort = 2379
	DefaultPeerPort   = 2380
)
