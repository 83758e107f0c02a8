//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

const (
	oldImport = `import { EtcdRollingUpgrade } from "./old-etcd-rolling-upgrade";`
	newImport = `import { EtcdRollingUpgrade } from "pulumi-etcd-rollout";`
)

// A stack built with the Job-based class (examples/ts-migration, a stand-in with the old children and names)
// is switched to pulumi-etcd-rollout by changing only its import line: the next `pulumi up` deletes the old
// children and creates the component without restarting any member (same pod UIDs, same etcd processes,
// partition locked), `dependsOn: [upgrade.job]` now waits for the Rollout, and the up after that rolls a
// template change as usual. docs/usage.md's "Migrating from the Job-based class" lists these steps.
func TestMigrateFromTheJobBasedClass(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	ctx := t.Context()
	ns := c.Namespace(t)
	requireJobsComplete(ctx, t, c, ns)
	r, config, work := migrationExample(t, p, c, ns)

	// 1. The stack as it is today: the old class applies its children and the local cluster completes its Job.
	res, err := r.up(ctx, config("1"))
	require.NoError(t, err, "up with the Job-based class:\n%s", res.explained())
	hash8 := requireOldChildren(ctx, t, c, ns)
	requireRolledAndLocked(t, viewStatefulSet(ctx, t, c, ns))
	e, err := c.AttachEtcd(ns, harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", Replicas: 3})
	require.NoError(t, err)
	require.NoError(t, e.WaitHealthy(ctx), "every member healthy before the migration")
	before := memberProcesses(ctx, t, c, e, ns)

	// 2. Only the import line changes, and the program type-checks against the generated SDK, upgrade.job
	// in dependsOn included.
	switchImport(t, work)
	tsc := exec.Command(filepath.Join(p.tools, "node", "node_modules", ".bin", "tsc"), "--noEmit", "-p", work)
	out, err := tsc.CombinedOutput()
	require.NoError(t, err, "tsc of the migrated program:\n%s", out)

	// 3. The preview: the new component's Rollout is created with a plan that restarts nobody.
	pv, err := r.preview(ctx, config("1"))
	require.NoError(t, err, "preview of the migration:\n%s", pv.explained())
	t.Logf("pulumi preview of the migration:\n%s", pv.Text)
	steps := pv.rolloutSteps()
	require.Len(t, steps, 1)
	assert.Equal(t, "create", string(steps[0].Op))
	assert.Empty(t, rolled(planOf(steps[0])), "the plan restarts no member: %q", planOf(steps[0]))

	// 4. The migrating up: old children deleted, component created, nothing restarted, nothing else changed.
	res, err = r.up(ctx, config("1"))
	require.NoError(t, err, "the migrating up:\n%s", res.explained())
	t.Logf("the migrating up:\n%s (summary %v)", res.Text, res.Summary)
	assert.Equal(t, 7, res.Summary["delete"], "the old component and its six children are deleted")
	for _, op := range []string{"update", "replace"} {
		assert.Zero(t, res.Summary[op], "%s: the StatefulSet, its Service and the dependent ConfigMap stay as they are", op)
	}
	requireOldChildrenGone(ctx, t, c, ns, hash8)
	requireRolledAndLocked(t, viewStatefulSet(ctx, t, c, ns))
	assert.Equal(t, before, memberProcesses(ctx, t, c, e, ns), "no member restarted: same pod UIDs, same etcd processes")

	state := stackResources(t, r.(*procRunner))
	rollout := state.one(t, "etcd-rollout:index:Rollout")
	comp := state.one(t, "etcd-rollout:index:EtcdRollingUpgrade")
	assert.Empty(t, comp.Outputs["membersRolled"], "the component rolled nobody")
	assert.Equal(t, true, rollout.Outputs["complete"])
	after := state.one(t, "kubernetes:core/v1:ConfigMap")
	assert.Contains(t, after.Dependencies, rollout.URN, "dependsOn: [upgrade.job] depends on the Rollout")
	assert.Empty(t, state.ofType("pool:rolling-upgrade:EtcdRollingUpgrade"), "the old component is gone from the state")
	assert.Empty(t, state.ofType("kubernetes:batch/v1:Job"))

	// 5. A template change rolls as with any stack of the component.
	first := viewStatefulSet(ctx, t, c, ns)
	res, err = r.up(ctx, config("2"))
	require.NoError(t, err, "the up of a template change after the migration:\n%s", res.explained())
	rolledView := viewStatefulSet(ctx, t, c, ns)
	requireRolledAndLocked(t, rolledView)
	assert.NotEqual(t, first.UpdateRevision, rolledView.UpdateRevision)
	comp = stackResources(t, r.(*procRunner)).one(t, "etcd-rollout:index:EtcdRollingUpgrade")
	assert.Equal(t, []any{"etcd-2", "etcd-1", "etcd-0"}, comp.Outputs["membersRolled"])
	assert.EqualValues(t, 0, comp.Outputs["unplannedElections"])
	require.NoError(t, e.WaitHealthy(ctx))
	assert.NotEqual(t, before, memberProcesses(ctx, t, c, e, ns), "a rollout shows in the fingerprint of step 4")

	require.NoError(t, r.destroy(ctx))
}

// migrationExample is nodeExample("ts-migration") in a work folder of its own (this test edits the program,
// so two runs of it at once must not share one): the copy under .tools/node, the type check of the old
// program, the runner and the stack config.
func migrationExample(t *testing.T, p paths, c *harness.Cluster, ns string) (runner, func(rev string) map[string]string, string) {
	t.Helper()
	nodeDir := filepath.Join(p.tools, "node")
	require.NoError(t, os.MkdirAll(filepath.Join(nodeDir, "work"), 0o755))
	base, err := os.MkdirTemp(filepath.Join(nodeDir, "work"), t.Name()+"-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	work := copyExample(t, filepath.Join(p.root, "examples", "ts-migration"), filepath.Join(base, "ts-migration"))
	copyExample(t, filepath.Join(p.root, "examples", "shared"), filepath.Join(base, "shared"))
	out, err := exec.Command(filepath.Join(nodeDir, "node_modules", ".bin", "tsc"), "--noEmit", "-p", work).CombinedOutput()
	require.NoError(t, err, "tsc of the program with the old class:\n%s", out)
	r := newProcRunner(t, p, []string{lookPath(t, "node"), filepath.Join(nodeDir, "driver.js"), work, "etcd-rollout-ts-migration"}, nil)
	return r, func(rev string) map[string]string {
		return map[string]string{"kubeconfig": c.Kubeconfig, "namespace": ns, "nodeName": c.NodeName, "podRevision": rev}
	}, work
}

// requireJobsComplete fails fast when the local cluster cannot complete a Job (one started by an up.sh
// older than its job-controller), instead of leaving the old class's up in pulumi-kubernetes' 10-minute
// Job await.
func requireJobsComplete(ctx context.Context, t *testing.T, c *harness.Cluster, ns string) {
	t.Helper()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeName: c.NodeName, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "probe", Image: "busybox", Command: []string{"true"}}},
		}}},
	}
	_, err := c.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := c.Kube.BatchV1().Jobs(ns).Get(ctx, "probe", metav1.GetOptions{})
		require.NoError(t, err)
		if jobCondition(*got, batchv1.JobComplete) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a Job did not complete in 30 s (status %+v): the local cluster runs no Job controller; "+
				"restart it with make cluster-down cluster-up", got.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	bg := metav1.DeletePropagationBackground
	require.NoError(t, c.Kube.BatchV1().Jobs(ns).Delete(ctx, "probe", metav1.DeleteOptions{PropagationPolicy: &bg}))
}

