package members

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// Restart back-off of a member whose process exited while its pod lives, like a kubelet's CrashLoopBackOff
// but shorter, so a crash test does not wait long.
const (
	minBackoff = time.Second
	maxBackoff = 10 * time.Second
	// probeEvery is how often a member is reconciled without an event: the readiness probe period.
	probeEvery = 500 * time.Millisecond
)

// member is the kubelet of one pod name (namespace/pod). One goroutine (run) owns the process lifecycle,
// so the steps a kubelet orders — stop the old container, then start the new pod's — happen in order. The
// mutex guards what the control API reads and changes.
type member struct {
	d         *Daemon
	namespace string
	pod       string
	dir       string // data, tls, ports.json: survives pod re-creation like a PVC
	ports     portSet
	kick      chan struct{}
	// net is what kwok's port-forward reaches (podnet.go), opened at the first start and closed when run
	// returns; only run's goroutine touches it.
	net *podNet

	mu         sync.Mutex
	proc       *process
	launch     launch
	sts        string
	ordinal    int
	starts     int
	lastExit   string
	hangOnTerm bool
	ready      bool
	terminate  bool // the pod is being deleted and the process is being stopped
	backoff    time.Duration
	notBefore  time.Time
	removed    bool // the namespace is gone: stop and forget
	// A start delay keeps the pod of seenUID Pending until pendingUntil; startedUID is the pod whose
	// container started, which the daemon marks with memberapi.AnnotationStarted.
	seenUID      types.UID
	pendingUntil time.Time
	startDelay   time.Duration
	startedUID   types.UID
}

func (m *member) dataDir() string { return filepath.Join(m.dir, "data") }
func (m *member) tlsDir() string  { return filepath.Join(m.dir, "tls") }
func (m *member) logFile() string {
	return filepath.Join(m.d.runDir, "logs", "members", m.namespace, m.pod+".log")
}
func (m *member) pidFile() string {
	return filepath.Join(m.d.runDir, "pids", "members", m.namespace, m.pod+".pid")
}

// poke asks run to reconcile soon; events coalesce.
func (m *member) poke() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *member) run(ctx context.Context) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	defer m.closeNet()
	for {
		select {
		case <-ctx.Done():
			m.shutdown()
			return
		case <-m.kick:
		case <-t.C:
		}
		if done := m.reconcile(ctx); done {
			return
		}
	}
}

// shutdown stops the process when the daemon stops: a short grace, since the whole cluster is going down
// (three members stopped at once wait for each other's leader hand-over).
func (m *member) shutdown() {
	if p := m.current(); p != nil {
		m.endStreams()
		p.terminate(func() time.Duration { return 3 * time.Second }, false)
	}
}

// endStreams ends the port-forward connections of a pod whose process is being stopped, as a real node's
// do when the pod goes (see podNet).
func (m *member) endStreams() {
	if m.net != nil {
		m.net.endStreams()
	}
}

func (m *member) closeNet() {
	if m.net != nil {
		m.net.close(m.d.alloc)
		m.net = nil
	}
}

func (m *member) current() *process {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc
}

// reconcile does one kubelet step for this pod name and reports whether the member is finished for good.
func (m *member) reconcile(ctx context.Context) bool {
	pod, err := m.d.pods.Pods(m.namespace).Get(m.pod)
	if err != nil && !apierrors.IsNotFound(err) {
		slog.Error("reading pod from cache", "pod", m.key(), "err", err)
		return false
	}
	if apierrors.IsNotFound(err) {
		pod = nil
	}
	m.mu.Lock()
	removed, proc := m.removed, m.proc
	m.mu.Unlock()

	// The process belongs to a pod that is gone, going, or replaced: stop it first, as a kubelet would
	// before the pod's deletion completes.
	going := pod == nil || removed || pod.DeletionTimestamp != nil
	if proc != nil && (going || proc.podUID != pod.UID) {
		m.stopProcess(proc)
	}
	if pod != nil && pod.DeletionTimestamp != nil {
		m.finishDeletion(ctx, pod)
	}
	if removed {
		return true
	}
	if going {
		return false
	}

	m.mu.Lock()
	proc = m.proc
	if proc != nil && proc.exited() {
		m.lastExit = proc.exitReason()
		m.proc, proc = nil, nil
		if m.backoff == 0 || time.Since(m.notBefore) > 10*time.Second+m.backoff {
			m.backoff = minBackoff
		} else {
			m.backoff = min(2*m.backoff, maxBackoff)
		}
		m.notBefore = time.Now().Add(m.backoff)
		time.AfterFunc(m.backoff, m.poke)
		slog.Warn("member exited; restarting after back-off", "pod", m.key(), "exit", m.lastExit, "backoff", m.backoff)
	}
	wait := time.Now().Before(m.notBefore)
	m.mu.Unlock()

	if proc == nil && !wait && m.startDelayLeft(pod) <= 0 {
		if err := m.start(ctx, pod); err != nil {
			slog.Error("starting member", "pod", m.key(), "err", err)
			m.mu.Lock()
			m.lastExit = err.Error()
			m.backoff = min(max(2*m.backoff, minBackoff), maxBackoff)
			m.notBefore = time.Now().Add(m.backoff)
			m.mu.Unlock()
		}
	}
	m.syncPodAnnotations(ctx, pod)
	return false
}

