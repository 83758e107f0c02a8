package members

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// portSet is the three local ports of one member. They belong to the member name, not the pod: a
// re-created pod gets the same ports, so its peer URL (stored in the etcd member list) stays valid, like the
// stable DNS name of a StatefulSet pod.
type portSet struct {
	Client  int `json:"client"`
	Peer    int `json:"peer"`
	Metrics int `json:"metrics"`
}

// portAllocator hands out ports from a fixed range below the kernel's ephemeral range (so an outgoing
// connection never holds a member's port between two incarnations), skipping ports that something else on
// the machine listens on.
type portAllocator struct {
	mu     sync.Mutex
	lo, hi int
	next   int
	used   map[int]bool
}

// parsePortRange reads "LO-HI".
func parsePortRange(s string) (lo, hi int, err error) {
	a, b, ok := strings.Cut(s, "-")
	if ok {
		lo, err = strconv.Atoi(a)
		if err == nil {
			hi, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || lo < 1024 || hi > 65535 || hi-lo < 30 {
		return 0, 0, fmt.Errorf("member port range %q: want LO-HI within 1024-65535 with at least 30 ports", s)
	}
	return lo, hi, nil
}

func newPortAllocator(lo, hi int) *portAllocator {
	return &portAllocator{lo: lo, hi: hi, next: lo, used: map[int]bool{}}
}

// reserve marks ports found on disk (members of an earlier daemon run) as taken.
func (a *portAllocator) reserve(ps portSet) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.used[ps.Client], a.used[ps.Peer], a.used[ps.Metrics] = true, true, true
}

func (a *portAllocator) release(ps portSet) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.used, ps.Client)
	delete(a.used, ps.Peer)
	delete(a.used, ps.Metrics)
}

func (a *portAllocator) allocate() (portSet, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ports [3]int
	for i := range ports {
		p, err := a.takeLocked()
		if err != nil {
			return portSet{}, err
		}
		ports[i] = p
	}
	return portSet{Client: ports[0], Peer: ports[1], Metrics: ports[2]}, nil
}

// take hands out one port outside any member's port set (the pod port proxies of podnet.go).
func (a *portAllocator) take() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.takeLocked()
}

// free gives back ports handed out by take.
func (a *portAllocator) free(ports ...int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range ports {
		delete(a.used, p)
	}
}

func (a *portAllocator) takeLocked() (int, error) {
	for range a.hi - a.lo + 1 {
		p := a.next
		a.next++
		if a.next > a.hi {
			a.next = a.lo
		}
		if a.used[p] || !portFree(p) {
			continue
		}
		a.used[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port left in %d-%d", a.lo, a.hi)
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

const portsFile = "ports.json"

func loadPorts(memberDir string) (portSet, bool, error) {
	b, err := os.ReadFile(filepath.Join(memberDir, portsFile))
	if os.IsNotExist(err) {
		return portSet{}, false, nil
	}
	if err != nil {
		return portSet{}, false, fmt.Errorf("reading member ports: %w", err)
	}
	var ps portSet
	if err := json.Unmarshal(b, &ps); err != nil {
		return portSet{}, false, fmt.Errorf("parsing %s: %w", filepath.Join(memberDir, portsFile), err)
	}
	return ps, true, nil
}

func savePorts(memberDir string, ps portSet) error {
	if err := os.MkdirAll(memberDir, 0o700); err != nil {
		return fmt.Errorf("creating member dir: %w", err)
	}
	b, _ := json.Marshal(ps)
	if err := os.WriteFile(filepath.Join(memberDir, portsFile), b, 0o644); err != nil {
		return fmt.Errorf("saving member ports: %w", err)
	}
	return nil
}
