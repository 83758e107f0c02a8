package harness_test

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// The checked-in manifests are exactly what the template renders, so tests run what people read.
func TestManifestFilesAreRendered(t *testing.T) {
	for name, spec := range harness.ManifestFiles() {
		t.Run(name, func(t *testing.T) {
			want, err := harness.RenderYAML(spec)
			require.NoError(t, err)
			got, err := os.ReadFile(filepath.Join("..", "manifests", name))
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got), "run: go run ./tests/harness/cmd/render-manifests")
		})
	}
}

func TestRenderKeepsTheProductionShape(t *testing.T) {
	tests := []struct {
		name      string
		spec      harness.EtcdSpec
		tls       bool
		probe     bool
		version   string
		broken    bool
		grace     int64
		serviceAs string
	}{
		{name: "defaults", spec: harness.EtcdSpec{}, version: "3.6", grace: 30, serviceAs: "etcd-headless"},
		{name: "mtls with probe", spec: harness.EtcdSpec{Name: "keyspace-etcd-group-0", ServiceName: "keyspace-etcd-group-0-peer",
			TLS: true, Readiness: memberapi.ReadyOnProbe}, tls: true, probe: true, version: "3.6", grace: 30, serviceAs: "keyspace-etcd-group-0-peer"},
		{name: "old and broken", spec: harness.EtcdSpec{Version: "3.5", Broken: true, GracePeriod: 5 * time.Second, Replicas: 5},
			version: "3.5", broken: true, grace: 5, serviceAs: "etcd-headless"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, sts, err := harness.Render(tt.spec)
			require.NoError(t, err)
			spec, _ := tt.spec.WithDefaults()
			assert.Equal(t, tt.serviceAs, svc.Name)
			assert.Equal(t, "None", svc.Spec.ClusterIP)
			assert.Equal(t, tt.serviceAs, sts.Spec.ServiceName)
			assert.Equal(t, "true", sts.Annotations["pulumi.com/skipAwait"])
			assert.EqualValues(t, spec.Replicas, *sts.Spec.Replicas)
			assert.EqualValues(t, spec.Replicas, *sts.Spec.UpdateStrategy.RollingUpdate.Partition, "locked")
			assert.EqualValues(t, "OrderedReady", sts.Spec.PodManagementPolicy)
			pt := sts.Spec.Template
			assert.Equal(t, "true", pt.Labels[memberapi.LabelMember])
			assert.Equal(t, "kwok-node-0", pt.Spec.NodeName)
			assert.Equal(t, tt.grace, *pt.Spec.TerminationGracePeriodSeconds)
			assert.Equal(t, tt.version, pt.Annotations[memberapi.AnnotationVersion])
			assert.Regexp(t, `^registry\.k8s\.io/etcd:`+regexp.QuoteMeta(tt.version)+`\.\d+-0$`, pt.Spec.Containers[0].Image,
				"the image tag names the version the member runs: the engine reads the version from it")
			assert.Equal(t, tt.broken, pt.Annotations[memberapi.AnnotationBroken] == "true")
			c := pt.Spec.Containers[0]
			assert.Equal(t, "etcd", c.Name)
			assert.Equal(t, tt.probe, c.ReadinessProbe != nil)
			assert.Contains(t, c.Args, "--initial-cluster-state=new")
			assert.Equal(t, tt.tls, contains(c.Args, "--client-cert-auth"))
			if tt.tls {
				require.Len(t, pt.Spec.Volumes, 1)
				assert.Equal(t, spec.SecretName(), pt.Spec.Volumes[0].Secret.SecretName)
				assert.Contains(t, c.VolumeMounts, volumeMount(pt.Spec.Volumes[0].Name, memberapi.DefaultTLSDir))
			} else {
				assert.Empty(t, pt.Spec.Volumes)
			}
		})
	}
}

