//go:build e2e && faults

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/debug"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/sdk/go/etcdrollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// leakProgram rolls an mTLS etcd StatefulSet that the admin created, with the cluster access given only as
// the component's secret kubeconfig input (a document holding a client key and a token), as a platform team
// passes CI credentials. keyFile is configurable so a run can fail while reading the key material.
func leakProgram(ns string) pulumi.RunFunc {
	return func(ctx *pulumi.Context) error {
		cfg := config.New(ctx, "")
		keyFile := cfg.Get("keyFile")
		if keyFile == "" {
			keyFile = memberapi.DefaultTLSDir + "/" + memberapi.SecretClientKey
		}
		up, err := etcdrollout.NewEtcdRollingUpgrade(ctx, "etcd", &etcdrollout.EtcdRollingUpgradeArgs{
			StsName:     pulumi.String("etcd"),
			Namespace:   pulumi.String(ns),
			ServiceName: pulumi.String("etcd-headless"),
			Tls: &etcdrollout.TLSArgs{
				CaFile:   pulumi.String(memberapi.DefaultTLSDir + "/" + memberapi.SecretCA),
				CertFile: pulumi.String(memberapi.DefaultTLSDir + "/" + memberapi.SecretClientCert),
				KeyFile:  pulumi.String(keyFile),
			},
			VersionHash:     pulumi.String(cfg.Require("versionHash")),
			CooldownSeconds: pulumi.Int(0),
			Kubeconfig:      cfg.RequireSecret("kubeconfig"),
		})
		if err != nil {
			return err
		}
		ctx.Export("updateRevision", up.UpdateRevision)
		ctx.Export("membersRolled", up.MembersRolled)
		ctx.Export("leaderTransfers", up.LeaderTransfers)
		ctx.Export("unplannedElections", up.UnplannedElections)
		return nil
	}
}

// capture is everything one `pulumi up` left behind: stdout, stderr (where --logtostderr -v=9 --logflow
// sends the CLI's and the providers' debug logs), every engine event (diagnostics included) as JSON, the
// outputs and the error.
type capture struct {
	stdout, stderr, events, outputs, err string
}

func (c capture) all() map[string]string {
	return map[string]string{"stdout": c.stdout, "debug log (stderr)": c.stderr, "engine events": c.events,
		"outputs": c.outputs, "error": c.err}
}

func debugUp(t *testing.T, stack auto.Stack) capture {
	t.Helper()
	stdout, stderr := newSyncBuffer(), newSyncBuffer()
	ch := make(chan events.EngineEvent)
	evs := make(chan string)
	go func() {
		var b strings.Builder
		for e := range ch {
			j, _ := json.Marshal(e)
			b.Write(j)
			b.WriteByte('\n')
		}
		evs <- b.String()
	}()
	level := uint(9)
	res, err := stack.Up(t.Context(), optup.ProgressStreams(stdout), optup.ErrorProgressStreams(stderr), optup.EventStreams(ch),
		optup.DebugLogging(debug.LoggingOptions{LogLevel: &level, LogToStdErr: true, FlowToPlugins: true, Debug: true}))
	c := capture{stdout: stdout.String(), stderr: stderr.String(), events: <-evs}
	if err != nil {
		c.err = err.Error()
	}
	out, _ := json.Marshal(res.Outputs)
	c.outputs = string(out)
	return c
}

