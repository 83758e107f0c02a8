// Package harness connects tests, benchmarks and the demo to the local cluster that `make cluster-up` runs
// (tests/cluster): a real kube-apiserver and StatefulSet controller, a kwok node, and real etcd members
// behind the pods of the StatefulSets it creates (the member daemon, cmd/etcd-members). It creates etcd
// clusters from the same template as tests/manifests, exposes the daemon's fault hooks and runs load.
package harness

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// RunDirEnv overrides where the cluster's run dir is (default: tests/.run of this repository).
const RunDirEnv = "ETCD_ROLLOUT_RUN_DIR"

// Cluster is a connection to the running local cluster.
type Cluster struct {
	RunDir     string
	Kubeconfig string
	NodeName   string
	Config     *rest.Config
	Kube       kubernetes.Interface
	Members    *memberapi.Client
	// S3 is the S3-compatible store the cluster scripts start beside it (versitygw).
	S3 S3
	// GCS is the Google Cloud Storage emulator the cluster scripts start beside it (fake-gcs-server).
	GCS GCS
	// AzureBlob is the Azure Blob Storage emulator the cluster scripts start beside it (Azurite).
	AzureBlob AzureBlob
}

// Connect connects t to the running cluster and fails t (never skips it) when the cluster is not up.
func Connect(t testing.TB) *Cluster {
	t.Helper()
	c, err := Open("")
	if err != nil {
		t.Fatalf("local cluster: %v", err)
	}
	return c
}

// Open connects to the cluster whose run dir is runDir ("" = RunDir()).
func Open(runDir string) (*Cluster, error) {
	if runDir == "" {
		var err error
		if runDir, err = RunDir(); err != nil {
			return nil, err
		}
	}
	env, err := readEnvFile(filepath.Join(runDir, "cluster.env"))
	if err != nil {
		return nil, fmt.Errorf("the local cluster is not up (run make cluster-up): %w", err)
	}
	c := &Cluster{RunDir: runDir, Kubeconfig: env["KUBECONFIG"], NodeName: env["NODE_NAME"],
		Members:   memberapi.NewClient(env["MEMBERS_URL"]),
		S3:        S3{Endpoint: env["S3_ENDPOINT"], Bucket: env["S3_BUCKET"], credentials: env["S3_CREDENTIALS"]},
		GCS:       GCS{EmulatorHost: env["GCS_EMULATOR_HOST"], Bucket: env["GCS_BUCKET"]},
		AzureBlob: AzureBlob{Host: env["AZURE_BLOB_HOST"], Container: env["AZURE_CONTAINER"]}}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return nil, fmt.Errorf("loading %s (run make cluster-up): %w", c.Kubeconfig, err)
	}
	c.Config.QPS, c.Config.Burst = 50, 100
	if c.Kube, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, fmt.Errorf("kube client: %w", err)
	}
	if _, err := c.Kube.Discovery().ServerVersion(); err != nil {
		return nil, fmt.Errorf("the local cluster does not answer (run make cluster-up; tests/cluster/status.sh tells what is down): %w", err)
	}
	return c, nil
}

// RunDir finds the run dir: $ETCD_ROLLOUT_RUN_DIR, else tests/.run under the repository root (the nearest
// directory above the working directory that holds go.mod), which is where go test runs from.
func RunDir() (string, error) {
	if d := os.Getenv(RunDirEnv); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "tests", ".run"), nil
}

// mainModule is the repository's root module. tests/e2e, bench and the examples are modules of their own
// below it, so the nearest go.mod is not always the repository's.
const mainModule = "module github.com/etcd-rollout/pulumi-etcd-rollout\n"

// RepoRoot is the nearest directory at or above the working directory whose go.mod is the main module's.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(mod), mainModule) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of github.com/etcd-rollout/pulumi-etcd-rollout above the working directory; set %s", RunDirEnv)
		}
		dir = parent
	}
}

// readEnvFile reads KEY=VALUE lines, skipping comments.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out, sc.Err()
}
