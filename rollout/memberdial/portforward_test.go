package memberdial

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// stuck is how long a test waits for something that must happen promptly before calling it blocked; it is
// a failure bound, not a speed claim.
const stuck = 5 * time.Second

// fakeOpener stands in for the API server's port-forward: opening a forward for a pod listed in gates waits
// until that gate is closed (and, when honoursContext, until the caller's context ends).
type fakeOpener struct {
	honoursContext bool
	gates          map[string]chan struct{}
	entered        chan string // a pod's name each time its forward starts opening

	mu       sync.Mutex
	forwards []*forward
	opened   map[string]int
	started  int
}

func newFakeOpener(honoursContext bool, slowPods ...string) *fakeOpener {
	o := &fakeOpener{honoursContext: honoursContext, gates: map[string]chan struct{}{}, entered: make(chan string, 100), opened: map[string]int{}}
	for _, pod := range slowPods {
		o.gates[pod] = make(chan struct{})
	}
	return o
}

func (o *fakeOpener) open(ctx context.Context, _, pod string, port int) (*forward, error) {
	o.mu.Lock()
	o.opened[pod]++
	o.started++
	n := o.started
	o.mu.Unlock()
	o.entered <- pod
	if gate := o.gates[pod]; gate != nil {
		if o.honoursContext {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		} else {
			<-gate
		}
	}
	f := &forward{addr: fmt.Sprintf("127.0.0.1:%d", 40000+n), stop: make(chan struct{}), done: make(chan struct{})}
	o.mu.Lock()
	o.forwards = append(o.forwards, f)
	o.mu.Unlock()
	return f, nil
}

// release lets pod's forward open; it may be called more than once.
func (o *fakeOpener) release(pod string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case <-o.gates[pod]:
	default:
		close(o.gates[pod])
	}
}

// releaseAll lets every forward open; deferred after Close, it keeps a failing test from hanging on the
// dialer's lock.
func (o *fakeOpener) releaseAll() {
	for pod := range o.gates {
		o.release(pod)
	}
}

func (o *fakeOpener) count(pod string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.opened[pod]
}

func (o *fakeOpener) all() []*forward {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*forward(nil), o.forwards...)
}

func stopped(f *forward) bool {
	select {
	case <-f.stop:
		return true
	default:
		return false
	}
}

// testPods is an API server holding pods etcd-0, etcd-1, ... of namespace db, with the given UIDs.
func testPods(uids ...string) *fake.Clientset {
	var pods []runtime.Object
	for i, uid := range uids {
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("etcd-%d", i), Namespace: "db", UID: types.UID(uid)}})
	}
	return fake.NewClientset(pods...)
}

type endpointResult struct {
	addr string
	err  error
}

// endpointAsync asks for pod's endpoint in the background.
func endpointAsync(ctx context.Context, p *PortForward, pod string) <-chan endpointResult {
	out := make(chan endpointResult, 1)
	go func() {
		addr, err := p.Endpoint(ctx, "db", pod, 2379)
		out <- endpointResult{addr, err}
	}()
	return out
}

func waitEntered(t *testing.T, o *fakeOpener, pod string) {
	t.Helper()
	select {
	case got := <-o.entered:
		require.Equal(t, pod, got)
	case <-time.After(stuck):
		t.Fatalf("the forward to %s never started opening", pod)
	}
}

func waitResult(t *testing.T, r <-chan endpointResult, what string) endpointResult {
	t.Helper()
	select {
	case got := <-r:
		return got
	case <-time.After(stuck):
		t.Fatalf("%s: Endpoint is blocked", what)
		return endpointResult{}
	}
}

