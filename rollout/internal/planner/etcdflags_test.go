package planner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/etcdflags"
)

func TestEtcdSettingsReadsFlagsAndVariables(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    corev1.Container
		want []string
	}{
		{name: "command and args, both flag forms",
			c:    corev1.Container{Command: []string{"etcd"}, Args: []string{"--name=$(POD_NAME)", "--data-dir", "/var/lib/etcd", "-log-level=info", "--auto-tls"}},
			want: []string{"--name", "--data-dir", "--log-level", "--auto-tls"}},
		{name: "a shell script: the words after etcd",
			c: corev1.Container{Command: []string{"/bin/sh", "-c"}, Args: []string{
				"set -e; exec etcd --name ${HOSTNAME} --feature-gates='StopGRPCServiceOnDefrag=true' \\\n --initial-cluster-state existing"}},
			want: []string{"--name", "--feature-gates", "--initial-cluster-state"}},
		{name: "a shell script run with sh -ec (options combined), etcdctl before etcd",
			c: corev1.Container{Command: []string{"/bin/sh", "-ec"}, Args: []string{
				"STATE=new\nif etcdctl endpoint health; then STATE=existing; fi\nexec etcd --name=$(POD_NAME) --data-dir=/var/lib/etcd/data \\\n  --initial-cluster-state=\"$STATE\""}},
			want: []string{"--name", "--data-dir", "--initial-cluster-state"}},
		{name: "a shell script in the command",
			c:    corev1.Container{Command: []string{"sh", "-c", "exec /usr/local/bin/etcd --log-format=json && echo done --ignored"}},
			want: []string{"--log-format"}},
		{name: "ETCD_ variables, not ETCDCTL_ nor ETCD_UNSUPPORTED_ARCH",
			c: corev1.Container{Command: []string{"etcd"}, Env: []corev1.EnvVar{
				{Name: "ETCD_LOG_FORMAT", Value: "json"}, {Name: "ETCDCTL_API", Value: "3"}, {Name: "ETCD_UNSUPPORTED_ARCH", Value: "arm"}, {Name: "POD_NAME"}}},
			want: []string{"ETCD_LOG_FORMAT"}},
		{name: "a repeated flag counts once",
			c:    corev1.Container{Command: []string{"etcd", "--listen-client-urls=http://a", "--listen-client-urls=http://b"}},
			want: []string{"--listen-client-urls"}},
		{name: "no flags", c: corev1.Container{Image: "registry.k8s.io/etcd:3.6.8-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range EtcdSettings(&tc.c) {
				got = append(got, s.As)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestEtcdFlagValuesReadsWhatEtcdGets(t *testing.T) {
	secret := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}
	for _, tc := range []struct {
		name string
		c    corev1.Container
		want map[string]string
	}{
		{name: "both flag forms and a flag alone",
			c: corev1.Container{Command: []string{"etcd"}, Args: []string{
				"--listen-client-urls", "https://0.0.0.0:2379", "--cert-file=/tls/server.crt", "--auto-tls", "--name=a"}},
			want: map[string]string{"listen-client-urls": "https://0.0.0.0:2379", "cert-file": "/tls/server.crt", "auto-tls": "true", "name": "a"}},
		{name: "a shell script, quotes stripped",
			c: corev1.Container{Command: []string{"/bin/sh", "-c"}, Args: []string{
				"exec etcd --listen-client-urls 'https://0.0.0.0:2379' --client-cert-auth"}},
			want: map[string]string{"listen-client-urls": "https://0.0.0.0:2379", "client-cert-auth": "true"}},
		{name: "a flag wins over its variable; a variable from a Secret has no value here",
			c: corev1.Container{Command: []string{"etcd", "--cert-file=/flag.crt"}, Env: []corev1.EnvVar{
				{Name: "ETCD_CERT_FILE", Value: "/env.crt"}, {Name: "ETCD_KEY_FILE", Value: "/env.key"}, {Name: "ETCD_TRUSTED_CA_FILE", ValueFrom: secret}}},
			want: map[string]string{"cert-file": "/flag.crt", "key-file": "/env.key"}},
		{name: "the last of a repeated flag, nothing after --",
			c:    corev1.Container{Command: []string{"etcd", "--listen-client-urls=http://a", "--listen-client-urls=https://b", "--", "--cert-file=x"}},
			want: map[string]string{"listen-client-urls": "https://b"}},
		{name: "no flags", c: corev1.Container{Image: "registry.k8s.io/etcd:3.6.8-0"}, want: map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, EtcdFlagValues(&tc.c))
		})
	}
}

