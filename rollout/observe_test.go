package rollout

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/durability"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// Observe fills each member's server and storage version (and an enabled downgrade) from its Status answer, and the cluster version
// with one /version request to one healthy member (the leader), whatever the cluster's size.
func TestObserveReadsVersionsFromEtcd(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cluster     string
		down        string
		wantCluster string
		wantCalls   int
	}{
		{name: "all healthy", cluster: "3.5.0", wantCluster: "3.5.0", wantCalls: 1},
		{name: "a follower down", cluster: "3.5.0", down: "etcd-0", wantCluster: "3.5.0", wantCalls: 1},
		{name: "/version does not answer", wantCalls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFakeCluster(t, 3, 2)
			c.etcd.clusterVersion = tc.cluster
			c.etcd.serverVersions = map[string]string{"etcd-0": "3.6.8", "etcd-1": "3.5.35", "etcd-2": "3.5.35"}
			c.etcd.storageVersions = map[string]string{"etcd-0": "3.6.0"}
			c.etcd.downgradeTargets = map[string]string{"etcd-0": "3.5.0"}
			if tc.down != "" {
				c.etcd.stop(tc.down)
			}
			st, err := c.engine(t, nil).Observe(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tc.wantCluster, st.ClusterVersion)
			assert.Equal(t, tc.wantCalls, c.etcd.clusterVersionCalls, "one /version request per observation")
			for _, m := range st.Members {
				if m.Pod == tc.down {
					assert.Empty(t, m.ServerVersion, "a member that does not answer has no version of its own")
					continue
				}
				assert.Equal(t, c.etcd.serverVersions[m.Pod], m.ServerVersion, m.Pod)
				assert.Equal(t, c.etcd.storageVersions[m.Pod], m.StorageVersion, m.Pod)
				assert.Equal(t, c.etcd.downgradeTargets[m.Pod], m.DowngradeTarget, m.Pod)
			}
		})
	}
}

// Observe reads the template's etcd settings, so the engine can judge them against the target version.
func TestObserveReadsTheTemplateSettings(t *testing.T) {
	c := newFakeCluster(t, 3, 0)
	obj, err := c.kube.Tracker().Get(stsGVR, "db", "etcd")
	require.NoError(t, err)
	sts := obj.(*appsv1.StatefulSet).DeepCopy()
	sts.Spec.Template.Spec.Containers = []corev1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.5.35-0",
		Command: []string{"etcd", "--name=$(POD_NAME)", "--feature-gates=StopGRPCServiceOnDefrag=true"}}}
	require.NoError(t, c.kube.Tracker().Update(stsGVR, sts, "db"))
	st, err := c.engine(t, nil).Observe(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []EtcdSetting{{Name: "name", As: "--name"}, {Name: "feature-gates", As: "--feature-gates"}}, st.TemplateSettings)
	assert.ErrorIs(t, planner.CheckVersionPaths(st), ErrFlagRefused)
}

// A replaced member must start as "existing"; a template that visibly starts etcd without the setting starts
// it as "new", etcd's default (review 3, item 8: only a written "new" was refused, so the run removed a voter
// and waited out its timeouts for a learner that never started). Where a script or a variable from
// elsewhere may set it, nobody can tell from the spec.
func TestATemplateThatOmitsTheInitialClusterStateIsRefusedForAReplacement(t *testing.T) {
	fromConfigMap := corev1.EnvVar{Name: "ETCD_INITIAL_CLUSTER_STATE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "state"}}}
	for _, tt := range []struct {
		name    string
		c       corev1.Container
		omitted bool
	}{
		{"etcd's own command line without it", corev1.Container{Command: []string{"etcd", "--name=$(POD_NAME)", "--data-dir=/var/lib/etcd"}}, true},
		{"a shell one-liner running etcd without it", corev1.Container{Command: []string{"/bin/sh", "-ec", "exec etcd --name=${HOSTNAME} --data-dir=/var/lib/etcd"}}, true},
		{"a shell one-liner running etcd with no flags", corev1.Container{Command: []string{"/bin/sh", "-c", "exec /usr/local/bin/etcd"}}, true},
		{"the flag", corev1.Container{Command: []string{"etcd", "--initial-cluster-state=existing"}}, false},
		{"the flag from a script variable", corev1.Container{Command: []string{"/bin/sh", "-ec", "etcd --initial-cluster-state=$STATE"}}, false},
		{"the variable", corev1.Container{Command: []string{"etcd"}, Env: []corev1.EnvVar{{Name: "ETCD_INITIAL_CLUSTER_STATE", Value: "existing"}}}, false},
		{"the variable from a ConfigMap", corev1.Container{Command: []string{"etcd"}, Env: []corev1.EnvVar{fromConfigMap}}, false},
		{"variables from a ConfigMap", corev1.Container{Command: []string{"etcd"}, EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{}}}}, false},
		{"a script whose content is elsewhere", corev1.Container{Command: []string{"/scripts/start-etcd.sh"}}, false},
		{"the image's entrypoint", corev1.Container{Image: "registry.k8s.io/etcd:3.6.8-0"}, false},
		{"a config file (read by the engine)", corev1.Container{Command: []string{"etcd", "--config-file=/etc/etcd/etcd.yaml"}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.Name = "etcd"
			sts := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{tt.c}}}}}
			st := stsState(sts)
			assert.Equal(t, tt.omitted, st.TemplateInitialClusterStateOmitted)
			s := healthyState(3, 0)
			s.Durability = []durability.Dir{{Role: "data dir", Kind: durability.DiesWithPod, Why: "the data dir is on an emptyDir"}}
			s.TemplateInitialClusterState, s.TemplateInitialClusterStateOmitted = st.TemplateInitialClusterState, st.TemplateInitialClusterStateOmitted
			if s.TemplateInitialClusterState == "" && !s.TemplateInitialClusterStateOmitted {
				s.TemplateInitialClusterState = "existing" // what the script or variable is trusted to give
			}
			_, err := PlanRollout(s, LeaderLazy)
			if !tt.omitted {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrDataDiesWithPod)
			assert.Contains(t, err.Error(), "the template starts etcd without --initial-cluster-state")
		})
	}
}

