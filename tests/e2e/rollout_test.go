//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/examples/go/etcdprogram"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// example is one program of examples/ and how to drive it. Every config map sets every key the test ever
// changes (stack config persists between operations).
type example struct {
	name string
	// start returns the runner and the stack config for template version rev.
	start func(t *testing.T, p paths, c *harness.Cluster, ns string) (runner, func(rev string) map[string]string)
	tls   bool
	// managed examples pass the manifest to the component, which checks stsName against it.
	managed bool
	// cancel runs the cancelled-rollout scenario too (it costs a rollout; once per language is enough).
	cancel bool
}

var examples = []example{
	{name: "go", cancel: true, start: func(t *testing.T, p paths, c *harness.Cluster, ns string) (runner, func(string) map[string]string) {
		dir := t.TempDir()
		return newGoRunner(t, p, "etcd-rollout-go", etcdprogram.Program), func(rev string) map[string]string {
			return map[string]string{"kubeconfig": c.Kubeconfig, "namespace": ns, "createNamespace": "false",
				"stsName": "etcd", "manifestFile": renderManifest(t, c, dir, false, rev)}
		}
	}},
	{name: "ts-dropin", cancel: true, start: nodeExample("ts-dropin", false)},
	{name: "ts-dropin-tls", tls: true, start: nodeExample("ts-dropin", true)},
	{name: "ts-managed", managed: true, start: nodeExample("ts-managed", false)},
	{name: "python", managed: true, start: pythonExample("python")},
}

func nodeExample(dir string, tls bool) func(*testing.T, paths, *harness.Cluster, string) (runner, func(string) map[string]string) {
	return func(t *testing.T, p paths, c *harness.Cluster, ns string) (runner, func(string) map[string]string) {
		nodeDir := filepath.Join(p.tools, "node")
		// The example is copied under .tools/node so that its imports resolve to the pinned node_modules, next
		// to examples/shared, which it imports from ../shared.
		base := filepath.Join(nodeDir, "work", t.Name())
		work := copyExample(t, filepath.Join(p.root, "examples", dir), filepath.Join(base, dir))
		copyExample(t, filepath.Join(p.root, "examples", "shared"), filepath.Join(base, "shared"))
		// The program must type-check against the generated SDK as it is: that is the drop-in promise.
		tsc := exec.Command(filepath.Join(nodeDir, "node_modules", ".bin", "tsc"), "--noEmit", "-p", work)
		out, err := tsc.CombinedOutput()
		require.NoError(t, err, "tsc %s:\n%s", dir, out)
		r := newProcRunner(t, p, []string{lookPath(t, "node"), filepath.Join(nodeDir, "driver.js"), work, "etcd-rollout-" + dir}, nil)
		return r, func(rev string) map[string]string {
			return map[string]string{"kubeconfig": c.Kubeconfig, "namespace": ns, "createNamespace": "false",
				"stsName": "etcd", "nodeName": c.NodeName, "podRevision": rev, "tls": fmt.Sprint(tls)}
		}
	}
}

func pythonExample(dir string) func(*testing.T, paths, *harness.Cluster, string) (runner, func(string) map[string]string) {
	return func(t *testing.T, p paths, c *harness.Cluster, ns string) (runner, func(string) map[string]string) {
		python := filepath.Join(p.tools, "venv", "bin", "python")
		r := newProcRunner(t, p, []string{python, filepath.Join(p.root, "tests", "e2e", "python", "driver.py"),
			filepath.Join(p.root, "examples", dir), "etcd-rollout-python"}, nil)
		return r, func(rev string) map[string]string {
			return map[string]string{"kubeconfig": c.Kubeconfig, "namespace": ns, "createNamespace": "false",
				"stsName": "etcd", "nodeName": c.NodeName, "podRevision": rev}
		}
	}
}

