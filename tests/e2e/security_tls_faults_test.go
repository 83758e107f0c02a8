//go:build e2e && faults

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// verificationSwitch matches any name that could turn certificate verification down: the usual spellings of
// "insecure", "skip verify", "no verify", "trust any", "tls verify".
var verificationSwitch = regexp.MustCompile(`(?i)insecure|skip.?(tls|verif|ca|cert)|no.?verif|verify|trust.?(any|all)|allow.?(any|untrusted)`)

// fieldNames lists every field of a struct type, nested structs included, by Go name and struct tag.
func fieldNames(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		out = append(out, prefix+f.Name+" "+string(f.Tag))
		if f.Type.PkgPath() == t.PkgPath() || strings.Contains(f.Type.String(), "TLS") {
			out = append(out, fieldNames(f.Type, prefix+f.Name+".")...)
		}
	}
	return out
}

// No setting turns member certificate verification off, anywhere a user can configure the rollout: the
// engine's Config, TLSFiles and Options, the provider's Rollout and EtcdRollingUpgrade inputs (their struct
// tags), every property
// of schema.json (what the SDKs expose), every CLI flag; and no non-test source of the engine, provider or
// CLI sets InsecureSkipVerify (except where it hands verification to VerifyConnection) or reads an environment
// variable that could. (That verification itself works
// is TestMemberTLSVerification in rollout/ and TestFaultsTLSWrongCARefused below.)
func TestFaultsNoOptionDisablesTLSVerification(t *testing.T) {
	p := repoPaths(t)
	var names []string
	for _, typ := range []reflect.Type{reflect.TypeOf(rollout.Config{}), reflect.TypeOf(rollout.TLSFiles{}),
		reflect.TypeOf(rollout.Options{})} {
		names = append(names, fieldNames(typ, typ.Name()+".")...)
	}
	require.Greater(t, len(names), 15, "the walk found the engine's settings")

	schema, err := os.ReadFile(filepath.Join(p.root, "schema.json"))
	require.NoError(t, err)
	for _, m := range regexp.MustCompile(`"([A-Za-z0-9_]+)"\s*:\s*\{`).FindAllStringSubmatch(string(schema), -1) {
		names = append(names, "schema.json property "+m[1])
	}

	cli := filepath.Join(p.root, "bin", "etcd-rollout")
	_, err = os.Stat(cli)
	require.NoError(t, err, "%s is missing: run make etcd-rollout (make test-faults does)", cli)
	for _, sub := range []string{"run", "plan", "status", "unlock"} {
		help, err := exec.Command(cli, sub, "--help").CombinedOutput()
		require.NoError(t, err, "%s", help)
		require.Contains(t, string(help), "--ca-file", "the help lists the TLS flags")
		for _, m := range regexp.MustCompile(`--([a-z0-9-]+)`).FindAllStringSubmatch(string(help), -1) {
			names = append(names, "etcd-rollout "+sub+" --"+m[1])
		}
	}
	for _, n := range names {
		assert.NotRegexp(t, verificationSwitch, n, "an option that could disable TLS verification")
	}

	for _, dir := range []string{"rollout", "provider", "cmd"} {
		require.NoError(t, filepath.WalkDir(filepath.Join(p.root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if strings.Contains(string(src), "InsecureSkipVerify") {
				// The one allowed use hands verification to VerifyConnection, which checks the chain against the
				// configured CA and the member's own names (rollout/internal/member/membertls.go); it skips nothing.
				rel, _ := filepath.Rel(p.root, path)
				assert.Equal(t, filepath.Join("rollout", "internal", "member", "membertls.go"), rel, "%s sets InsecureSkipVerify", path)
				assert.Contains(t, string(src), "cfg.VerifyConnection = verifyMemberCertificate(", "%s: InsecureSkipVerify without the check that replaces it", path)
			}
			// The provider's inputs, as their struct tags name them (schema.json has them too).
			for _, m := range regexp.MustCompile("`pulumi:\"([^\",]+)").FindAllStringSubmatch(string(src), -1) {
				assert.NotRegexp(t, verificationSwitch, m[1], "%s: input %s could disable verification", path, m[1])
			}
			for _, m := range regexp.MustCompile(`Getenv\("([^"]+)"\)`).FindAllStringSubmatch(string(src), -1) {
				assert.NotRegexp(t, verificationSwitch, m[1], "%s reads an environment variable that could disable verification", path)
			}
			return nil
		}))
	}
}

// A member that presents a certificate from another CA than the one in caFile is never talked to, let alone
// restarted: with the cluster's Secret holding a foreign CA, a rollout with a pending template change is
// refused and changes nothing; with the right CA back, the same engine plans the rollout (so it was the CA).
func TestFaultsTLSWrongCARefused(t *testing.T) {
	c := harness.Connect(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	ns := c.Namespace(t)
	spec := harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", TLS: true, Readiness: memberapi.ReadyOnProbe,
		GracePeriod: 5 * time.Second, NodeName: c.NodeName}
	e, err := c.CreateEtcd(ctx, ns, spec)
	require.NoError(t, err)
	rev, err := e.SetTemplateAnnotation(ctx, "example.etcd-rollout/pod-revision", "2")
	require.NoError(t, err)

	foreign, err := harness.GenerateTLS(e.Spec, ns) // same names, another CA
	require.NoError(t, err)
	setCA := func(ca []byte) {
		s, err := c.Kube.CoreV1().Secrets(ns).Get(ctx, e.Spec.SecretName(), metav1.GetOptions{})
		require.NoError(t, err)
		s.Data[memberapi.SecretCA] = ca
		_, err = c.Kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	engine := func() *rollout.Engine {
		cfg := rollout.NewConfig("etcd", ns, "etcd-headless")
		cfg.TLS = &rollout.TLSFiles{CAFile: memberapi.DefaultTLSDir + "/" + memberapi.SecretCA,
			CertFile: memberapi.DefaultTLSDir + "/" + memberapi.SecretClientCert, KeyFile: memberapi.DefaultTLSDir + "/" + memberapi.SecretClientKey}
		cfg.Cooldown, cfg.ReadyTimeout, cfg.HealthTimeout = 0, 60*time.Second, 20*time.Second
		en, err := rollout.New(cfg, rollout.Options{RestConfig: c.Config})
		require.NoError(t, err)
		t.Cleanup(func() { _ = en.Close() })
		return en
	}
	uids := func() []string {
		var out []string
		for i := 0; i < e.Spec.Replicas; i++ {
			pod, err := e.Pod(ctx, i)
			require.NoError(t, err)
			out = append(out, string(pod.UID)+"@"+pod.Labels["controller-revision-hash"])
		}
		return out
	}
	before := uids()

	setCA(foreign.CA)
	res, err := engine().Run(ctx)
	require.Error(t, err, "a rollout must refuse members whose certificates its CA did not sign")
	require.ErrorIs(t, err, rollout.ErrBlocked)
	t.Logf("refused: %v", err)
	assert.Contains(t, err.Error(), "the member's TLS certificate was refused", "the error says why")
	assert.Empty(t, res.MembersRolled)
	assert.Equal(t, before, uids(), "no pod was restarted")
	sts, err := e.StatefulSet(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, *sts.Spec.Replicas, *sts.Spec.UpdateStrategy.RollingUpdate.Partition, "the partition is locked")

	setCA(e.TLS.CA)
	_, plan, err := engine().Plan(ctx)
	require.NoError(t, err, "with the cluster's CA the same rollout plans")
	assert.Len(t, plan.Roll, e.Spec.Replicas, "every member would roll to %s", rev)
}
