package members

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// process is one etcd process started for one pod (one incarnation of a member). Its pid file lets
// tests/cluster/down.sh stop it even if the daemon died.
type process struct {
	cmd     *exec.Cmd
	podUID  types.UID
	started time.Time
	pidFile string

	done chan struct{} // closed when the process has exited and been reaped
	mu   sync.Mutex
	exit string // how it exited, once done is closed
	// frozen is true between SIGSTOP and SIGCONT sent through the control API.
	frozen bool
}

// startProcess runs bin with args in its own process group (a terminal's Ctrl-C does not reach it), with an
// empty environment (no ETCD_* variable of the daemon's leaks into the member), appending its output to
// logPath after a header line that says which pod and binary this incarnation belongs to.
func startProcess(bin string, args []string, podUID types.UID, logPath, pidFile string) (*process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, fmt.Errorf("creating log dir: %w", err)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening member log: %w", err)
	}
	defer logFile.Close() // the child keeps its own descriptor
	fmt.Fprintf(logFile, "=== %s etcd-members: starting %s for pod uid %s: %s\n",
		time.Now().UTC().Format(time.RFC3339Nano), bin, podUID, strings.Join(args, " "))

	cmd := exec.Command(bin, args...)
	cmd.Env = []string{}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &process{cmd: cmd, podUID: podUID, started: time.Now(), pidFile: pidFile, done: make(chan struct{})}
	if err := writePIDFile(pidFile, cmd.Process.Pid, bin); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	go p.reap()
	return p, nil
}

func (p *process) reap() {
	err := p.cmd.Wait()
	p.mu.Lock()
	if err != nil {
		p.exit = err.Error()
	} else {
		p.exit = "exit status 0"
	}
	p.mu.Unlock()
	_ = os.Remove(p.pidFile)
	close(p.done)
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) exitReason() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// signal sends sig unless the process is gone; STOP and CONT are remembered for the member's state.
func (p *process) signal(sig syscall.Signal) error {
	if p.exited() {
		return fmt.Errorf("process %d has already exited (%s)", p.pid(), p.exitReason())
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signalling process %d: %w", p.pid(), err)
	}
	p.mu.Lock()
	switch sig {
	case syscall.SIGSTOP:
		p.frozen = true
	case syscall.SIGCONT:
		p.frozen = false
	}
	p.mu.Unlock()
	return nil
}

func (p *process) isFrozen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frozen
}

// terminate stops the process as a kubelet stops a container: SIGTERM (unless hang is set: a member whose
// shutdown hangs), SIGKILL once the grace period has passed, and returns when the process has exited. grace
// is asked again every 100 ms, because a second deletion can shorten it (kubectl delete --grace-period=0
// on a terminating pod) and a kubelet honours that. It reports whether SIGKILL was needed.
func (p *process) terminate(grace func() time.Duration, hang bool) (killed bool) {
	if p.exited() {
		return false
	}
	if !hang {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for time.Since(start) < grace() {
		select {
		case <-p.done:
			return false
		case <-tick.C:
		}
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return true
}

// writePIDFile writes the pid and the executable, the format tests/cluster/down.sh checks before it signals.
func writePIDFile(path string, pid int, exe string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating pid dir: %w", err)
	}
	abs, err := filepath.Abs(exe)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", exe, err)
	}
	if err := os.WriteFile(path, []byte(fmt.Sprintf("%d\n%s\n", pid, abs)), 0o644); err != nil {
		return fmt.Errorf("writing pid file: %w", err)
	}
	return nil
}
