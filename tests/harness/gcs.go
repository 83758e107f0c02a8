package harness

import (
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
)

// GCS is the Google Cloud Storage emulator tests/cluster/up.sh starts beside the cluster (fake-gcs-server,
// pinned in tools/fake-gcs-server), with one bucket. Snapshots go to it through the same gs:// URL and
// gocloud.dev code as to a user's bucket; the Storage client behind that code is pointed at it the way
// Google documents for emulators, by STORAGE_EMULATOR_HOST, and asks for no credential then.
type GCS struct {
	EmulatorHost, Bucket string
}

// URL is a gs:// destination in the bucket under prefix: nothing but the bucket and the prefix, as a user's
// would be.
func (g GCS) URL(t testing.TB, prefix string) string {
	t.Helper()
	if g.EmulatorHost == "" {
		t.Fatal("the local cluster has no GCS emulator (an older tests/cluster/up.sh started it): run make cluster-down cluster-up")
	}
	return fmt.Sprintf("gs://%s?%s", g.Bucket, url.Values{"prefix": {prefix + "/"}}.Encode())
}

// Env points a process the test starts (the CLI, pulumi) at the emulator.
func (g GCS) Env() []string { return []string{"STORAGE_EMULATOR_HOST=" + g.EmulatorHost} }

var useGCSEmulator sync.Once

// UseEmulator points this test process's gs:// at the emulator. Every test of the process shares the one
// emulator, so it is set once and never unset (t.Setenv cannot be used beside t.Parallel).
func (g GCS) UseEmulator(t testing.TB) {
	t.Helper()
	useGCSEmulator.Do(func() { _ = os.Setenv("STORAGE_EMULATOR_HOST", g.EmulatorHost) })
}
