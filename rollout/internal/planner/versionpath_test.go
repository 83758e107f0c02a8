package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
