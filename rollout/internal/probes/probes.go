// Package probes judges the etcd container's liveness and readiness probes for the shapes that turn a roll's
// hiccup into an outage (etcd#13340, kubeadm#2567; ../shared/notes/shapes.md §5.3). It only warns: the engine
// gates on etcd's own word whatever the kubelet probes, so the roll goes on; the person reading the preview
// decides. Pure: it reads the API's types and makes no call.
package probes

import (
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Kind says what is wrong with a probe.
type Kind string

const (
	// LivenessNeedsQuorum is a liveness probe that fails on every member while the cluster has no quorum
	// (etcd's /health without serializable=true, `etcdctl endpoint health`): a transient quorum loss, the
	// restarted member plus one more, then makes the kubelet restart every member at once.
	LivenessNeedsQuorum Kind = "LivenessNeedsQuorum"
	// LivenessShortWindow is a liveness probe on etcd that gives up within 30 s, or waits less than 5 s for an
	// answer: a member catching up after its restart, or a leader election, outlasts it, and the kubelet
	// restarts the member mid-roll, in a loop.
	LivenessShortWindow Kind = "LivenessShortWindow"
	// ReadinessOnHealth is a readiness probe on /health: the cluster's health, not the member's. Every member
	// goes unready at once on an alarm or without quorum, and a PodDisruptionBudget then blocks every
	// eviction until it passes.
	ReadinessOnHealth Kind = "ReadinessOnHealth"
)

// Finding is one probe shape to warn about.
type Finding struct {
	Kind Kind
	// Probe is "livenessProbe" or "readinessProbe"; Check what it runs ("httpGet /health").
	Probe, Check string
	// Why is what goes wrong during a roll; Instead what to use.
	Why, Instead string
}

// String is the finding in one line, as preview and `etcd-rollout plan` print it.
func (f Finding) String() string {
	return fmt.Sprintf("%s %s: %s; use %s instead", f.Probe, f.Check, f.Why, f.Instead)
}

// The shortest liveness that survives a restarted member's catch-up and an election: etcd's own /health
// read waits up to 5 s plus two election timeouts; kubeadm's static pods use 15 s and 8 × 10 s.
const (
	minLivenessTimeoutSeconds = 5
	minLivenessWindowSeconds  = 30
)

// Judge returns the findings for the etcd container c.
func Judge(c *corev1.Container) []Finding {
	if c == nil {
		return nil
	}
	var out []Finding
	if p := c.LivenessProbe; p != nil {
		check, quorum, onEtcd := describe(p)
		if quorum {
			out = append(out, Finding{Kind: LivenessNeedsQuorum, Probe: "livenessProbe", Check: check,
				Why:     "it fails on every member while the cluster has no quorum, and the kubelet then restarts them all, turning one member's restart plus one more fault into an outage (etcd#13340, kubeadm#2567)",
				Instead: "httpGet /livez (etcd 3.5.11 and later) or /health?serializable=true, a tcpSocket check on the client port, or no liveness probe"})
		}
		if onEtcd && tooShort(p) {
			out = append(out, Finding{Kind: LivenessShortWindow, Probe: "livenessProbe", Check: check,
				Why: fmt.Sprintf("it gives up after %d × %d s with a %d s timeout: a member catching up after its restart, or a leader election, can outlast that, and the kubelet restarts the member mid-roll",
					orDefault(p.FailureThreshold, 3), orDefault(p.PeriodSeconds, 10), orDefault(p.TimeoutSeconds, 1)),
				Instead: fmt.Sprintf("timeoutSeconds of %d or more and failureThreshold × periodSeconds of %d s or more (kubeadm: 15 s, 8 × 10 s)", minLivenessTimeoutSeconds, minLivenessWindowSeconds)})
		}
	}
	if p := c.ReadinessProbe; p != nil && p.HTTPGet != nil && isPath(p.HTTPGet.Path, "/health") && !serializable(p.HTTPGet.Path) {
		out = append(out, Finding{Kind: ReadinessOnHealth, Probe: "readinessProbe", Check: "httpGet " + p.HTTPGet.Path,
			Why:     "/health is the cluster's health, not the member's: on an alarm or without quorum every member goes unready at once, and a PodDisruptionBudget then blocks every eviction until it passes",
			Instead: "httpGet /readyz (etcd 3.5.11 and later), made for readiness (it also keeps a learner unready)"})
	}
	return out
}

// describe names what p runs, whether it needs a quorum to pass, and whether it asks etcd itself (an HTTP
// endpoint or etcdctl), as opposed to a TCP check.
func describe(p *corev1.Probe) (check string, quorum, onEtcd bool) {
	switch {
	case p.HTTPGet != nil:
		path := p.HTTPGet.Path
		return "httpGet " + path, isPath(path, "/health") && !serializable(path), isPath(path, "/health") || isPath(path, "/livez") || isPath(path, "/readyz")
	case p.Exec != nil:
		cmd := strings.Join(p.Exec.Command, " ")
		quorum := strings.Contains(cmd, "endpoint health") || (strings.Contains(cmd, "/health") && !strings.Contains(cmd, "serializable=true"))
		return "exec " + shorten(cmd), quorum, strings.Contains(cmd, "etcdctl") || strings.Contains(cmd, "/health") || strings.Contains(cmd, "/livez")
	case p.TCPSocket != nil:
		return "tcpSocket", false, false
	case p.GRPC != nil:
		return "grpc", false, false
	}
	return "probe", false, false
}

func isPath(raw, want string) bool {
	u, err := url.Parse(raw)
	return err == nil && strings.TrimSuffix(u.Path, "/") == want
}

func serializable(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Query().Get("serializable") == "true"
}

func tooShort(p *corev1.Probe) bool {
	window := orDefault(p.FailureThreshold, 3) * orDefault(p.PeriodSeconds, 10)
	return orDefault(p.TimeoutSeconds, 1) < minLivenessTimeoutSeconds || window < minLivenessWindowSeconds
}

// orDefault is a probe field as the kubelet reads it: the API server defaults an unset (zero) one.
func orDefault(v, def int32) int32 {
	if v == 0 {
		return def
	}
	return v
}

func shorten(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}
