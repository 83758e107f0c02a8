package members

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

func fakeBinDir(t *testing.T) string {
	dir := t.TempDir()
	for _, b := range []string{"etcd", "etcd-v3.5", "etcd-v3.5.21"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/true\n"), 0o755))
	}
	return dir
}

func memberPod(mutate func(*corev1.Pod)) *corev1.Pod {
	grace := int64(7)
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-1", Namespace: "ns",
			OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "etcd", Controller: &yes}}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "etcd", Ports: []corev1.ContainerPort{
				{Name: "client", ContainerPort: 12379}, {Name: "peer", ContainerPort: 12380}}}},
		},
	}
	if mutate != nil {
		mutate(pod)
	}
	return pod
}

func TestReadLaunch(t *testing.T) {
	bin := fakeBinDir(t)
	three := int32(3)
	sts := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: &three}}
	tlsVolume := func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "etcd-tls", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: "keyspace-etcd-group-0-cluster-secret"}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "etcd-tls", MountPath: "/var/lib/etcd-tls/"}}
	}
	tests := []struct {
		name   string
		pod    *corev1.Pod
		want   launch
		errHas string
	}{
		{name: "production defaults", pod: memberPod(nil), want: launch{version: "3.6", binary: filepath.Join(bin, "etcd"),
			readiness: memberapi.ReadyOnStart, grace: 7 * time.Second, clientPort: 12379, peerPort: 12380, replicas: 3}},
		{name: "3.5, broken, probed", pod: memberPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{memberapi.AnnotationVersion: "3.5", memberapi.AnnotationBroken: "true"}
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{}
		}), want: launch{version: "3.5", binary: filepath.Join(bin, "etcd-v3.5"), broken: true,
			readiness: memberapi.ReadyOnProbe, grace: 7 * time.Second, clientPort: 12379, peerPort: 12380, replicas: 3}},
		{name: "secret mounted at the TLS dir", pod: memberPod(tlsVolume), want: launch{version: "3.6", binary: filepath.Join(bin, "etcd"),
			readiness: memberapi.ReadyOnStart, grace: 7 * time.Second, clientPort: 12379, peerPort: 12380, replicas: 3,
			tls: true, secret: "keyspace-etcd-group-0-cluster-secret"}},
		{name: "secret mounted elsewhere is not TLS", pod: memberPod(func(p *corev1.Pod) {
			tlsVolume(p)
			p.Annotations = map[string]string{memberapi.AnnotationTLSDir: "/etc/etcd/pki"}
		}), want: launch{version: "3.6", binary: filepath.Join(bin, "etcd"),
			readiness: memberapi.ReadyOnStart, grace: 7 * time.Second, clientPort: 12379, peerPort: 12380, replicas: 3}},
		{name: "start faults", pod: memberPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{memberapi.AnnotationStartDelay: "3", memberapi.AnnotationServeDelay: "0.5",
				memberapi.AnnotationCrashAfter: "10"}
		}), want: launch{version: "3.6", binary: filepath.Join(bin, "etcd"),
			readiness: memberapi.ReadyOnStart, grace: 7 * time.Second, clientPort: 12379, peerPort: 12380, replicas: 3,
			faults: startFaults{startDelay: 3 * time.Second, serveDelay: 500 * time.Millisecond, crashAfter: 10 * time.Second}}},
		{name: "clients refused", pod: memberPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{memberapi.AnnotationClientsRefused: "true"}
		}), want: launch{version: "3.6", binary: filepath.Join(bin, "etcd"),
			readiness: memberapi.ReadyOnStart, grace: 7 * time.Second, clientPort: 12379, peerPort: 12380, replicas: 3,
			faults: startFaults{clientsRefused: true}}},
		{name: "clients refused false", pod: memberPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{memberapi.AnnotationClientsRefused: "false"}
		}), want: launch{version: "3.6", binary: filepath.Join(bin, "etcd"),
			readiness: memberapi.ReadyOnStart, grace: 7 * time.Second, clientPort: 12379, peerPort: 12380, replicas: 3}},
		{name: "faults on this ordinal", pod: memberPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{memberapi.AnnotationFaultOrdinals: "0,1", memberapi.AnnotationClientsRefused: "true",
				memberapi.AnnotationBroken: "true", memberapi.AnnotationServeDelay: "2"}
		}), want: launch{version: "3.6", binary: filepath.Join(bin, "etcd"), broken: true,
			readiness: memberapi.ReadyOnStart, grace: 7 * time.Second, clientPort: 12379, peerPort: 12380, replicas: 3,
			faults: startFaults{clientsRefused: true, serveDelay: 2 * time.Second}}},
		{name: "faults on other ordinals", pod: memberPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{memberapi.AnnotationFaultOrdinals: "0, 2", memberapi.AnnotationClientsRefused: "true",
				memberapi.AnnotationBroken: "true", memberapi.AnnotationCrashAfter: "1", memberapi.AnnotationStartDelay: "3"}
		}), want: launch{version: "3.6", binary: filepath.Join(bin, "etcd"),
			readiness: memberapi.ReadyOnStart, grace: 7 * time.Second, clientPort: 12379, peerPort: 12380, replicas: 3}},
		{name: "bad fault value on another ordinal is still an error", pod: memberPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{memberapi.AnnotationFaultOrdinals: "0", memberapi.AnnotationCrashAfter: "1m"}
		}), errHas: "annotation etcd-rollout.test/crash-after"},
		{name: "bad fault ordinals", pod: memberPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{memberapi.AnnotationFaultOrdinals: "etcd-0", memberapi.AnnotationBroken: "true"}
		}), errHas: "annotation etcd-rollout.test/fault-ordinals"},
		{name: "bad clients-refused", pod: memberPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{memberapi.AnnotationClientsRefused: "yes"}
		}), errHas: "annotation etcd-rollout.test/clients-refused=\"yes\""},
		{name: "bad crash-after", pod: memberPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{memberapi.AnnotationCrashAfter: "10s"}
		}), errHas: "annotation etcd-rollout.test/crash-after"},
		{name: "a release runs its own binary", pod: memberPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{memberapi.AnnotationVersion: "3.5.21"}
		}), want: launch{version: "3.5.21", binary: filepath.Join(bin, "etcd-v3.5.21"),
			readiness: memberapi.ReadyOnStart, grace: 7 * time.Second, clientPort: 12379, peerPort: 12380, replicas: 3}},
		{name: "a release that was not built", pod: memberPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{memberapi.AnnotationVersion: "3.5.4"}
		}), errHas: "etcd 3.5.4 binary"},
		{name: "unknown version", pod: memberPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{memberapi.AnnotationVersion: "3.4"}
		}), errHas: "pod ns/etcd-1: annotation etcd-rollout.test/etcd-version=\"3.4\": want 3.5, 3.6 or a release"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readLaunch(tt.pod, sts, bin)
			if tt.errHas != "" {
				assert.ErrorContains(t, err, tt.errHas)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// The start delay, read before the pod starts, follows the fault ordinals like the other faults.
func TestStartDelayOf(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        time.Duration
	}{
		{"no delay", nil, 0},
		{"every pod", map[string]string{memberapi.AnnotationStartDelay: "3"}, 3 * time.Second},
		{"this ordinal", map[string]string{memberapi.AnnotationStartDelay: "3", memberapi.AnnotationFaultOrdinals: "1"}, 3 * time.Second},
		{"another ordinal", map[string]string{memberapi.AnnotationStartDelay: "3", memberapi.AnnotationFaultOrdinals: "0,2"}, 0},
		{"bad delay", map[string]string{memberapi.AnnotationStartDelay: "3s"}, 0},
		{"bad ordinals", map[string]string{memberapi.AnnotationStartDelay: "3", memberapi.AnnotationFaultOrdinals: "x"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, startDelayOf(memberPod(func(p *corev1.Pod) { p.Annotations = tt.annotations })))
		})
	}
}

