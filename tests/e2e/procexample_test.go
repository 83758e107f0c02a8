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
	"path/filepath"
	"strconv"
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

// run starts the driver in its own process group and waits for its result. Cancelling ctx sends SIGINT to the
// whole group, as a terminal's Ctrl-C would: the pulumi CLI cancels the update gracefully and the driver
// reports the error.
func (r *procRunner) run(ctx context.Context, op string, config map[string]string) (result, error) {
	s, err := r.start(op, config)
	if err != nil {
		return result{}, err
	}
	return s.wait(ctx)
}

// driverProc is one driver process in flight, with the pulumi CLI and the provider plugins it started, all in
// one process group.
type driverProc struct {
	cmd            *exec.Cmd
	name, op       string
	stdout, stderr bytes.Buffer
	done           chan error
}

func (r *procRunner) start(op string, config map[string]string) (*driverProc, error) {
	cfg, err := json.Marshal(config)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(r.argv[0], append(append([]string{}, r.argv[1:]...), op, string(cfg))...)
	cmd.Env = os.Environ()
	for k, v := range r.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s := &driverProc{cmd: cmd, name: r.argv[0], op: op, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = &s.stdout, &s.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.done <- cmd.Wait() }()
	return s, nil
}

// kill SIGKILLs the driver, the pulumi CLI and every provider plugin at once, as when a CI runner dies
// mid-update, and waits until none of them is left. The CLI starts each plugin in a process group of its
// own, so the group of the driver is not enough: every descendant is stopped first (so none can react to
// another's death, e.g. a provider cancelling its request when the CLI's connection drops, which would run
// the engine's clean-up), then killed.
func (s *driverProc) kill() error {
	pids := append([]int{s.cmd.Process.Pid}, descendants(s.cmd.Process.Pid)...)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	// A child forked between the listing and the stop would escape: list again while everything is frozen.
	pids = append([]int{s.cmd.Process.Pid}, descendants(s.cmd.Process.Pid)...)
	var errs []error
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("killing %d: %w", pid, err))
		}
	}
	<-s.done
	for _, pid := range pids {
		waitGone(pid, time.Minute)
	}
	return errors.Join(errs...)
}

// descendants lists every live process below root, from /proc.
func descendants(root int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its closing parenthesis.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	for queue := children[root]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// waitGone waits until pid has exited (or limit passes); a negative pid is a whole process group, as for
// kill(2).
func waitGone(pid int, limit time.Duration) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
	}
}

// wait waits for the driver's result; see run.
func (s *driverProc) wait(ctx context.Context) (result, error) {
	var waitErr error
	select {
	case waitErr = <-s.done:
	case <-ctx.Done():
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGINT)
		select {
		case waitErr = <-s.done:
		case <-time.After(5 * time.Minute):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			waitErr = <-s.done
		}
	}
	waitForGroup(s.cmd.Process.Pid, time.Minute)

	var res result
	found := false
	sc := bufio.NewScanner(&s.stdout)
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
		return res, fmt.Errorf("%s %s printed no result (exit: %v)\nstdout:\n%s\nstderr:\n%s", s.name, s.op, waitErr, s.stdout.String(), s.stderr.String())
	}
	if res.Error != "" {
		return res, errors.New(res.Error)
	}
	return res, nil
}

// waitForGroup waits until no process of group pgid is left (the pulumi CLI finishes after its driver).
func waitForGroup(pgid int, limit time.Duration) { waitGone(-pgid, limit) }
