//go:build integration

package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// readmeWaitPrefix starts the line of docs/cli.md that waits for a finished rollout. The test runs that line
// as the page prints it, so the two cannot drift apart.
const readmeWaitPrefix = "kubectl wait --for=jsonpath="

// readmeWaitLine is the one line of docs/cli.md that starts with readmeWaitPrefix.
func readmeWaitLine(t *testing.T) string {
	t.Helper()
	root, err := harness.RepoRoot()
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "docs", "cli.md"))
	require.NoError(t, err)
	var lines []string
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, readmeWaitPrefix) {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	require.Len(t, lines, 1, "docs/cli.md holds exactly one line starting with %q", readmeWaitPrefix)
	return lines[0]
}

// kubectlEnv is the environment the README's line runs in: the pinned kubectl first on PATH, and a copy of
// the cluster's kubeconfig whose current context is in ns, so the line needs no -n or --kubeconfig added.
func kubectlEnv(t *testing.T, c *harness.Cluster, ns string) []string {
	t.Helper()
	bin := toolsBin(t)
	_, err := os.Stat(filepath.Join(bin, "kubectl"))
	require.NoError(t, err, "kubectl is built by tools/build.sh cluster (make tools)")

	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	require.NoError(t, err)
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	require.True(t, ok, "the cluster's kubeconfig has a current context")
	ctx.Namespace = ns
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return append(os.Environ(), "KUBECONFIG="+path, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// The README's `kubectl wait` line, run verbatim while a real rollout is under way, returns once that
// rollout has finished: every member at the new revision and the partition locked, never earlier.
func TestKubectlWaitForAFinishedRollout(t *testing.T) {
	t.Parallel()
	line := readmeWaitLine(t)
	require.Contains(t, line, "configmap/"+rollout.StatusConfigMapName(httpSpec.Name), "the line waits on the StatefulSet the test rolls")
	require.Contains(t, line, "{.data."+rollout.ConditionMembersUpdated+"}", "the line waits on the MembersUpdated condition")

	f := newFixture(t, httpSpec)
	env := kubectlEnv(t, f.c, f.etcd.Namespace)
	kubectl := func(ctx context.Context) (string, error) {
		cmd := exec.CommandContext(ctx, "bash", "-c", line)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// Before any rollout there is no status to wait on: kubectl says so at once (and so reaches the right
	// namespace and object).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	out, err := kubectl(ctx)
	cancel()
	require.Error(t, err, "no status published yet: %s", out)
	assert.Contains(t, out, "not found")

	rev := f.must.ChangeTemplate(label(0))
	type outcome struct {
		res rollout.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := f.engine(nil).Run(runCtx(t))
		done <- outcome{res, err}
	}()

	// Start waiting once the run has published that it is under way.
	cms := f.c.Kube.CoreV1().ConfigMaps(f.etcd.Namespace)
	name := rollout.StatusConfigMapName(httpSpec.Name)
	var started map[string]string
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		started = cm.Data
		return cm.Data[rollout.ConditionProgressing] == "True", nil
	})
	require.NoError(t, err, "the run published Progressing=True")
	require.Equal(t, "False", started[rollout.ConditionMembersUpdated], "mid-rollout the status does not claim completion")

	waitCtx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	begin := time.Now()
	out, err = kubectl(waitCtx)
	require.NoError(t, err, "%s: %s", line, out)
	t.Logf("%s returned after %s: %s", line, time.Since(begin).Round(time.Millisecond), strings.TrimSpace(out))

	// The moment kubectl returned, the rollout was over: every member at the new revision, partition locked.
	revs, _ := f.must.Pods()
	assert.Equal(t, []string{rev, rev, rev}, revs, "every member at the new revision when kubectl wait returned")
	assert.Equal(t, f.etcd.Spec.Replicas, f.must.Partition(), "partition locked when kubectl wait returned")

	var o outcome
	select {
	case o = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the rollout did not return after its status said it finished")
	}
	require.NoError(t, o.err)
	assert.Len(t, o.res.MembersRolled, 3)
	f.requireRolledTo(rev)

	cm, err := cms.Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, rev, cm.Data[rollout.StatusKeyTargetRevision])
	assert.Equal(t, "3", cm.Data[rollout.StatusKeyMembersDone])
	assert.Equal(t, "3", cm.Data[rollout.StatusKeyMembers])
	assert.Equal(t, "False", cm.Data[rollout.ConditionProgressing])
	assert.Equal(t, "False", cm.Data[rollout.ConditionFailed])
	require.Len(t, cm.OwnerReferences, 1)
	assert.Equal(t, f.must.StatefulSet().UID, cm.OwnerReferences[0].UID, "collected with the StatefulSet")
}

// A rollout that fails publishes Failed=True and Progressing=False, and the README's line does not take it
// for a finished one; the README's wait for the end either way (Progressing=False) returns.
func TestStatusOfAFailedRollout(t *testing.T) {
	t.Parallel()
	line := readmeWaitLine(t)
	const done = "'{.data." + rollout.ConditionMembersUpdated + "}'=True"
	require.Contains(t, line, done)
	endedLine := strings.Replace(line, done, "'{.data."+rollout.ConditionProgressing+"}'=False", 1)

	f := newFixture(t, httpSpec)
	env := kubectlEnv(t, f.c, f.etcd.Namespace)
	kubectl := func(ctx context.Context, line string) (string, error) {
		cmd := exec.CommandContext(ctx, "bash", "-c", line)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := f.etcd.UpdateTemplate(ctx, func(tpl *corev1.PodTemplateSpec) {
		tpl.Annotations["etcd-rollout.test/broken"] = "true" // the member daemon never lets it become healthy
	})
	require.NoError(t, err)
	_, err = f.engine(func(cfg *rollout.Config, _ *rollout.Options) {
		cfg.ReadyTimeout, cfg.HealthTimeout = 10*time.Second, 5*time.Second
	}).Run(runCtx(t))
	require.Error(t, err)
	t.Logf("run: %v", err)

	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := kubectl(ctx, endedLine)
	require.NoError(t, err, "%s: %s", endedLine, out)

	short, cancelShort := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancelShort()
	out, err = kubectl(short, line)
	require.Error(t, err, "the README's line must not call a failed rollout finished: %s", out)

	cm, err := f.c.Kube.CoreV1().ConfigMaps(f.etcd.Namespace).Get(ctx, rollout.StatusConfigMapName(httpSpec.Name), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "True", cm.Data[rollout.ConditionFailed])
	assert.Equal(t, "False", cm.Data[rollout.ConditionProgressing])
	assert.Equal(t, "False", cm.Data[rollout.ConditionMembersUpdated])
	assert.Equal(t, "0", cm.Data[rollout.StatusKeyMembersDone], "no member passed its gates on the broken revision")
	var conds []metav1.Condition
	require.NoError(t, json.Unmarshal([]byte(cm.Data[rollout.StatusKeyConditions]), &conds))
	for _, c := range conds {
		if c.Type == rollout.ConditionFailed {
			assert.Equal(t, rollout.ReasonRolloutFailed, c.Reason)
			assert.Contains(t, c.Message, "etcd-2")
		}
	}
}