func TestOwnerStatefulSet(t *testing.T) {
	name, ord, err := ownerStatefulSet(memberPod(nil))
	require.NoError(t, err)
	assert.Equal(t, "etcd", name)
	assert.Equal(t, 1, ord)

	_, _, err = ownerStatefulSet(memberPod(func(p *corev1.Pod) { p.OwnerReferences = nil }))
	assert.ErrorContains(t, err, "not controlled by a StatefulSet")
	_, _, err = ownerStatefulSet(memberPod(func(p *corev1.Pod) { p.Name = "etcd-x" }))
	assert.ErrorContains(t, err, "ordinal")
}

func TestEtcdArgs(t *testing.T) {
	self := portSet{Client: 20000, Peer: 20001, Metrics: 20002}
	cluster := []string{"etcd-0=https://127.0.0.1:20001"}
	plain := strings.Join(etcdArgs("etcd-0", "/d", "/t", "ns/etcd", "new", launch{}, self, cluster), " ")
	assert.Contains(t, plain, "--listen-client-urls=http://127.0.0.1:20000")
	assert.Contains(t, plain, "--listen-metrics-urls=http://127.0.0.1:20002")
	assert.Contains(t, plain, "--unsafe-no-fsync")
	assert.NotContains(t, plain, "--heartbeat-interval", "etcd's default timing, as in production")
	assert.NotContains(t, plain, "cert")

	secure := strings.Join(etcdArgs("etcd-0", "/d", "/t", "ns/etcd", "new", launch{tls: true, broken: true}, self, cluster), " ")
	for _, want := range []string{"--listen-client-urls=https://127.0.0.1:20000", "--client-cert-auth",
		"--peer-client-cert-auth", "--cert-file=/t/server.crt", "--peer-key-file=/t/peer.key", "--etcd-rollout-broken-revision"} {
		assert.Contains(t, secure, want)
	}
}

