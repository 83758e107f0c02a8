package members

import (
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// info is the member as the control API shows it.
func (m *member) info() memberapi.Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	scheme := "http"
	if m.launch.tls {
		scheme = "https"
	}
	out := memberapi.Member{
		Namespace: m.namespace, Pod: m.pod, StatefulSet: m.sts, Ordinal: m.ordinal,
		Version: m.launch.version, Binary: m.launch.binary, TLS: m.launch.tls, Readiness: m.launch.readiness,
		Broken:     m.launch.broken,
		StartDelay: m.launch.faults.startDelay, ServeDelay: m.launch.faults.serveDelay, CrashAfter: m.launch.faults.crashAfter,
		ClientsRefused: m.launch.faults.clientsRefused,
		ClientPort:     m.ports.Client, PeerPort: m.ports.Peer, MetricsPort: m.ports.Metrics,
		ClientURL:  fmt.Sprintf("%s://127.0.0.1:%d", scheme, m.ports.Client),
		PeerURL:    fmt.Sprintf("%s://127.0.0.1:%d", scheme, m.ports.Peer),
		MetricsURL: fmt.Sprintf("http://127.0.0.1:%d", m.ports.Metrics),
		DataDir:    m.dataDir(), LogFile: m.logFile(),
		Starts: m.starts, LastExit: m.lastExit, HangOnTerm: m.hangOnTerm, Ready: m.ready,
		State: memberapi.StateWaiting,
	}
	if m.launch.tls {
		out.TLSDir = m.tlsDir()
	}
	if p := m.proc; p != nil {
		out.PodUID, out.PID, out.StartedAt = string(p.podUID), p.pid(), p.started
		switch {
		case m.terminate:
			out.State = memberapi.StateTerminating
		case p.exited():
			out.State, out.LastExit = memberapi.StateExited, p.exitReason()
		case p.isFrozen():
			out.State = memberapi.StateStopped
		case !p.serving():
			out.State = memberapi.StateLoading
		default:
			out.State = memberapi.StateRunning
		}
	} else if time.Now().Before(m.pendingUntil) {
		out.State, out.PodUID, out.StartDelay = memberapi.StatePending, string(m.seenUID), m.startDelay
	} else if m.lastExit != "" && !m.notBefore.IsZero() {
		out.State = memberapi.StateExited
	}
	return out
}

var signals = map[memberapi.Signal]syscall.Signal{
	memberapi.SignalKill: syscall.SIGKILL, memberapi.SignalStop: syscall.SIGSTOP,
	memberapi.SignalCont: syscall.SIGCONT, memberapi.SignalTerm: syscall.SIGTERM,
}

func (m *member) signal(sig memberapi.Signal) error {
	s, ok := signals[sig]
	if !ok {
		return fmt.Errorf("unknown signal %q (want KILL, STOP, CONT or TERM)", sig)
	}
	p := m.current()
	if p == nil {
		return fmt.Errorf("member %s has no running process", m.key())
	}
	if err := p.signal(s); err != nil {
		return err
	}
	slog.Info("signal sent by control API", "pod", m.key(), "signal", sig, "pid", p.pid())
	m.poke()
	return nil
}

func (m *member) setHangOnTerm(on bool) {
	m.mu.Lock()
	m.hangOnTerm = on
	m.mu.Unlock()
	slog.Info("hang-on-term set by control API", "pod", m.key(), "enabled", on)
}
