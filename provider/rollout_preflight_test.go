package provider

import (
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// etcdSts is a locked 3-member plain-HTTP etcd StatefulSet; edit changes it before use.
func etcdSts(edit func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	sts := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{
		Replicas:    ptr.To[int32](3),
		ServiceName: "etcd",
		UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](3)}},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "etcd", Image: "registry.k8s.io/etcd:3.6.8-0", Command: []string{"etcd"},
			Args:         []string{"--name=$(POD_NAME)", "--listen-client-urls=http://0.0.0.0:2379"},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
		}}}},
	}}
	if edit != nil {
		edit(sts)
	}
	return sts
}

func tlsSts(sts *appsv1.StatefulSet) {
	c := &sts.Spec.Template.Spec.Containers[0]
	c.Args = []string{"--listen-client-urls=https://0.0.0.0:2379", "--cert-file=/var/lib/etcd-tls/server.crt"}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: "/var/lib/etcd-tls/"})
}

func tlsFiles(dir string) *TLS {
	return &TLS{CaFile: dir + "/ca.crt", CertFile: dir + "/client.crt", KeyFile: dir + "/client.key"}
}

func TestPreflightFailures(t *testing.T) {
	base := RolloutArgs{StsName: "etcd", Namespace: "db", ServiceName: "etcd", VersionHash: "v1"}
	tests := []struct {
		name      string
		in        func(*RolloutArgs)
		facts     clusterFacts
		mustExist bool
		// want maps each failing property to a piece of its message; empty means no failure.
		want map[string]string
	}{
		{name: "healthy plain cluster", facts: clusterFacts{StatefulSet: etcdSts(nil)}},
		{name: "missing, may be created by this update", facts: clusterFacts{}},
		{name: "missing StatefulSet", facts: clusterFacts{}, mustExist: true,
			want: map[string]string{"stsName": "StatefulSet db/etcd was not found"}},
		{name: "missing namespace", facts: clusterFacts{NamespaceMissing: true}, mustExist: true,
			want: map[string]string{"namespace": `namespace "db" was not found`}},
		{name: "0 replicas", facts: clusterFacts{StatefulSet: etcdSts(func(s *appsv1.StatefulSet) {
			s.Spec.Replicas = ptr.To[int32](0)
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](0)
		})}, want: map[string]string{"stsName": "spec.replicas 0"}},
		{name: "1 replica", facts: clusterFacts{StatefulSet: etcdSts(func(s *appsv1.StatefulSet) {
			s.Spec.Replicas = ptr.To[int32](1)
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](1)
		})}, want: map[string]string{}}, // its restart needs acceptWriteOutage, asked by the plan (CheckConsents), not by its shape
		{name: "replicas defaulted to 1", facts: clusterFacts{StatefulSet: etcdSts(func(s *appsv1.StatefulSet) {
			s.Spec.Replicas = nil
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](1)
		})}, want: map[string]string{}},
		{name: "even replicas", facts: clusterFacts{StatefulSet: etcdSts(func(s *appsv1.StatefulSet) {
			s.Spec.Replicas = ptr.To[int32](4)
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](4)
		})}, want: map[string]string{"stsName": "spec.replicas 4: an even etcd cluster"}},
		{name: "serviceName not the governing one", in: func(a *RolloutArgs) { a.ServiceName = "etcd-client" },
			facts: clusterFacts{StatefulSet: etcdSts(nil)}, want: map[string]string{"serviceName": `governing Service of StatefulSet db/etcd, which is "etcd"`}},
		{name: "partition lowered by someone else", facts: clusterFacts{StatefulSet: etcdSts(func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](1)
		})}, want: map[string]string{"stsName": "partition 1 with 3 replicas and no rollout holds Lease etcd-etcd-rollout"}},
		{name: "never locked", facts: clusterFacts{StatefulSet: etcdSts(func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = nil
		})}, want: map[string]string{"stsName": "partition 0 with 3 replicas"}},
		{name: "partition lowered by a rollout that died: the engine takes over", facts: clusterFacts{LeaseHeld: true,
			StatefulSet: etcdSts(func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](1) })}},
		{name: "OnDelete", facts: clusterFacts{StatefulSet: etcdSts(func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		})}, want: map[string]string{"stsName": "updateStrategy OnDelete"}},
		{name: "TLS cluster, tls mounted", in: func(a *RolloutArgs) { a.TLS = tlsFiles("/var/lib/etcd-tls") },
			facts: clusterFacts{StatefulSet: etcdSts(tlsSts)}},
		{name: "TLS cluster without tls", facts: clusterFacts{StatefulSet: etcdSts(tlsSts)},
			want: map[string]string{"tls": "serves clients over TLS"}},
		{name: "TLS from the environment without tls", facts: clusterFacts{StatefulSet: etcdSts(func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.Containers[0].Args = nil
			s.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "ETCD_CERT_FILE", Value: "/tls/server.crt"}}
		})}, want: map[string]string{"tls": "serves clients over TLS"}},
		{name: "TLS from a shell script without tls", facts: clusterFacts{StatefulSet: etcdSts(func(s *appsv1.StatefulSet) {
			c := &s.Spec.Template.Spec.Containers[0]
			c.Command, c.Args = []string{"/bin/sh", "-c"}, []string{"exec etcd --name ${HOSTNAME} --listen-client-urls https://0.0.0.0:2379"}
		})}, want: map[string]string{"tls": "serves clients over TLS"}},
		{name: "tls for a plain cluster, client URLs as a separate word", in: func(a *RolloutArgs) { a.TLS = tlsFiles("/var/lib/etcd") },
			facts: clusterFacts{StatefulSet: etcdSts(func(s *appsv1.StatefulSet) {
				s.Spec.Template.Spec.Containers[0].Args = []string{"--listen-client-urls", "http://0.0.0.0:2379"}
			})}, want: map[string]string{"tls": "plain http"}},
		{name: "tls files not mounted", in: func(a *RolloutArgs) { a.TLS = tlsFiles("/etc/etcd/pki") },
			facts: clusterFacts{StatefulSet: etcdSts(tlsSts)},
			want:  map[string]string{"tls.caFile": `"/etc/etcd/pki/ca.crt" is not on any volume`, "tls.certFile": "not on any volume", "tls.keyFile": "not on any volume"}},
		{name: "tls for a plain cluster", in: func(a *RolloutArgs) { a.TLS = tlsFiles("/var/lib/etcd") },
			facts: clusterFacts{StatefulSet: etcdSts(nil)}, want: map[string]string{"tls": "plain http"}},
		{name: "3.5 too old for 3.6", facts: clusterFacts{StatefulSet: etcdSts(func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/etcd:3.6.8-0"
		}), MemberImages: map[string]string{"etcd-0": "registry.k8s.io/etcd:3.6.8-0", "etcd-1": "registry.k8s.io/etcd:3.5.21-0"}},
			want: map[string]string{"stsName": "image registry.k8s.io/etcd:3.6.8-0 cannot be rolled onto etcd-1, which runs registry.k8s.io/etcd:3.5.21-0: etcd 3.5.21 -> 3.6.8"}},
		{name: "3.5.32 to 3.6", facts: clusterFacts{StatefulSet: etcdSts(nil),
			MemberImages: map[string]string{"etcd-0": "registry.k8s.io/etcd:3.5.32-0"}}},
		{name: "3.5.26 to 3.6, below the floor of etcd's July 2026 guide", facts: clusterFacts{StatefulSet: etcdSts(nil),
			MemberImages: map[string]string{"etcd-0": "registry.k8s.io/etcd:3.5.26-0"}},
			want: map[string]string{"stsName": "etcd supports upgrading to 3.6 only from 3.5.32 or later"}},
		{name: "a member with the v2 store enabled to 3.6", facts: clusterFacts{StatefulSet: etcdSts(nil),
			MemberImages: map[string]string{"etcd-0": "registry.k8s.io/etcd:3.5.35-0"}, MemberV2: []string{"etcd-0"}},
			want: map[string]string{"stsName": "etcd-0 runs etcd with --enable-v2, and etcd 3.6.8 keeps no v2 store: run `etcdutl check v2store`"}},
		{name: "flags the check cannot read refuse nothing", in: func(a *RolloutArgs) { a.TLS = tlsFiles("/var/lib/etcd") },
			facts: clusterFacts{StatefulSet: etcdSts(func(s *appsv1.StatefulSet) {
				s.Spec.Template.Spec.Containers[0].Args = []string{"--config-file=/etc/etcd.yaml"}
			})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base
			if tt.in != nil {
				tt.in(&in)
			}
			got := map[string]string{}
			for _, f := range preflightFailures(in, tt.facts, tt.mustExist) {
				require.NotContains(t, got, f.Property, "one failure per property")
				got[f.Property] = f.Reason
			}
			require.Len(t, got, len(tt.want), "failures: %v", got)
			for prop, part := range tt.want {
				assert.Contains(t, got[prop], part, "%s", prop)
			}
		})
	}
}