func TestParsePortRange(t *testing.T) {
	tests := []struct {
		in     string
		lo, hi int
		ok     bool
	}{
		{"20000-28999", 20000, 28999, true},
		{"20000", 0, 0, false},
		{"80-200", 0, 0, false},
		{"20000-20010", 0, 0, false},
		{"a-b", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			lo, hi, err := parsePortRange(tt.in)
			assert.Equal(t, tt.ok, err == nil, "err: %v", err)
			if tt.ok {
				assert.Equal(t, []int{tt.lo, tt.hi}, []int{lo, hi})
			}
		})
	}
}

// Allocated ports are distinct, skip reserved ones, and come back after release.
func TestPortAllocator(t *testing.T) {
	a := newPortAllocator(28900, 28999)
	a.reserve(portSet{Client: 28900, Peer: 28901, Metrics: 28902})
	ps, err := a.allocate()
	require.NoError(t, err)
	assert.NotContains(t, []int{28900, 28901, 28902}, ps.Client)
	assert.Len(t, map[int]bool{ps.Client: true, ps.Peer: true, ps.Metrics: true}, 3)
}

// A deletion's grace period ends the process even when it ignores SIGTERM (hang), and a shortened grace
// is honoured.
func TestTerminateHonoursGrace(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess("/bin/sleep", []string{"30"}, "uid", filepath.Join(dir, "log"), filepath.Join(dir, "pid"), 0)
	require.NoError(t, err)
	var grace atomic.Int64
	grace.Store(int64(10 * time.Second))
	go func() { time.Sleep(200 * time.Millisecond); grace.Store(0) }()
	start := time.Now()
	killed := p.terminate(func() time.Duration { return time.Duration(grace.Load()) }, true)
	assert.True(t, killed)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.NoFileExists(t, filepath.Join(dir, "pid"))
}