// A pod whose forward is slow to open (up to 30 s against a real API server) holds up only the callers that
// need that pod: the other members are still reached.
func TestPortForwardSlowPodDoesNotBlockOthers(t *testing.T) {
	opener := newFakeOpener(false, "etcd-0")
	p := newPortForward(testPods("uid-0", "uid-1"), opener.open)
	defer p.Close()
	defer opener.releaseAll()

	slow := endpointAsync(context.Background(), p, "etcd-0")
	waitEntered(t, opener, "etcd-0")

	other := waitResult(t, endpointAsync(context.Background(), p, "etcd-1"), "etcd-1 while etcd-0's forward opens")
	require.NoError(t, other.err)
	assert.NotEmpty(t, other.addr)
	select {
	case <-slow:
		t.Fatal("etcd-0's Endpoint returned before its forward was open")
	default:
	}

	opener.release("etcd-0")
	got := waitResult(t, slow, "etcd-0 once its forward opened")
	require.NoError(t, got.err)
	assert.NotEqual(t, other.addr, got.addr)
}

// Callers that ask for the same pod at once share one forward: a second forward would be a second stream
// to the member, and one the dialer does not know to stop.
func TestPortForwardSamePodOpensOnce(t *testing.T) {
	const callers = 5
	opener := newFakeOpener(false, "etcd-0")
	p := newPortForward(testPods("uid-0"), opener.open)
	defer p.Close()
	defer opener.releaseAll()

	var results []<-chan endpointResult
	for range callers {
		results = append(results, endpointAsync(context.Background(), p, "etcd-0"))
	}
	waitEntered(t, opener, "etcd-0")
	opener.release("etcd-0")

	addrs := map[string]bool{}
	for i, r := range results {
		got := waitResult(t, r, fmt.Sprintf("caller %d", i))
		require.NoError(t, got.err)
		addrs[got.addr] = true
	}
	assert.Len(t, addrs, 1, "every caller got the same forward")
	assert.Equal(t, 1, opener.count("etcd-0"), "one forward was opened")

	// Later callers reuse it, until the pod is recreated.
	again, err := p.Endpoint(context.Background(), "db", "etcd-0", 2379)
	require.NoError(t, err)
	assert.True(t, addrs[again])
	assert.Equal(t, 1, opener.count("etcd-0"))
}

// A forward still opening when the dialer closes does not outlive it, whether the opening notices the
// dialer's cancellation or finishes anyway.
func TestPortForwardCloseStopsForwardsStillOpening(t *testing.T) {
	for _, tc := range []struct {
		name           string
		honoursContext bool
	}{
		{"the opening gives up when cancelled", true},
		{"the opening finishes after Close", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opener := newFakeOpener(tc.honoursContext, "etcd-0")
			p := newPortForward(testPods("uid-0", "uid-1"), opener.open)
			defer opener.releaseAll()
			open, err := p.Endpoint(context.Background(), "db", "etcd-1", 2379)
			require.NoError(t, err)
			require.NotEmpty(t, open)
			waitEntered(t, opener, "etcd-1")

			slow := endpointAsync(context.Background(), p, "etcd-0")
			waitEntered(t, opener, "etcd-0")
			require.NoError(t, p.Close())
			if !tc.honoursContext {
				opener.release("etcd-0")
			}
			got := waitResult(t, slow, "etcd-0 after Close")
			assert.ErrorIs(t, got.err, errClosed)
			for _, f := range opener.all() {
				assert.True(t, stopped(f), "forward %s was stopped", f.addr)
			}
			_, err = p.Endpoint(context.Background(), "db", "etcd-1", 2379)
			assert.ErrorIs(t, err, errClosed)
		})
	}
}

// When the caller opening a forward gives up, another caller still waiting for the same pod opens it itself
// instead of failing with the first caller's cancellation.
func TestPortForwardWaiterOpensWhenOpenerGivesUp(t *testing.T) {
	opener := newFakeOpener(true, "etcd-0")
	p := newPortForward(testPods("uid-0"), opener.open)
	defer p.Close()
	defer opener.releaseAll()

	impatient, cancel := context.WithCancel(context.Background())
	first := endpointAsync(impatient, p, "etcd-0")
	waitEntered(t, opener, "etcd-0")
	second := endpointAsync(context.Background(), p, "etcd-0")
	cancel()
	assert.ErrorIs(t, waitResult(t, first, "the caller that gave up").err, context.Canceled)

	waitEntered(t, opener, "etcd-0") // the waiting caller opens it anew
	opener.release("etcd-0")
	got := waitResult(t, second, "the caller still waiting")
	require.NoError(t, got.err)
	assert.NotEmpty(t, got.addr)
	assert.Equal(t, 2, opener.count("etcd-0"))
}

