//go:build faults

package faults_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// A run cut off from the API server for longer than its lease must not act once it is back (issue 21,
// item 4). Run A reaches the API server (its clientset and its port-forwards alike) through a TCP relay
// the test can cut. It restarts etcd-2 on a revision that never starts, and the relay is cut as soon as
// etcd-2 is recreated (the partition is locked again). A's gate times out while it is cut off. Run B, with
// its own access, watches A's lease go unrenewed, takes it over and waits for etcd-2 itself. Only then is
// A's access restored: A no longer holds the lease, so it must neither delete a pod nor write the
// StatefulSet, the pods or the lease; etcd-2's pod stays the one A's roll created.
//
// What A sends is recorded under the relay (rest.Config.Wrap), so the verdict is A's own requests and not
// an inference from the cluster's state, which B may change too.
func TestRunCutOffPastItsLeaseDisruptsNothingOnceBack(t *testing.T) {
	t.Parallel()
	const lease = 4 * time.Second
	f := newFixture(t)
	f.must.PlaceLeader(0) // no transfer: etcd-2 is restarted first and is a follower
	_, uidsBefore := f.must.Pods()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := f.etcd.SetTemplateAnnotation(ctx, memberapi.AnnotationBroken, "true")
	require.NoError(t, err)

	relay := newCuttableRelay(t, f.c.Config.Host)
	log := &requestLog{}
	cfgA := rest.CopyConfig(f.c.Config)
	cfgA.Host = relay.url()
	cfgA.Wrap(func(rt http.RoundTripper) http.RoundTripper { return loggingTransport{next: rt, log: log} })

	ctxB, cancelB := context.WithCancel(runCtx(t))
	defer cancelB()
	tookOver := make(chan struct{})
	var once sync.Once
	engineB := f.engine(func(c *rollout.Config, o *rollout.Options) {
		c.Holder, c.ReadyTimeout = "run-b", 3*time.Minute // B only holds the lease and waits for etcd-2
		o.LeaseDuration = lease
		logB := o.OnEvent
		o.OnEvent = func(e rollout.Event) {
			logB(rollout.Event{Time: e.Time, Message: "[run-b] " + e.Message})
			if e.Kind == rollout.EventTookOver && e.PreviousHolder == "run-a" {
				once.Do(func() { close(tookOver) })
			}
		}
	})
	errB := make(chan error, 1)
	restored := make(chan time.Time, 1)

	var cutUID string
	res, errA := f.engine(func(c *rollout.Config, o *rollout.Options) {
		c.Holder = "run-a"
		c.ReadyTimeout, c.HealthTimeout = 5*time.Second, 5*time.Second
		o.RestConfig, o.LeaseDuration = cfgA, lease
		logA := o.OnEvent
		o.OnEvent = func(e rollout.Event) {
			logA(rollout.Event{Time: e.Time, Message: "[run-a] " + e.Message})
			if cutUID != "" || !memberEvent(e, rollout.EventMemberRecreated, "etcd-2") {
				return
			}
			pod, err := f.etcd.Pod(ctx, 2)
			require.NoError(t, err)
			cutUID = string(pod.UID)
			relay.cut()
			t.Logf("%s run A's API access cut", time.Now().Format("15:04:05.000"))
			go func() {
				_, err := engineB.Run(ctxB)
				errB <- err
			}()
			go func() {
				select {
				case <-tookOver:
				case <-ctxB.Done():
					return
				}
				// Let A's gate time out while it is cut off, then give it its access back.
				time.Sleep(2 * time.Second)
				at := log.restore()
				relay.restore()
				t.Logf("%s run A's API access restored (run B holds the lease)", at.Format("15:04:05.000"))
				restored <- at
			}()
		}
	}).Run(runCtx(t))
	t.Logf("run A: %v", errA)
	require.NotEmpty(t, cutUID, "run A never reported etcd-2 recreated: its access was not cut")
	var restoredAt time.Time
	select {
	case restoredAt = <-restored:
	default:
	}
	cancelB()
	t.Logf("run B: %v", <-errB)
	select {
	case <-tookOver:
	default:
		t.Fatal("run B never took the lease over from run A")
	}
	require.False(t, restoredAt.IsZero(), "run A ended before its access was restored: it never saw the API server again")
	require.Error(t, errA, "run A lost its lease: it cannot succeed")

	after := log.sinceRestore()
	for _, r := range after {
		t.Logf("run A after the restore: %s", r)
	}
	var disruptive []string
	for _, r := range after {
		if r.mutatesState() {
			disruptive = append(disruptive, r.String())
		}
	}
	assert.Empty(t, disruptive, "run A wrote to the cluster after its lease was taken over")

	_, uidsAfter := f.must.Pods()
	assert.Equal(t, cutUID, string(uidsAfter[2]), "etcd-2's pod was deleted")
	assert.Equal(t, uidsBefore[:2], uidsAfter[:2], "etcd-0 and etcd-1 were never restarted")
	assert.Empty(t, res.MembersRolled)
	require.Equal(t, 3, f.must.Partition(), "partition locked at the end")
}