// startDelayLeft is how long pod must still stay Pending for its start-delay annotation, counted from when
// the daemon first saw it. A pod whose container started once (also under an earlier daemon run: it carries
// memberapi.AnnotationStarted) does not wait again: a container restart pulls no image.
func (m *member) startDelayLeft(pod *corev1.Pod) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pod.UID == m.startedUID || pod.Annotations[memberapi.AnnotationStarted] == "true" {
		return 0
	}
	delay := startDelayOf(pod)
	if delay == 0 {
		return 0 // also a bad value: start reports it
	}
	if pod.UID != m.seenUID {
		m.seenUID, m.startDelay, m.pendingUntil = pod.UID, delay, time.Now().Add(delay)
		time.AfterFunc(delay, m.poke)
		slog.Info("pod stays Pending for its start delay", "pod", m.key(), "uid", pod.UID, "delay", delay)
	}
	return time.Until(m.pendingUntil)
}

// stopProcess stops proc with the deleted pod's grace period, following the pod when a later deletion
// shortens it. A pod that is gone, or replaced under the same name, was force-deleted (the daemon removes
// its pods only after their process exited), so its process is killed at once.
func (m *member) stopProcess(proc *process) {
	m.mu.Lock()
	specGrace, hang := m.launch.grace, m.hangOnTerm
	m.terminate = true
	m.mu.Unlock()
	grace := func() time.Duration {
		p, err := m.d.pods.Pods(m.namespace).Get(m.pod)
		switch {
		case apierrors.IsNotFound(err) || (err == nil && p.UID != proc.podUID):
			return 0
		case err == nil && p.DeletionGracePeriodSeconds != nil:
			return time.Duration(*p.DeletionGracePeriodSeconds) * time.Second
		}
		return specGrace
	}
	start := time.Now()
	m.endStreams()
	killed := proc.terminate(grace, hang)
	slog.Info("member stopped", "pod", m.key(), "pid", proc.pid(), "grace", grace(), "hangOnTerm", hang,
		"killed", killed, "took", time.Since(start).Round(time.Millisecond))
	m.mu.Lock()
	m.proc, m.terminate, m.hangOnTerm, m.ready = nil, false, false, false
	m.lastExit = proc.exitReason()
	m.backoff, m.notBefore = 0, time.Time{}
	m.mu.Unlock()
}

// finishDeletion removes the pod object once its process is gone: the step kwok's stock pod-delete stage
// would take at once, taken here only when the member really stopped.
func (m *member) finishDeletion(ctx context.Context, pod *corev1.Pod) {
	uid := pod.UID
	err := m.d.kube.CoreV1().Pods(m.namespace).Delete(ctx, m.pod, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		slog.Error("finishing pod deletion", "pod", m.key(), "err", err)
	}
}

