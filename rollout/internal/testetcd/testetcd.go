// Package testetcd runs the pinned etcd binaries (make tools) as local processes, for the tests of the
// packages below the engine whose subject is etcd's own answers (membership changes, snapshots). Test support
// only; nothing else imports it.
package testetcd

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/etcd-rollout/pulumi-etcd-rollout"

// Binary is the pinned binary name ("etcd", "etcd-v3.5") in $TOOLS_DIR/bin, or the repository's .tools/bin.
// It fails the test when the binary is not built, and skips it in -short.
func Binary(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("TOOLS_DIR")
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, ".tools")
	}
	bin := filepath.Join(dir, "bin", name)
	if _, err := os.Stat(bin); err != nil {
		if testing.Short() {
			t.Skipf("%s is not built (make tools); skipped in -short", bin)
		}
		t.Fatalf("%s is not built: run `make tools`", bin)
	}
	return bin
}

// repoRoot is the nearest directory above the working directory whose go.mod is this project's module.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			line, _ := bufio.NewReader(f).ReadString('\n')
			f.Close()
			if strings.TrimSpace(line) == "module "+module {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory; set TOOLS_DIR", module)
		}
		dir = parent
	}
}

// FreePort is a TCP port on 127.0.0.1 nobody listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Member is one local etcd member: its name and ports.
type Member struct {
	Name         string
	Client, Peer int
}

// NewMember picks free ports for a member called name.
func NewMember(t testing.TB, name string) Member {
	return Member{Name: name, Client: FreePort(t), Peer: FreePort(t)}
}

func (m Member) PeerURL() string    { return fmt.Sprintf("http://127.0.0.1:%d", m.Peer) }
func (m Member) ClientAddr() string { return fmt.Sprintf("127.0.0.1:%d", m.Client) }

// Start runs bin as m until the test ends, with initialCluster and state as its bootstrap flags; its log is
// printed when the test failed.
func (m Member) Start(t testing.TB, bin, initialCluster, state string) {
	t.Helper()
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	clientURL := "http://" + m.ClientAddr()
	cmd := exec.Command(bin, "--name", m.Name, "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", m.PeerURL(), "--initial-advertise-peer-urls", m.PeerURL(),
		"--initial-cluster", initialCluster, "--initial-cluster-state", state)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("%s's log:\n%s", m.Name, out)
		}
	})
}

// StartAlone runs bin as a one-member cluster called name and returns the member.
func StartAlone(t testing.TB, bin, name string) Member {
	m := NewMember(t, name)
	m.Start(t, bin, name+"="+m.PeerURL(), "new")
	return m
}

// Dialer reaches members run as local processes, pod name → address: a memberdial.Dialer.
type Dialer map[string]string

func (d Dialer) Endpoint(_ context.Context, _, pod string, _ int) (string, error) {
	if addr, ok := d[pod]; ok {
		return addr, nil
	}
	return "", fmt.Errorf("no local member %s", pod)
}
func (Dialer) Release(string, string, int) {}
func (Dialer) Close() error                { return nil }