// A peer URL built from the pod's IP strands a restarted member (rancher/k3k#1168): the plan refuses it before
// anything is touched, whatever shape the template writes it in; a stable DNS name rolls (review 3).
func TestAPeerURLBuiltFromThePodIPIsRefused(t *testing.T) {
	podIP := corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}
	podName := corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}
	for _, tt := range []struct {
		name string
		c    corev1.Container
		want string
	}{
		{"a downward-API variable in the flag", corev1.Container{Command: []string{"etcd", "--initial-advertise-peer-urls=https://$(POD_IP):2380"}, Env: []corev1.EnvVar{podIP}},
			"--initial-advertise-peer-urls=https://$(POD_IP):2380, POD_IP from status.podIP"},
		{"a shell variable", corev1.Container{Command: []string{"/bin/sh", "-c", "exec etcd --initial-advertise-peer-urls=https://${POD_IP}:2380"}, Env: []corev1.EnvVar{podIP}},
			"POD_IP from status.podIP"},
		{"the variable etcd reads", corev1.Container{Command: []string{"etcd"}, Env: []corev1.EnvVar{podIP, {Name: "ETCD_INITIAL_ADVERTISE_PEER_URLS", Value: "https://$(POD_IP):2380"}}},
			"POD_IP from status.podIP"},
		{"hostname -i", corev1.Container{Command: []string{"/bin/sh", "-c", "exec etcd --initial-advertise-peer-urls=https://$(hostname -i):2380"}},
			"from `hostname -i`"},
		{"the pod's DNS name", corev1.Container{Command: []string{"etcd", "--initial-advertise-peer-urls=https://$(POD_NAME).etcd.db.svc:2380"}, Env: []corev1.EnvVar{podIP, podName}}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.Name = "etcd"
			sts := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{tt.c}}}}}
			s := healthyState(3, 0)
			s.PeerURLFromPodIP = stsState(sts).PeerURLFromPodIP
			assert.Contains(t, s.PeerURLFromPodIP, tt.want)
			_, err := PlanRollout(s, LeaderLazy)
			if tt.want == "" {
				assert.Empty(t, s.PeerURLFromPodIP)
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrPeerURLFollowsPod)
			assert.NotErrorIs(t, err, ErrBlocked, "waiting does not fix it")
			assert.Contains(t, err.Error(), "advertise the pod's stable DNS name")
		})
	}
}

// A StatefulSet whose controller may take more than one member down at once (rollingUpdate.maxUnavailable
// above 1, honoured by default since Kubernetes 1.35) is refused at once, in preview as in the run: no
// waiting makes it safe, and the rollout can only keep its own restarts to one at a time.
func TestMaxUnavailableAboveOneIsRefusedAtOnce(t *testing.T) {
	tests := []struct {
		name     string
		value    *intstr.IntOrString
		replicas int
		want     int
	}{
		{"unset", nil, 3, 1},
		{"one", ptr.To(intstr.FromInt32(1)), 3, 1},
		{"two", ptr.To(intstr.FromInt32(2)), 5, 2},
		{"a percentage rounds down", ptr.To(intstr.FromString("50%")), 5, 2},
		{"never below one", ptr.To(intstr.FromString("10%")), 3, 1},
		{"not a number reads as one", ptr.To(intstr.FromString("many")), 3, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, maxUnavailable(tt.value, tt.replicas))
			s := healthyState(tt.replicas, 0)
			s.MaxUnavailable = tt.want
			_, err := PlanRollout(s, LeaderLazy)
			if tt.want > 1 {
				require.ErrorIs(t, err, ErrUnsafeStrategy)
				assert.NotErrorIs(t, err, ErrBlocked, "not a state to wait out")
				assert.Contains(t, err.Error(), "set spec.updateStrategy.rollingUpdate.maxUnavailable to 1")
				return
			}
			require.NoError(t, err)
		})
	}
	s := healthyState(3, 0, 0, 1, 2)
	s.MaxUnavailable = 2
	_, err := PlanRollout(s, LeaderLazy)
	require.NoError(t, err, "nothing to restart (only members to wait for): nothing refused")
}
