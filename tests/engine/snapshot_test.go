//go:build integration

package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// `etcd-rollout snapshot` against the local cluster's real etcd members, through the port-forward: the
// snapshot comes from the leader, holds every write acknowledged before it, is stored 0600 with its record
// next to it, and a URL that carries a credential is refused as bad input (exit 2) before etcd is asked.
func TestCLISnapshotOfTheLocalCluster(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	f := newFixture(t, httpSpec)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	putKeys(ctx, t, f.etcd, 300)
	written, err := f.client().Put(ctx, "/snapshot/last", "acknowledged")
	require.NoError(t, err)
	f.must.PlaceLeader(2)

	dir := filepath.Join(t.TempDir(), "backups")
	cli := func(args ...string) (string, string, int) { return runCLI(ctx, t, bin, f, nil, args...) }
	out, log, code := cli("snapshot", "--to", dir, "-o", "json")
	require.Equal(t, 0, code, "%s\n%s", out, log)
	var doc struct {
		Kind     string                 `json:"kind"`
		Snapshot rollout.SnapshotRecord `json:"snapshot"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	rec := doc.Snapshot
	assert.Equal(t, "Snapshot", doc.Kind)
	assert.Equal(t, "etcd-2", rec.Member, "taken from the leader")
	assert.GreaterOrEqual(t, rec.Revision, written.Header.Revision, "holds the last acknowledged write")
	assert.Contains(t, log, "verified", "progress went to stderr, the document alone to stdout")

	file := strings.TrimPrefix(rec.Location, "file://")
	require.True(t, strings.HasPrefix(file, dir+"/"+f.etcd.Namespace+"/"+f.etcd.Spec.Name+"/"), file)
	body, err := os.ReadFile(file)
	require.NoError(t, err)
	sum := sha256.Sum256(body)
	assert.Equal(t, rec.SHA256, hex.EncodeToString(sum[:]))
	assert.Equal(t, rec.Size, int64(len(body)))
	for _, p := range []string{file, file + ".json"} {
		info, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), p)
	}

	out, log, code = cli("snapshot", "--to", "s3://bucket?aws_secret_access_key=x")
	assert.Equal(t, 2, code, "%s\n%s", out, log)
	assert.Contains(t, log, "looks like a credential")
	assert.NotContains(t, out+log, "snapshot: taking", "etcd was not asked")
}

// The same CLI to gs:// and azblob://, the Google Cloud Storage and Azure Blob Storage emulators the cluster
// scripts start (fake-gcs-server, Azurite): the snapshot goes through gocloud.dev's code for each, pointed at
// the emulator by the environment (STORAGE_EMULATOR_HOST; the account in AZURE_STORAGE_ACCOUNT and _KEY) as a
// user's credentials would be; it is stored, read back and verified, and the bytes in the bucket are the
// verified ones, with the record next to them.
func TestCLISnapshotToGCSAndAzureBlob(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	f := newFixture(t, httpSpec)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	putKeys(ctx, t, f.etcd, 100)
	f.c.GCS.UseEmulator(t)
	f.c.AzureBlob.UseCredentials(t)
	for _, store := range []struct {
		to  string
		env []string
	}{
		{f.c.GCS.URL(t, f.etcd.Namespace), f.c.GCS.Env()},
		{f.c.AzureBlob.URL(t, f.etcd.Namespace), f.c.AzureBlob.Env()},
	} {
		out, log, code := runCLI(ctx, t, bin, f, store.env, "snapshot", "--to", store.to, "-o", "json")
		require.Equal(t, 0, code, "%s: %s\n%s", store.to, out, log)
		var doc struct {
			Snapshot rollout.SnapshotRecord `json:"snapshot"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
		requireStored(ctx, t, store.to, &doc.Snapshot)
	}
}

// runCLI runs the CLI binary bin on f's StatefulSet with args, and env added to this process's environment; it
// returns its stdout, its stderr and its exit code.
func runCLI(ctx context.Context, t *testing.T, bin string, f *fixture, env []string, args ...string) (string, string, int) {
	t.Helper()
	args = append(args, "--sts", f.etcd.Spec.Name, "-n", f.etcd.Namespace, "--kubeconfig", f.c.Kubeconfig)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return stdout.String(), stderr.String(), exit.ExitCode()
	}
	require.NoError(t, err)
	return stdout.String(), stderr.String(), 0
}