func TestSpecDefaultsRefuseBadInput(t *testing.T) {
	tests := []struct {
		name string
		spec harness.EtcdSpec
		err  string
	}{
		{"negative replicas", harness.EtcdSpec{Replicas: -1}, "replicas -1"},
		{"unknown version", harness.EtcdSpec{Version: "3.4"}, `version "3.4"`},
		{"unknown readiness", harness.EtcdSpec{Readiness: "later"}, `readiness "later"`},
		{"fractional grace", harness.EtcdSpec{GracePeriod: 1500 * time.Millisecond}, "whole seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.spec.WithDefaults()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.err)
		})
	}
}

func TestMetricValue(t *testing.T) {
	text := "# HELP etcd_server_leader_changes_seen_total x\n# TYPE etcd_server_leader_changes_seen_total counter\n" +
		"etcd_server_leader_changes_seen_total 2\netcd_server_has_leader 1\n"
	v, err := harness.MetricValue(text, "etcd_server_leader_changes_seen_total")
	require.NoError(t, err)
	assert.Equal(t, 2.0, v)
	_, err = harness.MetricValue(text, "etcd_missing")
	assert.ErrorContains(t, err, "not found")
}

// The emptyDir shape keeps the data dir on an emptyDir and starts etcd from the start script docs/usage.md
// shows; the engine reads its data dir and its initial cluster state from that script (a literal "new" would be
// refused for members that are replaced).
func TestRenderOfMembersWhoseDataDiesWithThePod(t *testing.T) {
	_, sts, err := harness.Render(harness.EtcdSpec{DataDiesWithPod: true})
	require.NoError(t, err)
	assert.Empty(t, sts.Spec.VolumeClaimTemplates)
	require.Len(t, sts.Spec.Template.Spec.Volumes, 1)
	assert.NotNil(t, sts.Spec.Template.Spec.Volumes[0].EmptyDir)
	values := rollout.EtcdFlagValues(&sts.Spec.Template.Spec.Containers[0])
	assert.Equal(t, "/var/lib/etcd/data", values["data-dir"])
	assert.Equal(t, "$STATE", values["initial-cluster-state"])

	_, err = harness.RenderYAML(harness.EtcdSpec{DataDiesWithPod: true, TLS: true})
	assert.ErrorContains(t, err, "plain HTTP only")
}

// The separate peer CA shape mounts a second Secret, which the peer flags name; the client side stays on the
// first. Its peer leaf chains to the peer CA only.
func TestRenderOfASeparatePeerCA(t *testing.T) {
	spec := harness.EtcdSpec{TLS: true, SeparatePeerCA: true}
	_, sts, err := harness.Render(spec)
	require.NoError(t, err)
	values := rollout.EtcdFlagValues(&sts.Spec.Template.Spec.Containers[0])
	assert.Equal(t, "/var/lib/etcd-peer-tls/ca.crt", values["peer-trusted-ca-file"])
	assert.Equal(t, "/var/lib/etcd-peer-tls/tls.crt", values["peer-cert-file"])
	assert.Equal(t, "/var/lib/etcd-tls/ca.crt", values["trusted-ca-file"])
	var secrets []string
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			secrets = append(secrets, v.Secret.SecretName)
		}
	}
	assert.Equal(t, []string{"etcd-cluster-secret", "etcd-peer-tls"}, secrets)

	full, err := spec.WithDefaults()
	require.NoError(t, err)
	m, err := harness.GenerateTLS(full, "ns")
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(m.PeerCA))
	block, _ := pem.Decode(m.PeerCert)
	leaf, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.NoError(t, err, "the peer leaf chains to the peer CA")
	clientPool := x509.NewCertPool()
	require.True(t, clientPool.AppendCertsFromPEM(m.CA))
	_, err = leaf.Verify(x509.VerifyOptions{Roots: clientPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.Error(t, err, "and not to the client CA")

	_, err = harness.RenderYAML(harness.EtcdSpec{SeparatePeerCA: true})
	assert.ErrorContains(t, err, "a separate peer CA needs TLS")
}
