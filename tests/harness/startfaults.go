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
// harness hides: late (an image pull), slowly (a large database opened after the container started), or
// crash-looping. They are pod-template annotations read by the member daemon (memberapi.AnnotationStartDelay
// and its siblings), so they hold for every pod of the revision that carries them. The zero value starts
// members at once. Durations are whole milliseconds at most.
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
}

// startFaultKeys pairs each annotation with its field, in one place for Annotations and Apply.
func (f *StartFaults) startFaultKeys() map[string]*time.Duration {
	return map[string]*time.Duration{
		memberapi.AnnotationStartDelay: &f.StartDelay,
		memberapi.AnnotationServeDelay: &f.ServeDelay,
		memberapi.AnnotationCrashAfter: &f.CrashAfter,
	}
}

// Annotations are the pod-template annotations of the faults that are set.
func (f StartFaults) Annotations() map[string]string {
	out := map[string]string{}
	for key, d := range f.startFaultKeys() {
		if *d > 0 {
			out[key] = memberapi.FormatSeconds(*d)
		}
	}
	return out
}

// Apply makes t carry exactly f: it sets the annotations of the faults that are set and removes the others,
// so a template change to StartFaults{} heals a slow or crashing revision.
func (f StartFaults) Apply(t *corev1.PodTemplateSpec) {
	for key, d := range f.startFaultKeys() {
		if *d <= 0 {
			delete(t.Annotations, key)
			continue
		}
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[key] = memberapi.FormatSeconds(*d)
	}
}

func (f StartFaults) validate() error {
	for key, d := range f.startFaultKeys() {
		if *d < 0 || *d%time.Millisecond != 0 {
			return fmt.Errorf("%s %s: want a non-negative whole number of milliseconds", key, *d)
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
	if err := f.validate(); err != nil {
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