// A data volume on an emptyDir at the data mount path dies with the pod; a claim does not.
func TestDataOnEmptyDir(t *testing.T) {
	c := corev1.Container{Name: "etcd", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: DataMountPath}}}
	emptyDir := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}
	claim := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-etcd-0"}}}}}}
	assert.True(t, dataOnEmptyDir(emptyDir, &c))
	assert.False(t, dataOnEmptyDir(claim, &c))
}

// The container's TLS flags are honoured: each file from the Secret key its volume mounts there, one Secret
// or several (a peer CA apart from the client CA), with items; a file on no Secret volume keeps the pod from
// starting; without both sides' files the fixed layout stays.
func TestReadTLSFlags(t *testing.T) {
	volumes := []corev1.Volume{
		{Name: "client-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-tls"}}},
		{Name: "peer-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-peer-tls",
			Items: []corev1.KeyToPath{{Key: "tls.crt", Path: "peer.pem"}, {Key: "tls.key", Path: "peer-key.pem"}, {Key: "ca.crt", Path: "ca.pem"}}}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	mounts := []corev1.VolumeMount{{Name: "client-tls", MountPath: "/var/lib/etcd-tls"}, {Name: "peer-tls", MountPath: "/var/lib/etcd-peer-tls"},
		{Name: "scratch", MountPath: "/scratch"}}
	client := []string{"--client-cert-auth", "--trusted-ca-file=/var/lib/etcd-tls/ca.crt", "--cert-file=/var/lib/etcd-tls/server.crt", "--key-file=/var/lib/etcd-tls/server.key"}
	peer := []string{"--peer-client-cert-auth", "--peer-trusted-ca-file=/var/lib/etcd-peer-tls/ca.pem",
		"--peer-cert-file=/var/lib/etcd-peer-tls/peer.pem", "--peer-key-file=/var/lib/etcd-peer-tls/peer-key.pem"}
	tests := []struct {
		name     string
		args     []string
		honoured bool
		want     map[string]secretFile
		wantErr  string
	}{
		{"both sides, a peer CA apart", append(append([]string{}, client...), peer...), true, map[string]secretFile{
			"trusted-ca-file": {"etcd-tls", "ca.crt"}, "cert-file": {"etcd-tls", "server.crt"}, "key-file": {"etcd-tls", "server.key"},
			"peer-trusted-ca-file": {"etcd-peer-tls", "ca.crt"}, "peer-cert-file": {"etcd-peer-tls", "tls.crt"}, "peer-key-file": {"etcd-peer-tls", "tls.key"}}, ""},
		{"the client side only", client, false, nil, ""},
		{"a file on an emptyDir", append(append([]string{}, client...), "--peer-cert-file=/scratch/peer.crt", "--peer-key-file=/scratch/peer.key"), false, nil,
			"--peer-cert-file=/scratch/peer.crt is on no Secret volume"},
		{"no TLS", []string{"--name=etcd-1"}, false, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := memberPod(func(p *corev1.Pod) {
				p.Spec.Volumes = volumes
				p.Spec.Containers[0].VolumeMounts = mounts
				p.Spec.Containers[0].Command = []string{"etcd"}
				p.Spec.Containers[0].Args = tt.args
			})
			f, err := readTLSFlags(pod, &pod.Spec.Containers[0])
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.honoured, f.honoured())
			if tt.want != nil {
				assert.Equal(t, tt.want, f.files)
				assert.Equal(t, []string{"--client-cert-auth", "--peer-client-cert-auth",
					"--trusted-ca-file=/m/tls/flags/trusted-ca-file", "--cert-file=/m/tls/flags/cert-file", "--key-file=/m/tls/flags/key-file",
					"--peer-trusted-ca-file=/m/tls/flags/peer-trusted-ca-file", "--peer-cert-file=/m/tls/flags/peer-cert-file",
					"--peer-key-file=/m/tls/flags/peer-key-file"}, f.args("/m/tls/flags"))
			}
		})
	}
}