func TestCheckFlagsAgainstTheTargetVersion(t *testing.T) {
	v35, v36, v37 := EtcdVersion{3, 5, 35}, EtcdVersion{3, 6, 8}, EtcdVersion{3, 7, 0}
	flag := func(name string) EtcdSetting { return EtcdSetting{Name: name, As: "--" + name} }
	for _, tc := range []struct {
		name     string
		settings []EtcdSetting
		target   EtcdVersion
		refused  []string // as spelled, in order; empty: accepted
		contains []string
	}{
		{name: "3.6 -> 3.5: feature gates, log format, the v3 discovery family",
			settings: []EtcdSetting{flag("name"), flag("feature-gates"), flag("log-format"), flag("discovery-token"), flag("discovery-endpoints")},
			target:   v35, refused: []string{"--feature-gates", "--log-format", "--discovery-token", "--discovery-endpoints"},
			contains: []string{"etcd 3.5 does not accept --feature-gates", "checked against etcd 3.5.35's flags"}},
		{name: "3.6 -> 3.5: a flag 3.6 renamed is named as 3.5 calls it",
			settings: []EtcdSetting{flag("compaction-batch-limit")}, target: v35,
			refused: []string{"--compaction-batch-limit"}, contains: []string{"--compaction-batch-limit (3.5 calls it --experimental-compaction-batch-limit)"}},
		{name: "3.5's experimental names still start 3.6",
			settings: []EtcdSetting{flag("experimental-compaction-batch-limit"), flag("experimental-corrupt-check-time")}, target: v36},
		{name: "3.5 -> 3.6: the flags 3.6 removed",
			settings: []EtcdSetting{flag("enable-v2"), flag("experimental-enable-v2v3"), flag("proxy")}, target: v36,
			refused: []string{"--enable-v2", "--experimental-enable-v2v3", "--proxy"}, contains: []string{"etcd 3.6 does not accept --enable-v2"}},
		{name: "a variable is refused too: etcd would start without it",
			settings: []EtcdSetting{{Name: "log-format", As: "ETCD_LOG_FORMAT", FromEnv: true}}, target: v35,
			refused: []string{"ETCD_LOG_FORMAT"}, contains: []string{"ETCD_LOG_FORMAT (etcd would start without it)"}},
		{name: "a variable no release reads is no etcd setting",
			settings: []EtcdSetting{{Name: "snapshot-dir", As: "ETCD_SNAPSHOT_DIR", FromEnv: true}}, target: v36},
		{name: "flags both accept", settings: []EtcdSetting{flag("name"), flag("discovery-srv"), flag("listen-client-urls"), flag("snapshot-count")}, target: v35},
		{name: "a minor without a table is not judged", settings: []EtcdSetting{flag("no-such-flag")}, target: v37},
		{name: "an unknown flag on a pinned minor", settings: []EtcdSetting{flag("no-such-flag")}, target: v36, refused: []string{"--no-such-flag"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckFlags(tc.settings, tc.target)
			if len(tc.refused) == 0 {
				require.NoError(t, err)
				return
			}
			var fe *FlagsError
			require.True(t, errors.As(err, &fe), "a *FlagsError: %v", err)
			var got []string
			for _, r := range fe.Refusals {
				got = append(got, r.Setting.As)
			}
			assert.Equal(t, tc.refused, got)
			for _, s := range tc.contains {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

// The engine refuses a template flag the target does not accept before its first disruption, as a version
// path error (it does not pass by waiting), and judges versions by what the members report.
func TestCheckVersionPathsRefusesFlagsAndReadsLiveVersions(t *testing.T) {
	members := func(image, version string) []MemberState {
		ms := make([]MemberState, 3)
		for i := range ms {
			ms[i] = MemberState{Ordinal: i, Pod: "etcd-" + strconv.Itoa(i), Image: image, Revision: "old", Reachable: version != "", ServerVersion: version}
		}
		return ms
	}
	for _, tc := range []struct {
		name     string
		st       ClusterState
		wantErr  []error
		contains string
	}{
		{name: "a 3.5 template with --feature-gates",
			st: ClusterState{UpdateRevision: "new", TemplateImage: "registry.k8s.io/etcd:3.5.35-0",
				TemplateSettings: []EtcdSetting{{Name: "feature-gates", As: "--feature-gates"}}, Members: members("registry.k8s.io/etcd:3.5.35-0", "3.5.35")},
			wantErr: []error{ErrBlocked, ErrVersionPath, ErrFlagRefused}, contains: "etcd 3.5 does not accept --feature-gates"},
		{name: "an untagged image: the version its members report",
			st: ClusterState{UpdateRevision: "new", TemplateImage: "etcd@sha256:abc",
				TemplateSettings: []EtcdSetting{{Name: "enable-v2", As: "--enable-v2"}}, Members: members("etcd@sha256:abc", "3.6.8")},
			wantErr: []error{ErrBlocked, ErrFlagRefused}, contains: "etcd 3.6 does not accept --enable-v2"},
		{name: "an image tag that lies: the member's own word wins",
			st:      ClusterState{UpdateRevision: "new", TemplateImage: "registry.k8s.io/etcd:3.6.8-0", Members: members("registry.k8s.io/etcd:3.5.35-0", "3.5.21")},
			wantErr: []error{ErrBlocked, ErrVersionPath}, contains: "etcd 3.5.21 by its own word"},
		{name: "members down: their tags are the hint",
			st:      ClusterState{UpdateRevision: "new", TemplateImage: "registry.k8s.io/etcd:3.6.8-0", Members: members("registry.k8s.io/etcd:3.5.21-0", "")},
			wantErr: []error{ErrBlocked, ErrVersionPath}, contains: "not answering: version read from the tag"},
		{name: "flags the target accepts",
			st: ClusterState{UpdateRevision: "new", TemplateImage: "registry.k8s.io/etcd:3.6.8-0",
				TemplateSettings: []EtcdSetting{{Name: "feature-gates", As: "--feature-gates"}}, Members: members("registry.k8s.io/etcd:3.5.35-0", "3.5.35")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckVersionPaths(tc.st)
			if tc.wantErr == nil {
				require.NoError(t, err)
				return
			}
			for _, want := range tc.wantErr {
				assert.ErrorIs(t, err, want)
			}
			assert.Contains(t, err.Error(), tc.contains)
		})
	}
}

// toolsBin is where tools/build.sh puts the pinned etcd binaries.
func toolsBin(t *testing.T) string {
	if dir := os.Getenv("TOOLS_DIR"); dir != "" {
		return filepath.Join(dir, "bin")
	}
	abs, err := filepath.Abs(filepath.Join("..", "..", "..", ".tools", "bin"))
	require.NoError(t, err)
	return abs
}

// The flag table (etcdflags_table.go, made by go generate) must match the pinned binaries: every flag it
// lists for a minor is accepted by that release's binary, and every flag either release's table or help
// text names that the binary accepts is in its list. It fails when the pins move and nobody regenerates.
func TestEtcdFlagTableMatchesThePinnedBinaries(t *testing.T) {
	bin := toolsBin(t)
	binaries := map[string]string{"3.5": filepath.Join(bin, "etcd-v3.5"), "3.6": filepath.Join(bin, "etcd")}
	ctx := context.Background()
	var candidates []string
	for minor, binary := range binaries {
		if _, err := os.Stat(binary); err != nil {
			if testing.Short() {
				t.Skipf("%s is not built (make tools); skipped in -short", binary)
			}
			t.Fatalf("etcd %s binary %s is not built: run `make tools` (tools/build.sh cluster)", minor, binary)
		}
		help, err := etcdflags.HelpFlags(ctx, binary)
		require.NoError(t, err)
		candidates = append(append(candidates, help...), etcdFlags[minor].Flags...)
	}
	for minor, binary := range binaries {
		t.Run(minor, func(t *testing.T) {
			version, err := etcdflags.Version(ctx, binary)
			require.NoError(t, err)
			require.Equal(t, etcdFlags[minor].Release, version, "the table was probed from another release: run go generate ./rollout")
			accepted, err := etcdflags.Accepted(ctx, binary, candidates)
			require.NoError(t, err)
			assert.Equal(t, etcdFlags[minor].Flags, accepted, "etcd %s accepts other flags than the table says: run go generate ./rollout", version)
		})
	}
}