// cuttableRelay relays TCP connections to the API server until cut: then it closes every open one and
// every new one at once, as a network partition between one run and the API server would, until restored.
type cuttableRelay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	isCut  bool
	conns  map[net.Conn]struct{}
}

func newCuttableRelay(t *testing.T, apiHost string) *cuttableRelay {
	u, err := url.Parse(apiHost)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &cuttableRelay{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	go r.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		r.cut()
	})
	return r
}

func (r *cuttableRelay) url() string { return "https://" + r.ln.Addr().String() }

func (r *cuttableRelay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		go r.relay(c)
	}
}

func (r *cuttableRelay) relay(c net.Conn) {
	if !r.track(c) {
		_ = c.Close()
		return
	}
	up, err := net.DialTimeout("tcp", r.target, 5*time.Second)
	if err != nil || !r.track(up) {
		_ = c.Close()
		if up != nil {
			_ = up.Close()
		}
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	_ = c.Close()
	_ = up.Close()
	r.untrack(c, up)
}

// track registers an open connection; false when the relay is cut.
func (r *cuttableRelay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.isCut {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *cuttableRelay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		delete(r.conns, c)
	}
}

func (r *cuttableRelay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.isCut = true
	for c := range r.conns {
		_ = c.Close()
		delete(r.conns, c)
	}
}

func (r *cuttableRelay) restore() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.isCut = false
}

// requestLog records every API request of one engine with its answer.
type requestLog struct {
	mu       sync.Mutex
	restored time.Time
	reqs     []loggedRequest
}

type loggedRequest struct {
	at     time.Time
	method string
	path   string
	status int // 0: no answer
}

func (r loggedRequest) String() string {
	return fmt.Sprintf("%s %s %s -> %d", r.at.Format("15:04:05.000"), r.method, r.path, r.status)
}

// mutatesState says the request changed, or could have changed, the StatefulSet, a pod or the lease: a
// write the API server accepted. Opening a port-forward (POST pods/portforward) changes nothing; Events and
// the status ConfigMap are reports, listed in the test log but not judged here.
func (r loggedRequest) mutatesState() bool {
	if r.method == http.MethodGet || r.status < 200 || r.status > 299 {
		return false
	}
	switch {
	case strings.HasSuffix(r.path, "/portforward"):
		return false
	case strings.Contains(r.path, "/statefulsets/"), strings.Contains(r.path, "/pods/"), strings.Contains(r.path, "/leases/"):
		return true
	}
	return false
}

func (l *requestLog) add(r loggedRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, r)
}

// restore marks the moment access comes back, and returns it.
func (l *requestLog) restore() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.restored = time.Now()
	return l.restored
}

func (l *requestLog) sinceRestore() []loggedRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []loggedRequest
	for _, r := range l.reqs {
		if !l.restored.IsZero() && !r.at.Before(l.restored) {
			out = append(out, r)
		}
	}
	return out
}

type loggingTransport struct {
	next http.RoundTripper
	log  *requestLog
}

func (t loggingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	at := time.Now()
	resp, err := t.next.RoundTrip(req)
	r := loggedRequest{at: at, method: req.Method, path: req.URL.Path}
	if err == nil {
		r.status = resp.StatusCode
	}
	if req.URL.Query().Get("watch") != "true" {
		t.log.add(r)
	}
	return resp, err
}