// TestFaultsSecretsNeverLeak runs a full mTLS rollout through `pulumi up` with debug logging everywhere
// (-v=9, --logtostderr, --logflow to the providers, --debug), then two failing ups (a key file that is not the
// key, and a kubeconfig document that does not parse), and looks for the key material in everything they
// left: every log line, every engine event, the errors, the outputs, the Kubernetes Events of the namespace,
// the exported stack state, and every file of the state backend, the Pulumi home and the project dir. The
// material: the etcd server, peer and client private keys (the Secret the pods mount, which the engine
// reads), and the kubeconfig's client key and ServiceAccount token. `stack export --show-secrets` must
// reveal the kubeconfig (so the test can see a leak when there is one) while the plain export must not.
func TestFaultsSecretsNeverLeak(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	ctx := t.Context()
	ns := c.Namespace(t)
	e := c.MustCreateEtcd(t, ns, mtlsSpec(c))
	doc, clientKey, token := credentialedKubeconfig(ctx, t, c, ns)
	needles := []needle{
		pemNeedle("etcd server key", e.TLS.ServerKey), pemNeedle("etcd peer key", e.TLS.PeerKey),
		pemNeedle("etcd client key", e.TLS.ClientKey), pemNeedle("kubeconfig client key", clientKey),
		tokenNeedle("kubeconfig token", token),
	}

	g := newGoRunner(t, p, "etcd-rollout-security", leakProgram(ns))
	stack := g.stack
	require.NoError(t, stack.SetAllConfig(ctx, auto.ConfigMap{
		"kubeconfig":  {Value: doc, Secret: true},
		"versionHash": {Value: "1"},
	}))
	var found []string
	keep := filepath.Join(os.TempDir(), "etcd-rollout-"+ns)
	check := func(step string, cp capture) {
		// Kept for inspection when the test fails: the logs hold the (test-only) credentials, so they are
		// written with owner-only permissions and removed on success.
		_ = os.MkdirAll(keep, 0o700)
		for where, text := range cp.all() {
			_ = os.WriteFile(filepath.Join(keep, strings.ReplaceAll(step+"-"+where, " ", "_")), []byte(text), 0o600)
		}
		for where, text := range cp.all() {
			found = append(found, leaks(step+" "+where, text, needles)...)
		}
	}

	// 1. adopt the StatefulSet, then 2. a template change rolled through the kubeconfig input with mTLS.
	first := debugUp(t, stack)
	require.Empty(t, first.err, "first up:\n%s", first.stdout)
	check("first up", first)
	rev, err := e.SetTemplateAnnotation(ctx, "example.etcd-rollout/pod-revision", "2")
	require.NoError(t, err)
	require.NoError(t, stack.SetConfig(ctx, "versionHash", auto.ConfigValue{Value: "2"}))
	roll := debugUp(t, stack)
	require.Empty(t, roll.err, "rolling up:\n%s", roll.stdout)
	check("rolling up", roll)
	assert.Contains(t, roll.outputs, rev, "the rollout reached the new revision")
	assert.Contains(t, roll.outputs, `"etcd-2","etcd-1","etcd-0"`, "every member rolled")
	// The debug log really is the debug log, providers included: otherwise a clean grep proves nothing.
	assert.Greater(t, len(roll.stderr), 20_000, "-v=9 logs are long")
	assert.Contains(t, roll.stderr, "pulumi-resource-etcd-rollout", "the provider's logs flow into the capture")

	// 3. an up that fails while reading the key material: the CA file given as the key.
	require.NoError(t, stack.SetConfig(ctx, "keyFile", auto.ConfigValue{Value: memberapi.DefaultTLSDir + "/" + memberapi.SecretCA}))
	require.NoError(t, stack.SetConfig(ctx, "versionHash", auto.ConfigValue{Value: "3"}))
	_, err = e.SetTemplateAnnotation(ctx, "example.etcd-rollout/pod-revision", "3")
	require.NoError(t, err)
	badKey := debugUp(t, stack)
	require.NotEmpty(t, badKey.err, "an up with a wrong key file fails")
	assert.Contains(t, badKey.stdout+badKey.err, "do not form a valid key pair")
	check("up with a wrong key file", badKey)

	// 4. an up whose kubeconfig document does not parse, with the token in it.
	require.NoError(t, stack.SetConfig(ctx, "keyFile", auto.ConfigValue{Value: memberapi.DefaultTLSDir + "/" + memberapi.SecretClientKey}))
	broken := strings.Replace(doc, "users:", "users: [\n  token: "+token+"\n", 1)
	require.NoError(t, stack.SetConfig(ctx, "kubeconfig", auto.ConfigValue{Value: broken, Secret: true}))
	badDoc := debugUp(t, stack)
	require.NotEmpty(t, badDoc.err, "an up with an unreadable kubeconfig fails")
	check("up with a broken kubeconfig", badDoc)
	require.NoError(t, stack.SetConfig(ctx, "kubeconfig", auto.ConfigValue{Value: doc, Secret: true}))

	// The engine's own trail in the cluster.
	found = append(found, leaks("Kubernetes Events of "+ns, namespaceEvents(ctx, t, c, ns), needles)...)

	// The state: `pulumi stack export` (what a plain state holds) must not reveal the material; the
	// Automation API's Export runs it with --show-secrets, which must show the kubeconfig input, so the needles
	// do find the material where it is.
	ws := stack.Workspace()
	cmd := exec.CommandContext(ctx, p.pulumi, "stack", "export", "--stack", stack.Name(), "--non-interactive")
	cmd.Dir = ws.WorkDir()
	cmd.Env = os.Environ()
	for k, v := range ws.GetEnvVars() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	plain, err := cmd.Output()
	require.NoError(t, err, "pulumi stack export")
	found = append(found, leaks("pulumi stack export", string(plain), needles)...)
	assert.Contains(t, string(plain), "4dabf18193072939515e22adb298388d", "the kubeconfig input is a secret in state")
	shown, err := stack.Export(ctx)
	require.NoError(t, err)
	assert.NotEmpty(t, leaks("", string(shown.Deployment), needles[len(needles)-1:]),
		"stack export --show-secrets reveals the kubeconfig: the needles find the material where it is")

	// Every file the runs left: the file backend's state and history, the Pulumi home, the project dir.
	for _, dir := range []string{strings.TrimPrefix(ws.GetEnvVars()["PULUMI_BACKEND_URL"], "file://"), ws.GetEnvVars()["PULUMI_HOME"], ws.WorkDir()} {
		found = append(found, leaksInTree(t, dir, needles)...)
	}
	assert.Empty(t, found, "secret material leaked")
	if t.Failed() {
		t.Logf("captured logs kept in %s", keep)
	} else {
		_ = os.RemoveAll(keep)
	}
	t.Logf("grepped %d needles through %d bytes of debug logs, engine events, errors, outputs, Events, state and files: no leak",
		len(needles), len(first.stderr)+len(roll.stderr)+len(badKey.stderr)+len(badDoc.stderr))
}
