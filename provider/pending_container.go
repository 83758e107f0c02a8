package provider

import (
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// pendingEtcdContainer is the etcd container of a StatefulSet manifest (the component's statefulSet input,
// locked) reduced to what judges a version change and its probes: image, command, args, the ETCD_* variables
// with plain values, and the liveness, readiness and startup probes without their HTTP headers. Other
// variables, valueFrom references and probe headers (which can carry a token) are left out, so nothing from a
// Secret reaches the Rollout's inputs. Empty when the manifest has no etcd container.
func pendingEtcdContainer(manifest map[string]any) (string, error) {
	raw, err := json.Marshal(manifest)
	if err != nil {
		return "", err
	}
	var sts appsv1.StatefulSet
	if err := json.Unmarshal(raw, &sts); err != nil {
		return "", fmt.Errorf("reading the StatefulSet manifest: %w", err)
	}
	c := rollout.EtcdContainer(sts.Spec.Template.Spec.Containers)
	if c == nil {
		return "", nil
	}
	reduced := corev1.Container{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args,
		LivenessProbe: withoutHeaders(c.LivenessProbe), ReadinessProbe: withoutHeaders(c.ReadinessProbe), StartupProbe: withoutHeaders(c.StartupProbe)}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "ETCD_") && e.ValueFrom == nil {
			reduced.Env = append(reduced.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
		}
	}
	out, err := json.Marshal(reduced)
	return string(out), err
}

// withoutHeaders is p without its httpGet headers, which no probe judgement needs.
func withoutHeaders(p *corev1.Probe) *corev1.Probe {
	if p == nil || p.HTTPGet == nil || len(p.HTTPGet.HTTPHeaders) == 0 {
		return p
	}
	out := p.DeepCopy()
	out.HTTPGet.HTTPHeaders = nil
	return out
}

// parsePendingContainer reads the etcdContainer input (JSON, as pendingEtcdContainer writes it).
func parsePendingContainer(pending string) (*corev1.Container, error) {
	var c corev1.Container
	if err := json.Unmarshal([]byte(pending), &c); err != nil {
		return nil, fmt.Errorf("etcdContainer is not a container in JSON: %w", err)
	}
	return &c, nil
}

// withPendingContainer is sts with its etcd container's image, command, args and plain ETCD_* variables
// replaced by the pending container's: the StatefulSet as it will be once the update applies it. sts itself
// is not changed.
func withPendingContainer(sts *appsv1.StatefulSet, pending *corev1.Container) *appsv1.StatefulSet {
	out := sts.DeepCopy()
	live := rollout.EtcdContainer(out.Spec.Template.Spec.Containers)
	if live == nil {
		return out
	}
	live.Image, live.Command, live.Args = pending.Image, pending.Command, pending.Args
	kept := live.Env[:0:0]
	for _, e := range live.Env {
		if !strings.HasPrefix(e.Name, "ETCD_") || e.ValueFrom != nil {
			kept = append(kept, e) // a valueFrom variable is not in the pending container: keep the live one
		}
	}
	live.Env = append(kept, pending.Env...)
	return out
}

// templateApplied says the live StatefulSet already runs the template of in.VersionHash: the last rollout,
// given this versionHash, published the live updateRevision as its target (see rollout.Config.TemplateVersion).
// Check's old inputs cannot tell: after a stopped `pulumi up`, Pulumi keeps the previous inputs, so a
// preview would plan to roll again the members that run already restarted.
func templateApplied(in RolloutArgs, f clusterFacts) bool {
	sts := f.StatefulSet
	return sts != nil && in.VersionHash != "" && f.Applied.TemplateVersion == in.VersionHash &&
		sts.Status.ObservedGeneration >= sts.Generation && f.Applied.TargetRevision == sts.Status.UpdateRevision
}