// switchImport replaces the old class's import with the SDK's in the copied program and checks that this is
// the only line that differs.
func switchImport(t *testing.T, work string) {
	t.Helper()
	path := filepath.Join(work, "index.ts")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	old := strings.Split(string(b), "\n")
	migrated := strings.Replace(string(b), oldImport, newImport, 1)
	require.NotEqual(t, string(b), migrated, "index.ts imports the old class with %s", oldImport)
	changed := 0
	for i, line := range strings.Split(migrated, "\n") {
		if line != old[i] {
			changed++
		}
	}
	require.Equal(t, 1, changed, "only the import line differs")
	require.NoError(t, os.WriteFile(path, []byte(migrated), 0o644))
}

// requireOldChildren checks what the old class left on the cluster, its Job completed, and returns the
// versionHash prefix in its names.
func requireOldChildren(ctx context.Context, t *testing.T, c *harness.Cluster, ns string) string {
	t.Helper()
	jobs, err := c.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var rolloutJobs []batchv1.Job
	for _, j := range jobs.Items {
		if strings.HasPrefix(j.Name, "etcd-rollout-") {
			rolloutJobs = append(rolloutJobs, j)
		}
	}
	require.Len(t, rolloutJobs, 1, "one rollout Job, etcd-rollout-<hash8>")
	job := rolloutJobs[0]
	hash8 := strings.TrimPrefix(job.Name, "etcd-rollout-")
	require.Len(t, hash8, 8)
	assert.True(t, jobCondition(job, batchv1.JobComplete), "the Job completed: %+v", job.Status.Conditions)
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1)
	assert.Equal(t, corev1.PodSucceeded, pods.Items[0].Status.Phase, "the Job's pod succeeded")

	_, err = c.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, "etcd-rollout", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = c.Kube.RbacV1().Roles(ns).Get(ctx, "etcd-rollout", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = c.Kube.RbacV1().RoleBindings(ns).Get(ctx, "etcd-rollout", metav1.GetOptions{})
	require.NoError(t, err)
	for _, cm := range []string{"etcd-rollout-config-" + hash8, "etcd-rollout-script"} {
		_, err = c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, cm, metav1.GetOptions{})
		require.NoError(t, err, "ConfigMap %s", cm)
	}
	return hash8
}

