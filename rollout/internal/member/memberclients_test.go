package member

import (
	"context"
	"crypto/tls"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gatedDialer is a port-forward stand-in whose Endpoint for slowPod waits until gate is closed.
type gatedDialer struct {
	slowPod string
	entered chan struct{}
	gate    chan struct{}
}

func (d gatedDialer) Endpoint(ctx context.Context, _, pod string, _ int) (string, error) {
	if pod == d.slowPod {
		d.entered <- struct{}{}
		select {
		case <-d.gate:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return "127.0.0.1:1", nil
}
func (gatedDialer) Release(string, string, int) {}
func (gatedDialer) Close() error                { return nil }

// While one member's forward or the TLS material is slow to come, the engine still reaches, and can
// Forget, the other members: nothing slow runs under the lock that guards every member's client.
func TestMemberClientsSlowStepDoesNotBlockOthers(t *testing.T) {
	for _, tc := range []struct {
		name string
		// slowTLS makes the first read of the TLS material wait, instead of etcd-0's forward.
		slowTLS bool
		// other is what must still return promptly meanwhile.
		other func(*Clients) error
	}{
		{"a slow forward; another member's client", false, func(m *Clients) error {
			_, err := m.client(context.Background(), "etcd-1")
			return err
		}},
		{"a slow forward; Forget of another member", false, func(m *Clients) error { m.Forget("etcd-1"); return nil }},
		{"slow TLS material; Forget", true, func(m *Clients) error { m.Forget("etcd-0"); return nil }},
		{"slow TLS material; Close", true, func(m *Clients) error { return m.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := gatedDialer{slowPod: "etcd-0", entered: make(chan struct{}, 1), gate: make(chan struct{})}
			tlsEntered, tlsGate := make(chan struct{}, 1), make(chan struct{})
			var tlsConfig func(context.Context) (*tls.Config, error)
			if tc.slowTLS {
				d.slowPod = ""
				tlsConfig = func(ctx context.Context) (*tls.Config, error) {
					tlsEntered <- struct{}{}
					<-tlsGate
					return nil, nil
				}
			}
			m := NewClients(d, "db", "etcd-headless", 2379, tlsConfig)
			defer m.Close()
			var released sync.Once
			release := func() { released.Do(func() { close(d.gate); close(tlsGate) }) }
			defer release() // before Close, so a failing run ends instead of hanging on the lock

			slow := make(chan error, 1)
			go func() {
				_, err := m.client(context.Background(), "etcd-0")
				slow <- err
			}()
			select {
			case <-d.entered:
			case <-tlsEntered:
			case <-time.After(5 * time.Second):
				t.Fatal("the slow step never started")
			}

			other := make(chan error, 1)
			go func() { other <- tc.other(m) }()
			select {
			case err := <-other:
				assert.NoError(t, err)
			case <-time.After(5 * time.Second):
				t.Fatal("blocked behind etcd-0's slow step")
			}

			release()
			select {
			case err := <-slow:
				require.NoError(t, err)
			case <-time.After(5 * time.Second):
				t.Fatal("etcd-0's client never came")
			}
		})
	}
}
