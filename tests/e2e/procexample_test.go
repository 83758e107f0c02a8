//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// resultMarker starts the one line a driver prints with its JSON result.
const resultMarker = "E2E-RESULT "

// procRunner runs a TypeScript or Python example through its language's Automation API, in a fresh process
// per operation (a Node or Python program is loaded once per process, as `pulumi up` would load it).
type procRunner struct {
	t       *testing.T
	argv    []string          // the driver command, before the operation
	env     map[string]string // pulumiEnv plus the driver's settings
	workDir string
}

func newProcRunner(t *testing.T, p paths, argv []string, settings map[string]string) *procRunner {
	t.Helper()
	env, backend := pulumiEnv(t, p)
	plugins, err := json.Marshal(pluginSettings(p))
	require.NoError(t, err)
	env["E2E_BACKEND"] = backend
	env["E2E_PLUGINS"] = string(plugins)
	env["E2E_WORK_DIR"] = t.TempDir()
	for k, v := range settings {
		env[k] = v
	}
	return &procRunner{t: t, argv: argv, env: env, workDir: env["E2E_WORK_DIR"]}
}

func (r *procRunner) up(ctx context.Context, config map[string]string) (result, error) {
	return r.run(ctx, "up", config)
}

func (r *procRunner) preview(ctx context.Context, config map[string]string) (result, error) {
	return r.run(ctx, "preview", config)
}

func (r *procRunner) destroy(ctx context.Context) error {
	_, err := r.run(ctx, "destroy", nil)
	return err
}

// run starts the driver in its own process group. Cancelling ctx sends SIGINT to the whole group, as a
// terminal's Ctrl-C would: the pulumi CLI cancels the update gracefully and the driver reports the error.
func (r *procRunner) run(ctx context.Context, op string, config map[string]string) (result, error) {
	cfg, err := json.Marshal(config)
	if err != nil {
		return result{}, err
	}
	cmd := exec.Command(r.argv[0], append(append([]string{}, r.argv[1:]...), op, string(cfg))...)
	cmd.Env = os.Environ()
	for k, v := range r.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case waitErr = <-done:
		case <-time.After(5 * time.Minute):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			waitErr = <-done
		}
	}
	waitForGroup(cmd.Process.Pid, time.Minute)

	var res result
	found := false
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), resultMarker); ok {
			if err := json.Unmarshal([]byte(line), &res); err != nil {
				return res, fmt.Errorf("driver result: %w", err)
			}
			found = true
		}
	}
	if !found {
		return res, fmt.Errorf("%s %s printed no result (exit: %v)\nstdout:\n%s\nstderr:\n%s", r.argv[0], op, waitErr, stdout.String(), stderr.String())
	}
	if res.Error != "" {
		return res, errors.New(res.Error)
	}
	return res, nil
}

// waitForGroup waits until no process of group pgid is left (the pulumi CLI finishes after its driver).
func waitForGroup(pgid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
