// Package members is the member daemon behind cmd/etcd-members: the kubelet of etcd pods. It watches the
// pods that opt in (label memberapi.LabelMember) and runs a real etcd process on 127.0.0.1 for each, with
// StatefulSet semantics (stable name, ports and data), kubelet-like stops, readiness through the member
// kwok stages, kwok PortForward/Exec rules, and fault hooks exposed by an HTTP control API.
package members

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// Config is the daemon's command line.
type Config struct {
	Kubeconfig  string
	RunDir      string // tests/.run: members/ (data), logs/members/, pids/members/
	Listen      string // control API address, 127.0.0.1:PORT
	BinDir      string // etcd, etcd-v3.5 and etcd-v<release> (see etcdBinary)
	MemberPorts string // LO-HI
}

// Daemon owns every member.
type Daemon struct {
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	pods   corelisters.PodLister
	runDir string
	binDir string
	alloc  *portAllocator

	mu      sync.Mutex
	members map[string]*member // by namespace/pod
	ports   map[string]portSet // by namespace/pod, also for pods not created yet
	wg      sync.WaitGroup
}

// Run serves until ctx is done, then stops every member process and returns.
func Run(ctx context.Context, cfg Config) error {
	lo, hi, err := parsePortRange(cfg.MemberPorts)
	if err != nil {
		return err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	rc.QPS, rc.Burst = 100, 200
	d := &Daemon{
		runDir: cfg.RunDir, binDir: cfg.BinDir, alloc: newPortAllocator(lo, hi),
		members: map[string]*member{}, ports: map[string]portSet{},
	}
	if d.kube, err = kubernetes.NewForConfig(rc); err != nil {
		return fmt.Errorf("kube client: %w", err)
	}
	if d.dyn, err = dynamic.NewForConfig(rc); err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	d.killLeftovers()
	if err := d.loadPorts(); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("control API listen on %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{Handler: d.routes(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("control API stopped", "err", err)
		}
	}()

	informerCtx, stopInformers := context.WithCancel(ctx)
	defer stopInformers()
	podFactory := informers.NewSharedInformerFactoryWithOptions(d.kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = memberapi.LabelMember + "=true" }))
	podInformer := podFactory.Core().V1().Pods()
	d.pods = podInformer.Lister()
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { d.onPod(ctx, o, true) },
		UpdateFunc: func(_, o any) { d.onPod(ctx, o, true) },
		DeleteFunc: func(o any) { d.onPod(ctx, o, false) },
	}); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	nsFactory := informers.NewSharedInformerFactory(d.kube, 0)
	if _, err := nsFactory.Core().V1().Namespaces().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(o any) { d.onNamespaceDeleted(o) },
	}); err != nil {
		return fmt.Errorf("watching namespaces: %w", err)
	}
	podFactory.Start(informerCtx.Done())
	nsFactory.Start(informerCtx.Done())
	podFactory.WaitForCacheSync(informerCtx.Done())
	nsFactory.WaitForCacheSync(informerCtx.Done())
	slog.Info("etcd-members ready", "listen", ln.Addr().String(), "memberPorts", cfg.MemberPorts)

	<-ctx.Done()
	slog.Info("stopping: terminating every member")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	d.wg.Wait() // each member's run returns after stopping its process
	return nil
}

// onPod hands a pod event to the member of that pod name, creating it on first sight (not for a deletion:
// a late one must not bring back a member whose namespace is already forgotten).
func (d *Daemon) onPod(ctx context.Context, o any, create bool) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	m, err := d.member(ctx, pod.Namespace, pod.Name, create)
	if err != nil {
		slog.Error("member for pod", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		return
	}
	if m != nil {
		m.poke()
	}
}

// member returns the member of namespace/pod, starting its goroutine when create is set.
func (d *Daemon) member(ctx context.Context, namespace, pod string, create bool) (*member, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := namespace + "/" + pod
	if m, ok := d.members[key]; ok || !create {
		return m, nil
	}
	ps, err := d.portsOfLocked(namespace, pod)
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	m := &member{d: d, namespace: namespace, pod: pod, dir: d.memberDir(namespace, pod), ports: ps,
		kick: make(chan struct{}, 1)}
	d.members[key] = m
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer cancel()
		m.run(mctx)
	}()
	return m, nil
}

func (d *Daemon) memberDir(namespace, pod string) string {
	return filepath.Join(d.runDir, "members", namespace, pod)
}

// portsOf returns the ports of a member name, allocating and saving them on first use. Members of a
// StatefulSet ask for their peers' ports to build --initial-cluster before those pods exist.
func (d *Daemon) portsOf(namespace, pod string) (portSet, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.portsOfLocked(namespace, pod)
}

func (d *Daemon) portsOfLocked(namespace, pod string) (portSet, error) {
	key := namespace + "/" + pod
	if ps, ok := d.ports[key]; ok {
		return ps, nil
	}
	ps, err := d.alloc.allocate()
	if err != nil {
		return portSet{}, fmt.Errorf("ports for member %s: %w", key, err)
	}
	if err := savePorts(d.memberDir(namespace, pod), ps); err != nil {
		d.alloc.release(ps)
		return portSet{}, err
	}
	d.ports[key] = ps
	return ps, nil
}

// loadPorts restores the ports of members a previous daemon run created (their data dirs survive).
func (d *Daemon) loadPorts() error {
	dirs, _ := filepath.Glob(filepath.Join(d.runDir, "members", "*", "*"))
	for _, dir := range dirs {
		ps, ok, err := loadPorts(dir)
		if err != nil {
			return err
		}
		if ok {
			d.alloc.reserve(ps)
			d.ports[filepath.Base(filepath.Dir(dir))+"/"+filepath.Base(dir)] = ps
		}
	}
	return nil
}

// bootstrapping is true until every member of the StatefulSet has started once (has a member dir in its data
// dir). Until then a probe-mode pod is Ready on start: /readyz needs quorum, which needs the next pod.
func (d *Daemon) bootstrapping(namespace, sts string, replicas int) bool {
	for i := range replicas {
		if _, err := os.Stat(filepath.Join(d.memberDir(namespace, fmt.Sprintf("%s-%d", sts, i)), "data", "member")); err != nil {
			return true
		}
	}
	return false
}
