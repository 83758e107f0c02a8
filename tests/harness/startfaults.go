package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// StartFaults make the members of a pod template start the ways production members can and the plain
// harness hides: late (an image pull), slowly (a large database opened after the container started),
// crash-looping, or with a client port that refuses every connection. They are pod-template annotations
// read by the member daemon (memberapi.AnnotationStartDelay and its siblings), so they hold for every pod
// of the revision that carries them, or for the pods of Ordinals only. The zero value starts members at
// once. Durations are whole milliseconds at most.
type StartFaults struct {
	// StartDelay keeps each new pod Pending (not Running, not Ready) this long before its container starts.
	// With OrderedReady, creating N members then takes about N times as long, as in production.
	StartDelay time.Duration
	// ServeDelay starts the container (pod Running, and Ready at once without a readinessProbe) but etcd
	// only this long later; its ports refuse connections meanwhile. On every container start.
	ServeDelay time.Duration
	// CrashAfter kills the container this long after each start (counted from the container start, so
	// below ServeDelay it crashes before serving); the daemon restarts it with a growing back-off.
	CrashAfter time.Duration
	// ClientsRefused runs etcd normally — it joins Raft as a voting member through its peer port, and the
	// leader learns its version, so the cluster version can move — while its pod's client port refuses every
	// connection, as a misconfigured client listener would: port-forwards (the engine, kubectl) and
	// `kubectl exec etcdctl` get nothing. The harness's own checks (Status, WaitHealthy, Client) reach the
	// member directly and still see it healthy.
	ClientsRefused bool
	// Ordinals, when not empty, limit these faults, and EtcdSpec.Broken, to the pods of those ordinals; the
	// other pods of the revision start normally. So a revision can fail on the one member a rollout reaches
	// last (ordinal 0) or first (replicas-1).
	Ordinals []int
}

// startFaultKeys pairs each delay annotation with its field, in one place for Annotations and Apply.
func (f *StartFaults) startFaultKeys() map[string]*time.Duration {
	return map[string]*time.Duration{
		memberapi.AnnotationStartDelay: &f.StartDelay,
		memberapi.AnnotationServeDelay: &f.ServeDelay,
		memberapi.AnnotationCrashAfter: &f.CrashAfter,
	}
}

// annotationValues is every fault annotation with its value, "" for a fault that is not set.
func (f StartFaults) annotationValues() map[string]string {
	out := map[string]string{memberapi.AnnotationClientsRefused: "", memberapi.AnnotationFaultOrdinals: ""}
	for key, d := range f.startFaultKeys() {
		out[key] = ""
		if *d > 0 {
			out[key] = memberapi.FormatSeconds(*d)
		}
	}
	if f.ClientsRefused {
		out[memberapi.AnnotationClientsRefused] = "true"
	}
	if len(f.Ordinals) > 0 {
		out[memberapi.AnnotationFaultOrdinals] = memberapi.FormatOrdinals(f.Ordinals)
	}
	return out
}

// Annotations are the pod-template annotations of the faults that are set.
func (f StartFaults) Annotations() map[string]string {
	out := map[string]string{}
	for key, v := range f.annotationValues() {
		if v != "" {
			out[key] = v
		}
	}
	return out
}

// Apply makes t carry exactly f: it sets the annotations of the faults that are set and removes the others,
// so a template change to StartFaults{} heals a slow or crashing revision.
func (f StartFaults) Apply(t *corev1.PodTemplateSpec) {
	for key, v := range f.annotationValues() {
		if v == "" {
			delete(t.Annotations, key)
			continue
		}
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[key] = v
	}
}

func (f StartFaults) validate() error {
	for key, d := range f.startFaultKeys() {
		if *d < 0 || *d%time.Millisecond != 0 {
			return fmt.Errorf("%s %s: want a non-negative whole number of milliseconds", key, *d)
		}
	}
	for _, o := range f.Ordinals {
		if o < 0 {
			return fmt.Errorf("fault ordinals %v: want pod ordinals (0 and up)", f.Ordinals)
		}
	}
	return nil
}

// validateFor also checks that every ordinal names a pod of a StatefulSet of replicas: a fault meant for no
// pod is a mistake in the test.
func (f StartFaults) validateFor(replicas int) error {
	if err := f.validate(); err != nil {
		return err
	}
	for _, o := range f.Ordinals {
		if o >= replicas {
			return fmt.Errorf("fault ordinal %d: the StatefulSet has %d replicas (ordinals 0 to %d)", o, replicas, replicas-1)
		}
	}
	return nil
}

// worstStart is how much longer than usual a whole cluster takes to come up with these faults: each
// OrderedReady member waits out its start delay, and the last one its serve delay.
func (f StartFaults) worstStart(replicas int) time.Duration {
	return time.Duration(replicas)*f.StartDelay + f.ServeDelay
}

// SetStartFaults changes the pod template to start its members with f (a new revision; with the partition
// locked nothing restarts) and returns the new updateRevision.
func (e *Etcd) SetStartFaults(ctx context.Context, f StartFaults) (string, error) {
	if err := f.validateFor(e.Spec.Replicas); err != nil {
		return "", fmt.Errorf("start faults for %s/%s: %w", e.Namespace, e.Spec.Name, err)
	}
	return e.UpdateTemplate(ctx, f.Apply)
}

// ChangeStartFaults makes a new revision whose members start with f, and returns it.
func (m MustEtcd) ChangeStartFaults(f StartFaults) string {
	m.t.Helper()
	ctx, cancel := m.ctx(time.Minute)
	defer cancel()
	rev, err := m.e.SetStartFaults(ctx, f)
	require.NoError(m.t, err)
	return rev
}
