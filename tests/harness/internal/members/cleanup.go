package members

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// onNamespaceDeleted forgets the namespace's members: their processes stop, their data goes (the PVCs went
// with the namespace) and their ports are free again.
func (d *Daemon) onNamespaceDeleted(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	ns, ok := o.(*corev1.Namespace)
	if !ok {
		return
	}
	d.mu.Lock()
	var gone []*member
	for key, m := range d.members {
		if m.namespace == ns.Name {
			gone = append(gone, m)
			delete(d.members, key)
		}
	}
	var freed []portSet
	for key, ps := range d.ports {
		if strings.HasPrefix(key, ns.Name+"/") {
			freed = append(freed, ps)
			delete(d.ports, key)
		}
	}
	d.mu.Unlock()
	go func() {
		for _, m := range gone {
			m.mu.Lock()
			m.removed = true
			m.mu.Unlock()
			m.poke()
		}
		for _, m := range gone {
			for m.current() != nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if err := os.RemoveAll(filepath.Join(d.runDir, "members", ns.Name)); err != nil {
			slog.Error("removing namespace member dirs", "namespace", ns.Name, "err", err)
		}
		for _, ps := range freed {
			d.alloc.release(ps)
		}
		slog.Info("namespace gone; members forgotten", "namespace", ns.Name, "members", len(gone))
	}()
}

// killLeftovers kills member processes that a previous daemon run left (it cannot adopt them); their pods'
// members are started again from the same data dirs.
func (d *Daemon) killLeftovers() {
	files, _ := filepath.Glob(filepath.Join(d.runDir, "pids", "members", "*", "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		pid, err := strconv.Atoi(lines[0])
		if err != nil || len(lines) < 2 {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && strings.HasPrefix(exe, lines[1]) {
			slog.Warn("killing member left by an earlier daemon", "pid", pid, "pidFile", f)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = os.Remove(f)
	}
}
