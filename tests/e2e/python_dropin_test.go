//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// dropInCallSite is one call site of examples/python-dropin: the StatefulSet it applies and the name of its
// EtcdRollingUpgrade (and so of the Rollout child), as the program spells them.
type dropInCallSite struct {
	key       string // prefix of the program's stack outputs
	component string // resource name of the EtcdRollingUpgrade
	spec      harness.EtcdSpec
	tls       map[string]any // the Rollout's tls input, nil for plain HTTP
}

// TestPythonDropInCallSites runs examples/python-dropin, the two call sites of the old TypeScript class
// written in Python (the main etcd over HTTP, a keyspace-etcd-group over mTLS with the files its pods mount),
// through pulumi preview and pulumi up on the local cluster: the first up creates both StatefulSets and both
// components; the preview of a template change shows each plan; the up of that change rolls every member of
// both clusters, with no unplanned election (checked against the members' own Raft terms), every pod at
// updateRevision and both partitions locked. The driver's KUBECONFIG points nowhere, so the rollouts can only
// reach the cluster through the kubernetes provider the program passes in the options.
func TestPythonDropInCallSites(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	ctx := t.Context()
	mainNS, keyspaceNS := c.Namespace(t), c.Namespace(t)

	sites := []dropInCallSite{
		{key: "etcd", component: "etcd", spec: harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless"}},
		{key: "keyspace", component: "freetier-keyspace-etcd-group-0",
			spec: harness.EtcdSpec{Name: "keyspace-etcd-group-0", ServiceName: "keyspace-etcd-group-0-peer", TLS: true},
			tls: map[string]any{"caFile": "/var/lib/etcd-tls/ca.crt", "certFile": "/var/lib/etcd-tls/tls.crt",
				"keyFile": "/var/lib/etcd-tls/tls.key"}},
	}
	clusters := map[string]*harness.Etcd{}
	for _, s := range sites {
		ns := mainNS
		if s.spec.TLS {
			ns = keyspaceNS
		}
		e, err := c.AttachEtcd(ns, s.spec)
		require.NoError(t, err)
		if s.spec.TLS {
			e.TLS = createKeyspaceSecret(ctx, t, c, ns, e.Spec)
		}
		clusters[s.key] = e
	}

	python := filepath.Join(p.tools, "venv", "bin", "python")
	r := newProcRunner(t, p, []string{python, filepath.Join(p.root, "tests", "e2e", "python", "driver.py"),
		filepath.Join(p.root, "examples", "python-dropin"), "etcd-rollout-python-dropin"},
		map[string]string{"KUBECONFIG": filepath.Join(t.TempDir(), "no-such-kubeconfig")})
	config := func(rev string) map[string]string {
		return map[string]string{"kubeconfig": c.Kubeconfig, "namespace": mainNS, "keyspaceNamespace": keyspaceNS,
			"createNamespace": "false", "nodeName": c.NodeName, "podRevision": rev, "cooldownSeconds": "1"}
	}
	timed := func(what string, op func() (result, error)) result {
		t.Helper()
		start := time.Now()
		res, err := op()
		require.NoError(t, err, "%s:\n%s", what, res.explained())
		t.Logf("%s: %s", what, time.Since(start).Round(100*time.Millisecond))
		return res
	}

	// 1. A fresh stack: the preview passes (the StatefulSets are created by the same update), and the first
	// up creates both clusters. Nothing is rolled: the controller created every pod at updateRevision.
	timed("preview of the new stack", func() (result, error) { return r.preview(ctx, config("1")) })
	res := timed("first up", func() (result, error) { return r.up(ctx, config("1")) })
	before := map[string][]types.UID{}
	terms := map[string]uint64{}
	for _, s := range sites {
		e := clusters[s.key]
		require.NoError(t, e.WaitHealthy(ctx), "%s healthy after the first up", s.spec.Name)
		v, uids := viewEtcd(t, e)
		requireRolledAndLocked(t, v)
		assert.Equal(t, v.UpdateRevision, res.Outputs[s.key+"UpdateRevision"], s.key)
		assert.Empty(t, res.Outputs[s.key+"MembersRolled"], "%s: a new cluster is not rolled", s.key)
		before[s.key] = uids
	}

	// 2. The preview of a template change shows, for each call site, the plan of its Rollout: every member,
	// highest ordinal first, then the re-lock. Its inputs are the call site's arguments, and the Rollout sits
	// under the component, under the StatefulSet given as parent.
	pv := timed("preview of the template change", func() (result, error) { return r.preview(ctx, config("2")) })
	t.Logf("pulumi preview --diff of the template change:\n%s", pv.Text)
	steps := pv.rolloutSteps()
	require.Len(t, steps, len(sites), "one Rollout step per call site")
	for _, s := range sites {
		step := stepNamed(t, steps, s.component)
		assert.Equal(t, "update", string(step.Op), s.key)
		assert.Contains(t, string(step.URN), "kubernetes:apps/v1:StatefulSet$etcd-rollout:index:EtcdRollingUpgrade$etcd-rollout:index:Rollout::",
			"%s: parent=sts puts the component under the StatefulSet", s.key)
		require.NotNil(t, step.New, s.key)
		in := step.New.Inputs
		assert.Equal(t, s.spec.Name, in["stsName"], s.key)
		assert.Equal(t, clusters[s.key].Namespace, in["namespace"], s.key)
		assert.Equal(t, s.spec.ServiceName, in["serviceName"], s.key)
		if s.tls != nil {
			assert.Equal(t, s.tls, in["tls"], "%s: tls", s.key)
		} else {
			assert.Nil(t, in["tls"], "%s: plain HTTP", s.key)
		}
		require.Contains(t, step.DetailedDiff, "plan", "%s: the plan is part of the diff", s.key)
		plan := planOf(step)
		assert.Equal(t, podsOf(s.spec, 2, 1, 0), rolled(plan), "%s plan: %q", s.key, plan)
		assert.Contains(t, plan, "re-lock partition at 3", s.key)
		assert.Contains(t, pv.Text, "roll "+s.spec.Name+"-2", "%s: the CLI prints the plan", s.key)
	}
	for _, s := range sites {
		terms[s.key] = clusters[s.key].Must(t).Term() // after the preview: it must not have moved anything
	}

	// 3. The up of the template change rolls every member of both clusters.
	res = timed("up of the template change", func() (result, error) { return r.up(ctx, config("2")) })
	t.Logf("pulumi up of the template change:\n%s", res.Text)
	for _, op := range []string{"create", "delete", "replace"} {
		assert.Zero(t, res.Summary[op], "rolling up: %s", op)
	}
	for _, s := range sites {
		e := clusters[s.key]
		v, uids := viewEtcd(t, e)
		requireRolledAndLocked(t, v)
		assert.Equal(t, v.UpdateRevision, res.Outputs[s.key+"UpdateRevision"], s.key)
		assert.Equal(t, toAny(podsOf(s.spec, 2, 1, 0)), res.Outputs[s.key+"MembersRolled"], s.key)
		assert.EqualValues(t, 0, res.Outputs[s.key+"UnplannedElections"], "%s: no unplanned election", s.key)
		assert.NotEmpty(t, res.Outputs[s.key+"FinishedAt"], s.key)
		for i := range uids {
			assert.NotEqual(t, before[s.key][i], uids[i], "%s: %s was restarted", s.key, e.PodName(i))
		}
		require.NoError(t, e.WaitHealthy(ctx), "%s healthy after the rollout", s.spec.Name)
		// The outputs' claim, checked against etcd itself: the Raft term rose by the leader transfers only.
		transfers, ok := res.Outputs[s.key+"LeaderTransfers"].(float64)
		require.True(t, ok, "%s: leaderTransfers output %v", s.key, res.Outputs[s.key+"LeaderTransfers"])
		assert.Equal(t, terms[s.key]+uint64(transfers), e.Must(t).Term(), "%s: raft term rose only by the %v transfers", s.key, transfers)
		t.Logf("%s: rolled %v, %v leader transfers, term %d -> %d", s.key, res.Outputs[s.key+"MembersRolled"], transfers,
			terms[s.key], e.Must(t).Term())
	}
	assert.Contains(t, res.Text, "rolled 3 member(s) (etcd-2, etcd-1, etcd-0)")
	assert.Contains(t, res.Text, "rolled 3 member(s) (keyspace-etcd-group-0-2, keyspace-etcd-group-0-1, keyspace-etcd-group-0-0)")

	// 4. destroy: the Rollouts' delete touches nothing; the namespaces go with the test.
	start := time.Now()
	require.NoError(t, r.destroy(ctx))
	t.Logf("destroy: %s", time.Since(start).Round(100*time.Millisecond))
}

// createKeyspaceSecret creates the Secret a keyspace-etcd-group's pods mount at /var/lib/etcd-tls, in the
// production shape: the member certificate under tls.crt and tls.key (the files the call site passes), named
// <pod>.<svc>.<ns> as the old Job dialled the members, next to the harness's own keys, which the local
// cluster's members serve and dial peers with.
func createKeyspaceSecret(ctx context.Context, t *testing.T, c *harness.Cluster, ns string, spec harness.EtcdSpec) *harness.TLSMaterial {
	t.Helper()
	m, err := harness.GenerateTLSWith(spec, ns, harness.CertOptions{Shape: harness.CertShapePod})
	require.NoError(t, err)
	data := m.SecretData()
	data["tls.crt"], data["tls.key"] = m.PeerCert, m.PeerKey
	_, err = c.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: spec.SecretName()},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return &m
}

// viewEtcd is stsView for any StatefulSet, with the pods' UIDs by ordinal.
func viewEtcd(t *testing.T, e *harness.Etcd) (stsView, []types.UID) {
	t.Helper()
	m := e.Must(t)
	sts := m.StatefulSet()
	v := stsView{Replicas: int(*sts.Spec.Replicas), Partition: m.Partition(), UpdateRevision: sts.Status.UpdateRevision}
	revs, uids := m.Pods()
	v.PodRevisions = revs
	return v, uids
}

// stepNamed is the Rollout step whose URN ends in ::name.
func stepNamed(t *testing.T, steps []apitype.StepEventMetadata, name string) apitype.StepEventMetadata {
	t.Helper()
	for _, s := range steps {
		if strings.HasSuffix(string(s.URN), "::"+name) {
			return s
		}
	}
	require.Failf(t, "no Rollout step", "no Rollout named %s in the preview", name)
	return apitype.StepEventMetadata{}
}

// podsOf names spec's pods of the given ordinals, in that order.
func podsOf(spec harness.EtcdSpec, ordinals ...int) []string {
	out := make([]string, len(ordinals))
	for i, o := range ordinals {
		out[i] = fmt.Sprintf("%s-%d", spec.Name, o)
	}
	return out
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
