package members

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// listenPollEvery is how often follow reads the socket table while a member's listeners are expected to
// change: short next to an etcd start (0.1 s and more), so the pod's port opens about when the member's does.
const listenPollEvery = 5 * time.Millisecond

// listenFollow is the per-incarnation state of podNet.follow: which incarnation is current, and a channel
// closed when its process is told to stop.
type listenFollow struct {
	mu       sync.Mutex
	current  int
	stopping chan struct{}
}

// begin starts a new incarnation and returns its number and the channel that says it is being stopped.
func (l *listenFollow) begin() (int, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.current++
	l.stopping = make(chan struct{})
	return l.current, l.stopping
}

// ifCurrent runs set while incarnation is the current one: a follower of an exited process that is late
// (a loaded machine) must not close the ports its successor opened.
func (l *listenFollow) ifCurrent(incarnation int, set func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if incarnation == l.current {
		set()
	}
}

// stop says the current incarnation is being stopped (once; later calls do nothing).
func (l *listenFollow) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopping != nil {
		close(l.stopping)
		l.stopping = nil
	}
}

// follow keeps the pod's ports open exactly while the member process listens on its own, from the
// process's start until exited is closed. A member's listeners change only when it starts or stops, both of
// which the daemon knows, so follow reads the socket table only then: after the start until both ports
// listen, and after stopping closes until neither does. It reads the kernel's table rather than connecting:
// a probe connection would show in etcd's log as a rejected client.
func (n *podNet) follow(exited <-chan struct{}) {
	incarnation, stopping := n.incarnation.begin()
	go func() {
		defer n.incarnation.ifCurrent(incarnation, func() { n.setListening(false, false) })
		if n.pollListening(incarnation, exited, stopping, true) {
			select {
			case <-exited:
				return
			case <-stopping:
			}
		}
		n.pollListening(incarnation, exited, nil, false)
	}()
}

// pollListening follows the member's listeners until both match want (true), or until exited or
// interrupt closes (false).
func (n *podNet) pollListening(incarnation int, exited, interrupt <-chan struct{}, want bool) bool {
	t := time.NewTicker(listenPollEvery)
	defer t.Stop()
	for {
		client, peer := n.targetsListening()
		n.incarnation.ifCurrent(incarnation, func() { n.setListening(client, peer) })
		if client == want && peer == want {
			return true
		}
		select {
		case <-exited:
			return false
		case <-interrupt:
			return false
		case <-t.C:
		}
	}
}

func (n *podNet) setListening(client, peer bool) {
	n.client.follow(client)
	n.peer.follow(peer)
}

// targetsListening says whether the member listens on its client and peer ports. Without a readable
// socket table (not Linux) it says yes, which keeps the ports open as they were before follow existed.
func (n *podNet) targetsListening() (client, peer bool) {
	listening, err := sharedListening.read()
	if err != nil {
		n.warnOnce.Do(func() { slog.Warn("pod ports stay open: cannot read the socket table", "err", err) })
		return true, true
	}
	return listening[n.client.targetPort], listening[n.peer.targetPort]
}

// sharedListening is the socket table as every follower sees it: ten clusters start up to thirty members
// at once, and one read every listenPollEvery serves them all.
var sharedListening listenTable

type listenTable struct {
	mu    sync.Mutex
	at    time.Time
	ports map[int]bool
	err   error
}

// read returns the listening ports, read again when the last read is older than listenPollEvery.
func (l *listenTable) read() (map[int]bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.at) >= listenPollEvery {
		l.ports, l.err = listeningPorts()
		l.at = time.Now()
	}
	return l.ports, l.err
}

// listeningPorts reads the local TCP ports that a socket listens on, from /proc/net/tcp and tcp6.
func listeningPorts() (map[int]bool, error) {
	ports := map[int]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if err := readListening(table, ports); err != nil && !(table == "/proc/net/tcp6" && os.IsNotExist(err)) {
			return nil, err
		}
	}
	return ports, nil
}

// readListening adds the ports of table's sockets in state LISTEN (0A) to ports. A line reads
// "sl local_address rem_address st ...", the local address as HEXIP:HEXPORT. The kernel lists every
// listening socket before any other, so the read stops at the first socket in another state: the whole
// table (thousands of connections and TIME_WAITs under make bench's ten clusters) took 20-30 ms of kernel
// time per read, which at one read per 5 ms starved the members themselves; the listening part takes 0.2 ms.
func readListening(table string, ports map[int]bool) error {
	f, err := os.Open(table)
	if err != nil {
		return err
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	lines.Scan() // header
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) < 4 {
			continue
		}
		if fields[3] != "0A" {
			return nil
		}
		_, hexPort, ok := strings.Cut(fields[1], ":")
		port, err := strconv.ParseUint(hexPort, 16, 16)
		if !ok || err != nil {
			return fmt.Errorf("reading %s: local address %q", table, fields[1])
		}
		ports[int(port)] = true
	}
	return lines.Err()
}