// A recreated pod (new UID) gets a new forward and the old one is stopped.
func TestPortForwardReplacesForwardOfRecreatedPod(t *testing.T) {
	opener, kube, p, clock := newClockedForward(t)

	before, err := p.Endpoint(context.Background(), "db", "etcd-0", 2379)
	require.NoError(t, err)
	require.NoError(t, kube.CoreV1().Pods("db").Delete(context.Background(), "etcd-0", metav1.DeleteOptions{}))
	_, err = kube.CoreV1().Pods("db").Create(context.Background(),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-0", Namespace: "db", UID: "uid-0-again"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	within, err := p.Endpoint(context.Background(), "db", "etcd-0", 2379)
	require.NoError(t, err)
	assert.Equal(t, before, within, "within podRecheck the forward is trusted without reading the pod")
	*clock = clock.Add(podRecheck)
	after, err := p.Endpoint(context.Background(), "db", "etcd-0", 2379)
	require.NoError(t, err)
	assert.NotEqual(t, before, after, "after podRecheck the pod is read again and the recreated pod gets a new forward")
	forwards := opener.all()
	require.Len(t, forwards, 2)
	assert.True(t, stopped(forwards[0]), "the old pod's forward was stopped")
	assert.False(t, stopped(forwards[1]))
}

// Asking for an endpoint again and again (every etcd call does) reads the pod once per podRecheck, not once per
// call: that GET was most of the engine's load on the API server.
func TestPortForwardReadsThePodOncePerRecheck(t *testing.T) {
	opener, kube, p, clock := newClockedForward(t)
	podGets := func() int {
		n := 0
		for _, a := range kube.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "pods" {
				n++
			}
		}
		return n
	}

	for range 10 {
		_, err := p.Endpoint(context.Background(), "db", "etcd-0", 2379)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, podGets(), "ten calls within podRecheck: one pod read")
	*clock = clock.Add(podRecheck)
	for range 10 {
		_, err := p.Endpoint(context.Background(), "db", "etcd-0", 2379)
		require.NoError(t, err)
	}
	assert.Equal(t, 2, podGets(), "one more read once podRecheck has passed")
	assert.Len(t, opener.all(), 1, "the same forward throughout")

	p.Release("db", "etcd-0", 2379)
	_, err := p.Endpoint(context.Background(), "db", "etcd-0", 2379)
	require.NoError(t, err)
	assert.Equal(t, 3, podGets(), "a released forward is never handed out: the pod is read and a new one opened")
	assert.Len(t, opener.all(), 2)
}

// newClockedForward is a PortForward over one pod (etcd-0, uid-0) whose clock the test moves by hand.
func newClockedForward(t *testing.T) (*fakeOpener, *fake.Clientset, *PortForward, *time.Time) {
	opener := newFakeOpener(false)
	kube := testPods("uid-0")
	p := newPortForward(kube, opener.open)
	t.Cleanup(func() { _ = p.Close(); opener.releaseAll() })
	clock := time.Now()
	p.now = func() time.Time { return clock }
	return opener, kube, p, &clock
}

// Ended lets a caller stop waiting on a forward that is gone: it follows the forward's own end, and an address
// the dialer no longer serves has ended already.
func TestPortForwardEndedFollowsTheForward(t *testing.T) {
	opener, _, p, _ := newClockedForward(t)
	addr, err := p.Endpoint(context.Background(), "db", "etcd-0", 2379)
	require.NoError(t, err)
	ended := p.Ended(addr)
	select {
	case <-ended:
		t.Fatal("a live forward has not ended")
	default:
	}
	close(opener.all()[0].done) // the stream was lost
	select {
	case <-ended:
	case <-time.After(stuck):
		t.Fatal("the forward's end is not seen")
	}
	select {
	case <-p.Ended("127.0.0.1:1"):
	default:
		t.Fatal("an address the dialer does not serve counts as ended")
	}
}