// start launches the member for pod: its ports and those of its peers, TLS files, kwok rules, the process.
func (m *member) start(ctx context.Context, pod *corev1.Pod) error {
	stsName, ord, err := ownerStatefulSet(pod)
	if err != nil {
		return err
	}
	sts, err := m.d.kube.AppsV1().StatefulSets(m.namespace).Get(ctx, stsName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading StatefulSet %s/%s: %w", m.namespace, stsName, err)
	}
	l, err := readLaunch(pod, sts, m.d.binDir)
	if err != nil {
		return err
	}
	cluster := make([]string, 0, l.replicas)
	scheme := "http"
	if l.tls {
		scheme = "https"
	}
	for i := range l.replicas {
		name := fmt.Sprintf("%s-%d", stsName, i)
		ps, err := m.d.portsOf(m.namespace, name)
		if err != nil {
			return err
		}
		cluster = append(cluster, fmt.Sprintf("%s=%s://127.0.0.1:%d", name, scheme, ps.Peer))
	}
	if l.secret != "" {
		if err := writeTLSFiles(ctx, m.d, m.namespace, l.secret, m.tlsDir()); err != nil {
			return err
		}
	}
	if l.flags.honoured() {
		if err := l.flags.write(ctx, m.d, m.namespace, filepath.Join(m.tlsDir(), "flags")); err != nil {
			return err
		}
	}
	if m.net == nil {
		if m.net, err = openPodNet(m.d.alloc, m.ports); err != nil {
			return fmt.Errorf("pod network of %s: %w", m.key(), err)
		}
	}
	m.net.client.refuse(l.faults.clientsRefused)
	if err := m.applyKwokRules(ctx, l); err != nil {
		return err
	}
	token := m.namespace + "/" + stsName
	state := "new"
	if l.dataDiesWithPod {
		if state, err = m.dataOfPod(pod, stsName, l.replicas); err != nil {
			return err
		}
	}
	args := etcdArgs(m.pod, m.dataDir(), m.tlsDir(), token, state, l, m.ports, cluster)
	proc, err := startProcess(l.binary, args, pod.UID, m.logFile(), m.pidFile(), l.faults.serveDelay)
	if err != nil {
		return err
	}
	slog.Info("member started", "pod", m.key(), "uid", pod.UID, "pid", proc.pid(), "version", l.version,
		"tls", l.tls, "readiness", l.readiness, "broken", l.broken, "client", m.ports.Client,
		"serveDelay", l.faults.serveDelay, "crashAfter", l.faults.crashAfter, "clientsRefused", l.faults.clientsRefused)
	m.mu.Lock()
	m.proc, m.launch, m.sts, m.ordinal = proc, l, stsName, ord
	m.startedUID = pod.UID
	m.starts++
	m.mu.Unlock()
	m.net.follow(proc.done)
	m.scheduleCrash(proc, l.faults.crashAfter)
	go func() { <-proc.done; m.poke() }() // an exit starts its back-off now, not at the next probe tick
	return nil
}

// dataOfPod makes the data dir the pod's own, as an emptyDir is: kept across the container's restarts, wiped
// when another pod (a new UID) takes the name (the UID whose data it holds is kept next to it, so a daemon
// restart changes nothing). It returns the --initial-cluster-state the start script would pick: "existing"
// for a data dir without a WAL while another member of the StatefulSet answers, else "new". (Not "an empty
// data dir": a start that failed, as a replaced member's does until the rollout adds its learner, leaves a
// member dir without a WAL, and "new" then computes the old member ID from the name and the peer URL.)
func (m *member) dataOfPod(pod *corev1.Pod, sts string, replicas int) (string, error) {
	owner := filepath.Join(m.dir, "data.pod-uid")
	if b, err := os.ReadFile(owner); err != nil || types.UID(b) != pod.UID {
		if err := os.RemoveAll(m.dataDir()); err != nil {
			return "", fmt.Errorf("wiping the emptyDir data of %s: %w", m.key(), err)
		}
		if err := os.WriteFile(owner, []byte(pod.UID), 0o600); err != nil {
			return "", err
		}
		slog.Info("emptyDir data dir wiped for a new pod", "pod", m.key(), "uid", pod.UID)
	}
	if wals, _ := filepath.Glob(filepath.Join(m.dataDir(), "member", "wal", "*.wal")); len(wals) > 0 {
		return "new", nil // ignored by etcd once it has a WAL (a start that failed leaves a member dir without one)
	}
	for i := range replicas {
		name := fmt.Sprintf("%s-%d", sts, i)
		if name == m.pod {
			continue
		}
		ps, err := m.d.portsOf(m.namespace, name)
		if err != nil {
			continue
		}
		if answersOK(fmt.Sprintf("http://127.0.0.1:%d/health", ps.Client), 2*time.Second) {
			return "existing", nil
		}
	}
	return "new", nil
}

// scheduleCrash kills proc after d (a crash-after fault), so the member crash-loops through the restart
// back-off of reconcile as a CrashLoopBackOff container does.
func (m *member) scheduleCrash(proc *process, d time.Duration) {
	if d <= 0 {
		return
	}
	time.AfterFunc(d, func() {
		if proc.exited() {
			return
		}
		slog.Warn("crash-after fault: killing member", "pod", m.key(), "pid", proc.pid(), "after", d)
		proc.crash("crash-after " + d.String())
	})
}

func (m *member) key() string { return m.namespace + "/" + m.pod }
