package rollout

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestPlanShowsTheLiveVersionPath(t *testing.T) {
	const tag35, tag36 = "registry.k8s.io/etcd:3.5.35-0", "registry.k8s.io/etcd:3.6.8-0"
	for _, tc := range []struct {
		name     string
		template string
		images   []string // per member
		versions []string // Status answers; "" for a member that does not answer
		cluster  string
		// downgrade is the target etcd's downgrade API is enabled for, as the leader reports it.
		downgrade string
		want      string
	}{
		{name: "a minor upgrade, with the cluster version read from etcd", template: tag36,
			images: []string{tag35, tag35, tag35}, versions: []string{"3.5.35", "3.5.35", "3.5.35"}, cluster: "3.5.0",
			want: "etcd 3.5.35 → 3.6.8 (cluster version 3.5 → 3.6 once etcd-0 is rolled)"},
		{name: "the member's own word beats its tag", template: tag36,
			images: []string{tag35, tag35, tag35}, versions: []string{"3.5.34", "3.5.35", "3.5.35"}, cluster: "3.5.0",
			want: "etcd 3.5.34, 3.5.35 → 3.6.8 (cluster version 3.5 → 3.6 once etcd-0 is rolled)"},
		{name: "a member down: its tag is the hint", template: tag36,
			images: []string{tag35, "registry.k8s.io/etcd:3.5.30-0", tag35}, versions: []string{"3.5.35", "", "3.5.35"}, cluster: "3.5.0",
			want: "etcd 3.5.30, 3.5.35 (etcd-1: by image tag) → 3.6.8 (cluster version 3.5 → 3.6 once etcd-0 is rolled)"},
		{name: "the cluster version not readable: derived from the members", template: tag36,
			images: []string{tag35, tag35, tag35}, versions: []string{"3.5.35", "3.5.35", "3.5.35"},
			want: "etcd 3.5.35 → 3.6.8 (cluster version 3.5 → 3.6 once etcd-0 is rolled)"},
		{name: "a patch change", template: tag36,
			images:   []string{"registry.k8s.io/etcd:3.6.7-0", "registry.k8s.io/etcd:3.6.7-0", "registry.k8s.io/etcd:3.6.7-0"},
			versions: []string{"3.6.7", "3.6.7", "3.6.7"}, cluster: "3.6.0",
			want: "etcd 3.6.7 → 3.6.8 (cluster version stays 3.6)"},
		{name: "a minor downgrade", template: tag35,
			images: []string{tag36, tag36, tag36}, versions: []string{"3.6.8", "3.6.8", "3.6.8"}, cluster: "3.6.0",
			want: "etcd 3.6.8 → 3.5.35 (downgrade to 3.5: enable before etcd-2; cluster version 3.6 → 3.5)"},
		{name: "a minor downgrade that etcd's downgrade API has enabled", template: tag35,
			images: []string{tag36, tag36, tag36}, versions: []string{"3.6.8", "3.6.8", "3.6.8"}, cluster: "3.5.0", downgrade: "3.5.0",
			want: "etcd 3.6.8 → 3.5.35 (downgrade to 3.5: enabled; cluster version 3.5)"},
		{name: "no version change (a flag change)", template: tag36,
			images: []string{tag36, tag36, tag36}, versions: []string{"3.6.8", "3.6.8", "3.6.8"}, cluster: "3.6.0"},
		{name: "an untagged template: the target is unknown", template: "etcd@sha256:abcd",
			images: []string{tag35, tag35, tag35}, versions: []string{"3.5.35", "3.5.35", "3.5.35"}, cluster: "3.5.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := healthyState(3, 1)
			s.TemplateImage, s.ClusterVersion = tc.template, tc.cluster
			s.Members[1].DowngradeTarget = tc.downgrade
			for i := range s.Members {
				s.Members[i].Image, s.Members[i].ServerVersion = tc.images[i], tc.versions[i]
			}
			p, err := PlanRollout(s, LeaderLazy)
			require.NoError(t, err)
			assert.Equal(t, tc.want, p.VersionLine())
			if tc.want != "" {
				assert.Contains(t, p.String(), tc.want[:len("etcd 3.")], "the summary carries the version path")
			}
		})
	}
}

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
	assert.ErrorIs(t, checkVersionPaths(st), ErrFlagRefused)
}
