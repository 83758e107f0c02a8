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

// process is one container start of a pod: one incarnation of a member. Its etcd process starts at once,
// or after a serve delay during which the container counts as running but nothing listens (a large database
// being opened). Its pid file lets tests/cluster/down.sh stop it even if the daemon died.
type process struct {
	podUID  types.UID
	started time.Time // when the container started; etcd may start later
	pidFile string

	done chan struct{} // closed when the process has exited and been reaped (or was stopped before it ran)
	mu   sync.Mutex
	cmd  *exec.Cmd // nil until etcd started
	// aborted is set when the container stopped during its serve delay; etcd then never starts.
	aborted bool
	abort   chan struct{}
	exit    string // how it exited, once done is closed
	cause   string // why the daemon killed it (a crash-after fault), prefixed to exit
	// frozen is true between SIGSTOP and SIGCONT sent through the control API.
	frozen bool
}

// startProcess starts a container for podUID whose etcd runs bin with args after serveDelay (at once when
// zero; then a failure to start is returned). See spawn for how etcd runs.
func startProcess(bin string, args []string, podUID types.UID, logPath, pidFile string, serveDelay time.Duration) (*process, error) {
	p := &process{podUID: podUID, started: time.Now(), pidFile: pidFile, done: make(chan struct{}), abort: make(chan struct{})}
	if serveDelay <= 0 {
		cmd, err := spawn(bin, args, podUID, logPath, pidFile)
		if err != nil {
			return nil, err
		}
		p.cmd = cmd
		go p.reap()
		return p, nil
	}
	go p.spawnAfter(serveDelay, func() (*exec.Cmd, error) { return spawn(bin, args, podUID, logPath, pidFile) })
	return p, nil
}

// spawnAfter starts etcd once the serve delay has passed, unless the container was stopped meanwhile.
func (p *process) spawnAfter(delay time.Duration, start func() (*exec.Cmd, error)) {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.abort:
	}
	p.mu.Lock()
	if p.aborted {
		p.exit = "stopped during its serve delay, before etcd started"
		if p.cause != "" {
			p.exit = p.cause + ": " + p.exit
		}
		p.mu.Unlock()
		close(p.done)
		return
	}
	cmd, err := start()
	if err != nil {
		p.exit = err.Error()
		p.mu.Unlock()
		close(p.done)
		return
	}
	p.cmd = cmd
	p.mu.Unlock()
	p.reap()
}

// spawn runs bin with args in its own process group (a terminal's Ctrl-C does not reach it), with an empty
// environment (no ETCD_* variable of the daemon's leaks into the member), appending its output to logPath
// after a header line that says which pod and binary this incarnation belongs to.
func spawn(bin string, args []string, podUID types.UID, logPath, pidFile string) (*exec.Cmd, error) {
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
	if err := writePIDFile(pidFile, cmd.Process.Pid, bin); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	return cmd, nil
}

func (p *process) reap() {
	err := p.cmd.Wait()
	p.mu.Lock()
	if err != nil {
		p.exit = err.Error()
	} else {
		p.exit = "exit status 0"
	}
	if p.cause != "" {
		p.exit = p.cause + ": " + p.exit
	}
	p.mu.Unlock()
	_ = os.Remove(p.pidFile)
	close(p.done)
}

// pid is etcd's process id, 0 while the container waits out its serve delay.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// serving is true once etcd itself runs (after any serve delay).
func (p *process) serving() bool { return p.pid() != 0 && !p.exited() }

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

// signal sends sig unless the process is gone; STOP and CONT are remembered for the member's state. During
// a serve delay there is no etcd yet: KILL and TERM stop the container, STOP and CONT are refused.
func (p *process) signal(sig syscall.Signal) error {
	if p.exited() {
		return fmt.Errorf("process %d has already exited (%s)", p.pid(), p.exitReason())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		if sig != syscall.SIGKILL && sig != syscall.SIGTERM {
			return fmt.Errorf("etcd has not started yet (serve delay): cannot send %s", sig)
		}
		if !p.aborted {
			p.aborted = true
			close(p.abort)
		}
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signalling process %d: %w", p.cmd.Process.Pid, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.frozen = true
	case syscall.SIGCONT:
		p.frozen = false
	}
	return nil
}

// crash kills the container for a crash-after fault, so that its exit says why.
func (p *process) crash(cause string) {
	p.mu.Lock()
	p.cause = cause
	p.mu.Unlock()
	_ = p.signal(syscall.SIGKILL)
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
		_ = p.signal(syscall.SIGTERM)
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
	_ = p.signal(syscall.SIGKILL)
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