func TestUnansweredFailure(t *testing.T) {
	in := RolloutArgs{StsName: "etcd", Namespace: "db", ReadyTimeoutSeconds: ptr.To(60)}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	member := func(readyFor time.Duration, reachable bool) rollout.MemberState {
		m := rollout.MemberState{Pod: "etcd-0", Reachable: reachable, Problem: "connection refused"}
		if readyFor > 0 {
			m.Ready, m.ReadySince = true, now.Add(-readyFor)
		}
		return m
	}
	tests := []struct {
		name    string
		members []rollout.MemberState
		want    string
	}{
		{name: "one member answers", members: []rollout.MemberState{member(time.Hour, false), member(time.Hour, true)}},
		{name: "no pod Ready: left to the engine's guard", members: []rollout.MemberState{member(0, false)}},
		{name: "Ready for less than the ready timeout: maybe still loading, left to the engine's guard",
			members: []rollout.MemberState{member(59*time.Second, false), member(time.Second, false)}},
		{name: "Ready for longer than the ready timeout, nobody answers", members: []rollout.MemberState{member(61*time.Second, false), member(0, false)},
			want: "no member of StatefulSet db/etcd answered as etcd on http port 2379 although 1 pod(s) have been Ready for over 1m0s (etcd-0: connection refused)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := unansweredFailure(in, rollout.ClusterState{Members: tt.members}, now)
			if tt.want == "" {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, p.CheckFailure{Property: "stsName", Reason: got.Reason}, *got)
			assert.Contains(t, got.Reason, tt.want)
		})
	}
}
