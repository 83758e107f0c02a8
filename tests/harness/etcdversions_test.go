package harness_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// Each version a spec may name puts the annotation the member daemon reads and the image tag of the binary it
// runs into the template.
func TestRenderNamesTheVersionTwice(t *testing.T) {
	tests := []struct {
		version, annotation, image string
	}{
		{version: "", annotation: "3.6", image: "registry.k8s.io/etcd:3.6.8-0"},
		{version: "3.6", annotation: "3.6", image: "registry.k8s.io/etcd:3.6.8-0"},
		{version: "3.5", annotation: "3.5", image: "registry.k8s.io/etcd:3.5.35-0"},
		{version: "3.5.21", annotation: "3.5.21", image: "registry.k8s.io/etcd:3.5.21-0"},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			_, sts, err := harness.Render(harness.EtcdSpec{Version: tt.version})
			require.NoError(t, err)
			pt := sts.Spec.Template
			assert.Equal(t, tt.annotation, pt.Annotations[memberapi.AnnotationVersion])
			assert.Equal(t, tt.image, pt.Spec.Containers[0].Image)
		})
	}
}

// A version that tools/build.sh builds no binary for is refused before any template carries it.
func TestVersionsWithoutABinaryAreRefused(t *testing.T) {
	for _, version := range []string{"3.4", "3.5.22", "v3.5.21", "3.5.21-0"} {
		t.Run(version, func(t *testing.T) {
			_, err := harness.EtcdSpec{Version: version}.WithDefaults()
			assert.ErrorContains(t, err, "want one of 3.5, 3.5.21, 3.6")
			_, err = (&harness.Etcd{Namespace: "ns", Spec: harness.EtcdSpec{Name: "etcd", Replicas: 3}}).
				ChangeVersion(context.Background(), version, harness.StartFaults{})
			assert.ErrorContains(t, err, "etcd ns/etcd: version \""+version+"\": want one of")
		})
	}
}