func requireOldChildrenGone(ctx context.Context, t *testing.T, c *harness.Cluster, ns, hash8 string) {
	t.Helper()
	gone := func(what string, err error) {
		assert.True(t, apierrors.IsNotFound(err), "%s is deleted (err %v)", what, err)
	}
	_, err := c.Kube.BatchV1().Jobs(ns).Get(ctx, "etcd-rollout-"+hash8, metav1.GetOptions{})
	gone("the Job", err)
	_, err = c.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, "etcd-rollout", metav1.GetOptions{})
	gone("the ServiceAccount", err)
	_, err = c.Kube.RbacV1().Roles(ns).Get(ctx, "etcd-rollout", metav1.GetOptions{})
	gone("the Role", err)
	_, err = c.Kube.RbacV1().RoleBindings(ns).Get(ctx, "etcd-rollout", metav1.GetOptions{})
	gone("the RoleBinding", err)
	for _, cm := range []string{"etcd-rollout-config-" + hash8, "etcd-rollout-script"} {
		_, err = c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, cm, metav1.GetOptions{})
		gone("ConfigMap "+cm, err)
	}
}

func jobCondition(job batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, cond := range job.Status.Conditions {
		if cond.Type == typ && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// memberProcesses is, per member, its pod's UID and the etcd process behind it (pid, start count): any
// restart changes it.
func memberProcesses(ctx context.Context, t *testing.T, c *harness.Cluster, e *harness.Etcd, ns string) []string {
	t.Helper()
	members, err := e.Members(ctx)
	require.NoError(t, err)
	require.Len(t, members, 3)
	var out []string
	for _, m := range members {
		pod, err := c.Kube.CoreV1().Pods(ns).Get(ctx, m.Pod, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotZero(t, m.PID, "%s runs", m.Pod)
		out = append(out, fmt.Sprintf("%s pod=%s member-pod=%s pid=%d starts=%d", m.Pod, pod.UID, m.PodUID, m.PID, m.Starts))
	}
	return out
}

// stateResource is one resource of the stack's checkpoint in the file backend.
type stateResource struct {
	URN          string         `json:"urn"`
	Type         string         `json:"type"`
	Outputs      map[string]any `json:"outputs"`
	Dependencies []string       `json:"dependencies"`
}

type stackState []stateResource

// stackResources reads the stack's latest checkpoint from the runner's file backend.
func stackResources(t *testing.T, r *procRunner) stackState {
	t.Helper()
	dir := strings.TrimPrefix(r.env["E2E_BACKEND"], "file://")
	files, err := filepath.Glob(filepath.Join(dir, ".pulumi", "stacks", "*", "e2e.json"))
	require.NoError(t, err)
	require.Len(t, files, 1, "one stack checkpoint in %s", dir)
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	var cp struct {
		Checkpoint struct {
			Latest struct {
				Resources []stateResource `json:"resources"`
			} `json:"latest"`
		} `json:"checkpoint"`
	}
	require.NoError(t, json.Unmarshal(b, &cp))
	return cp.Checkpoint.Latest.Resources
}

func (s stackState) ofType(typ string) []stateResource {
	var out []stateResource
	for _, r := range s {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

func (s stackState) one(t *testing.T, typ string) stateResource {
	t.Helper()
	rs := s.ofType(typ)
	require.Len(t, rs, 1, "one %s in the state", typ)
	return rs[0]
}
