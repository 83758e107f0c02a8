package harness

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
)

// S3 is the S3-compatible server tests/cluster/up.sh starts beside the cluster (versitygw, pinned in
// tools/versitygw), with one bucket. Snapshots go to it through the same s3:// URL and gocloud.dev code as to
// a user's bucket; its credentials come, as a user's do, from the environment, never from the URL.
type S3 struct {
	Endpoint, Bucket string
	credentials      string // the 0600 file of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY up.sh wrote
}

// URL is an s3:// destination in the bucket under prefix: the endpoint and path-style addressing a
// self-hosted store needs, and no credential.
func (s S3) URL(t testing.TB, prefix string) string {
	t.Helper()
	if s.Endpoint == "" {
		t.Fatal("the local cluster has no S3 server (an older tests/cluster/up.sh started it): run make cluster-down cluster-up")
	}
	q := url.Values{"endpoint": {s.Endpoint}, "use_path_style": {"true"}, "region": {"us-east-1"}, "prefix": {prefix + "/"}}
	return fmt.Sprintf("s3://%s?%s", s.Bucket, q.Encode())
}

// Env is the store's credentials as environment entries, for a process the test starts (the CLI, pulumi).
func (s S3) Env(t testing.TB) []string {
	t.Helper()
	env, err := readEnvFile(s.credentials)
	if err != nil {
		t.Fatalf("reading the S3 server's credentials: %v", err)
	}
	return []string{"AWS_ACCESS_KEY_ID=" + env["AWS_ACCESS_KEY_ID"], "AWS_SECRET_ACCESS_KEY=" + env["AWS_SECRET_ACCESS_KEY"]}
}

var useS3Credentials sync.Once

// UseCredentials puts the store's credentials in this test process's environment, where the AWS SDK behind
// gocloud.dev reads them, as it would in a user's shell. Every test of the process shares the one store, so
// it is set once and never unset (t.Setenv cannot be used beside t.Parallel).
func (s S3) UseCredentials(t testing.TB) {
	t.Helper()
	env := s.Env(t)
	useS3Credentials.Do(func() {
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			_ = os.Setenv(k, v)
		}
	})
}
