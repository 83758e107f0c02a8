package memberapi

import "time"

// Readiness says when the daemon marks a member's pod Ready.
type Readiness string

const (
	// ReadyOnStart marks the pod Ready once the etcd process started, as a kubelet does for a container with
	// no readinessProbe (the production manifests have none).
	ReadyOnStart Readiness = "immediate"
	// ReadyOnProbe marks the pod Ready only while the member's /readyz answers 200, as a readinessProbe
	// would. The daemon uses it for pods whose etcd container has a readinessProbe. While a StatefulSet is
	// bootstrapping (not every ordinal has started once) it behaves as ReadyOnStart, because /readyz needs
	// quorum and OrderedReady would otherwise never create the second pod.
	ReadyOnProbe Readiness = "probe"
)

// State of a member's etcd process.
type State string

const (
	StateRunning     State = "running"
	StateStopped     State = "stopped"     // SIGSTOP: alive but frozen
	StateTerminating State = "terminating" // the pod is being deleted; waiting for the process to exit
	StateExited      State = "exited"      // crashed or failed to start; restarted with back-off while the pod lives
	StateWaiting     State = "waiting"     // the pod exists but the process has not started (old one still exiting)
	StatePending     State = "pending"     // the pod waits out its start delay: phase Pending, no process
	StateLoading     State = "loading"     // the container started but etcd waits out its serve delay: ports closed
)

// Member is what the daemon knows of the etcd member behind one pod. URLs and ports are on 127.0.0.1; the
// client URL uses https when TLS is on.
type Member struct {
	Namespace   string `json:"namespace"`
	Pod         string `json:"pod"`
	PodUID      string `json:"podUID"`
	StatefulSet string `json:"statefulSet"`
	Ordinal     int    `json:"ordinal"`

	Version   string    `json:"version"`
	Binary    string    `json:"binary"`
	TLS       bool      `json:"tls"`
	Readiness Readiness `json:"readiness"`
	Broken    bool      `json:"broken"`
	// The start faults of the pod's annotations (AnnotationStartDelay, AnnotationServeDelay,
	// AnnotationCrashAfter) that apply to this pod (AnnotationFaultOrdinals); zero when unset. Broken too.
	StartDelay time.Duration `json:"startDelay,omitempty"`
	ServeDelay time.Duration `json:"serveDelay,omitempty"`
	CrashAfter time.Duration `json:"crashAfter,omitempty"`
	// ClientsRefused: the pod's client port refuses every connection (AnnotationClientsRefused).
	ClientsRefused bool `json:"clientsRefused,omitempty"`

	ClientPort  int    `json:"clientPort"`
	PeerPort    int    `json:"peerPort"`
	MetricsPort int    `json:"metricsPort"`
	ClientURL   string `json:"clientURL"`
	PeerURL     string `json:"peerURL"`
	MetricsURL  string `json:"metricsURL"` // plain http: /metrics, /health, /livez, /readyz

	DataDir string `json:"dataDir"`
	TLSDir  string `json:"tlsDir,omitempty"` // ca.crt, client.crt, client.key, ... as files
	LogFile string `json:"logFile"`

	State State `json:"state"`
	PID   int   `json:"pid,omitempty"`
	// Starts counts the processes started for this member name since the daemon started; a test sees a
	// restart as a higher count (and a new PID).
	Starts     int       `json:"starts"`
	StartedAt  time.Time `json:"startedAt,omitempty"` // when the container started (before any serve delay)
	LastExit   string    `json:"lastExit,omitempty"`
	HangOnTerm bool      `json:"hangOnTerm"`
	Ready      bool      `json:"ready"`
}

// Status is the member's own answer to the etcd Status RPC.
type Status struct {
	MemberID     uint64 `json:"memberID"`
	Leader       uint64 `json:"leader"`
	RaftTerm     uint64 `json:"raftTerm"`
	RaftIndex    uint64 `json:"raftIndex"`
	AppliedIndex uint64 `json:"appliedIndex"`
	IsLearner    bool   `json:"isLearner"`
	Version      string `json:"version"`
}

// Signal names what the control API may send to a member process.
type Signal string

const (
	SignalKill Signal = "KILL" // crash
	SignalStop Signal = "STOP" // freeze
	SignalCont Signal = "CONT" // thaw
	SignalTerm Signal = "TERM" // graceful stop; the daemon restarts the member like a crashed container
)

// SignalRequest is the body of POST /v1/members/{namespace}/{pod}/signal.
type SignalRequest struct {
	Signal Signal `json:"signal"`
}

// HangOnTermRequest is the body of POST /v1/members/{namespace}/{pod}/hang-on-term. While enabled, the daemon
// does not forward SIGTERM when the pod is deleted, so the member dies only by SIGKILL at the end of the
// grace period: a shutdown that hangs, and a leader lost without a hand-over.
type HangOnTermRequest struct {
	Enabled bool `json:"enabled"`
}
