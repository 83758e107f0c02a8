package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// RestartAPIServer stops the cluster's kube-apiserver, keeps it away for downFor, and starts it again with
// the same flags (tests/cluster/restart-apiserver.sh), returning once it answers /readyz. Every client of
// the cluster sees it go: tests that call it should not run alongside others of their package.
func (c *Cluster) RestartAPIServer(ctx context.Context, downFor time.Duration) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "tests", "cluster", "restart-apiserver.sh"),
		strconv.FormatFloat(downFor.Seconds(), 'f', 1, 64))
	cmd.Env = append(os.Environ(), "RUN_DIR="+c.RunDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("restarting kube-apiserver: %w\n%s", err, out)
	}
	return nil
}