// TestExamples runs every example through its life: create, a template change previewed with its plan,
// the rollout, a no-op, a bad input refused in preview, a cancelled rollout finished by the next up
// (for the examples marked cancel), and destroy, which leaves the StatefulSet locked and untouched.
func TestExamples(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			ctx := t.Context()
			ns := c.Namespace(t)
			if ex.tls {
				createTLSSecret(ctx, t, c, ns)
			}
			r, config := ex.start(t, p, c, ns)

			// 0. the preview of a fresh stack passes: the StatefulSet is missing, but this update creates it.
			pv, err := r.preview(ctx, config("1"))
			require.NoError(t, err, "first preview:\n%s", pv.explained())

			// 1. up creates the StatefulSet and the rollout and completes.
			res, err := r.up(ctx, config("1"))
			require.NoError(t, err, "first up:\n%s", res.explained())
			first := viewStatefulSet(ctx, t, c, ns)
			requireRolledAndLocked(t, first)
			assert.Equal(t, first.UpdateRevision, res.Outputs["updateRevision"])

			// 2. a template change: preview shows the pending rollout, member by member, with the leader moves.
			pv, err = r.preview(ctx, config("2"))
			require.NoError(t, err, "preview:\n%s", pv.explained())
			t.Logf("pulumi preview --diff of a template change:\n%s", pv.Text)
			steps := pv.rolloutSteps()
			require.Len(t, steps, 1, "one Rollout step in the preview")
			require.Equal(t, "update", string(steps[0].Op))
			if steps[0].New != nil {
				t.Logf("Rollout inputs in preview: %v", steps[0].New.Inputs)
			}
			require.Contains(t, steps[0].DetailedDiff, "plan", "the plan is part of the diff")
			plan := planOf(steps[0])
			assert.Equal(t, []string{"etcd-2", "etcd-1", "etcd-0"}, rolled(plan), "plan: %q", plan)
			assert.Contains(t, plan, "re-lock partition at 3")
			assert.Contains(t, pv.Text, "roll etcd-2", "the CLI prints the plan")

			// 3. up rolls every member: no unplanned election, every pod at the new updateRevision, locked again.
			res, err = r.up(ctx, config("2"))
			require.NoError(t, err, "rolling up:\n%s", res.explained())
			t.Logf("pulumi up of the template change:\n%s", res.Text)
			assert.Contains(t, res.Text, "rolled 3 member(s) (etcd-2, etcd-1, etcd-0)", "the summary line is in the diagnostics")
			// Nothing but updates: no provider created or deleted on the second up of a fresh stack.
			for _, op := range []string{"create", "delete", "replace"} {
				assert.Zero(t, res.Summary[op], "rolling up: %s\n%s", op, res.explained())
			}
			after := viewStatefulSet(ctx, t, c, ns)
			requireRolledAndLocked(t, after)
			assert.NotEqual(t, first.UpdateRevision, after.UpdateRevision)
			assert.Equal(t, after.UpdateRevision, res.Outputs["updateRevision"])
			assert.EqualValues(t, 0, res.Outputs["unplannedElections"], "no unplanned election")
			assert.Equal(t, []any{"etcd-2", "etcd-1", "etcd-0"}, res.Outputs["membersRolled"])
			assert.NotEmpty(t, res.Outputs["finishedAt"])
			t.Logf("rollout: %v leader transfers, %v unplanned elections", res.Outputs["leaderTransfers"], res.Outputs["unplannedElections"])

			// 4. a second up changes nothing.
			res, err = r.up(ctx, config("2"))
			require.NoError(t, err, "no-op up:\n%s", res.explained())
			for op, n := range res.Summary {
				if op != "same" {
					assert.Zero(t, n, "no-op up: %s %d\n%s", op, n, res.explained())
				}
			}

			// 5. a bad input (a StatefulSet that does not exist) fails in preview with a clear message.
			bad := config("2")
			bad["stsName"] = "etcd-missing"
			pv, err = r.preview(ctx, bad)
			require.Error(t, err, "preview of a missing StatefulSet must fail")
			want := "StatefulSet " + ns + "/etcd-missing was not found on the cluster"
			if ex.managed {
				want = `statefulSet.metadata.name is "etcd" but stsName is "etcd-missing"`
			}
			assert.Contains(t, pv.Text+err.Error(), want)

			if ex.cancel {
				// 6. Ctrl-C during a rollout leaves the partition locked; the next up finishes the rest.
				upCtx, cancel := context.WithCancel(ctx)
				type upResult struct {
					res result
					err error
				}
				done := make(chan upResult, 1)
				// A long cool-down keeps the up in its rollout when the cancel lands: a member rolls in about
				// a second here, so with the examples' 1 s cool-down the whole rollout could finish first.
				slow, fast := config("3"), config("3")
				slow["cooldownSeconds"], fast["cooldownSeconds"] = "30", "1"
				go func() { res, err := r.up(upCtx, slow); done <- upResult{res, err} }()
				waitRolloutStarted(ctx, t, c, ns, func() {
					select {
					case u := <-done:
						t.Fatalf("the up ended before the rollout started: %v\n%s", u.err, u.res.explained())
					default:
					}
				})
				cancel()
				select {
				case u := <-done:
					require.Error(t, u.err, "a cancelled up fails")
					t.Logf("cancelled up:\n%s", u.res.Text)
				case <-time.After(5 * time.Minute):
					t.Fatal("the cancelled up did not return")
				}
				stopped := viewStatefulSet(ctx, t, c, ns)
				require.Equal(t, stopped.Replicas, stopped.Partition, "cancelled: the partition is locked again")

				res, err = r.up(ctx, fast)
				require.NoError(t, err, "up after cancel:\n%s", res.explained())
				requireRolledAndLocked(t, viewStatefulSet(ctx, t, c, ns))
				assert.EqualValues(t, 0, res.Outputs["unplannedElections"])
				t.Logf("after cancel, the next up rolled %v", res.Outputs["membersRolled"])
			}

			// 7. destroy: the Rollout's delete touches nothing; the namespace goes with the test.
			require.NoError(t, r.destroy(ctx))
		})
	}
}
