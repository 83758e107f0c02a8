package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// Etcd is one etcd cluster created by CreateEtcd: a headless Service and a partition-locked StatefulSet in
// Namespace, with real members behind its pods.
type Etcd struct {
	Spec      EtcdSpec
	Namespace string
	// TLS is the material in the cluster's Secret; nil without TLS.
	TLS *TLSMaterial
	c   *Cluster
}

// CreateEtcd applies spec in namespace (see ApplyEtcd) and waits until every member is healthy, except for a
// spec whose members never stay healthy (Broken, CrashAfter): that one it returns at once.
func (c *Cluster) CreateEtcd(ctx context.Context, namespace string, spec EtcdSpec) (*Etcd, error) {
	e, err := c.ApplyEtcd(ctx, namespace, spec)
	if err != nil || e.Spec.Broken || e.Spec.CrashAfter > 0 {
		return e, err
	}
	return e, e.WaitHealthy(ctx)
}

// ApplyEtcd creates spec's objects in namespace — the TLS Secret (when spec.TLS), the Service and the
// StatefulSet, locked at partition = replicas with pulumi.com/skipAwait — and returns without waiting, so
// a test can watch the members come up.
func (c *Cluster) ApplyEtcd(ctx context.Context, namespace string, spec EtcdSpec) (*Etcd, error) {
	spec, err := spec.WithDefaults()
	if err != nil {
		return nil, err
	}
	if spec.NodeName == "kwok-node-0" && c.NodeName != "" {
		spec.NodeName = c.NodeName
	}
	e := &Etcd{Spec: spec, Namespace: namespace, c: c}
	if spec.TLS {
		m, err := GenerateTLSWith(spec, namespace, spec.Certs)
		if err != nil {
			return nil, fmt.Errorf("TLS material for %s/%s: %w", namespace, spec.Name, err)
		}
		e.TLS = &m
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: spec.SecretName()},
			Type:       corev1.SecretTypeOpaque,
			Data:       m.SecretData(),
		}
		if _, err := c.Kube.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating TLS secret %s/%s: %w", namespace, spec.SecretName(), err)
		}
		if spec.SeparatePeerCA {
			peer := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: spec.PeerSecretName()}, Type: corev1.SecretTypeOpaque, Data: m.PeerSecretData()}
			if _, err := c.Kube.CoreV1().Secrets(namespace).Create(ctx, peer, metav1.CreateOptions{}); err != nil {
				return nil, fmt.Errorf("creating peer TLS secret %s/%s: %w", namespace, spec.PeerSecretName(), err)
			}
		}
	}
	svc, sts, err := Render(spec)
	if err != nil {
		return nil, err
	}
	if _, err := c.Kube.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating service %s/%s: %w", namespace, svc.Name, err)
	}
	if _, err := c.Kube.AppsV1().StatefulSets(namespace).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating statefulset %s/%s: %w", namespace, sts.Name, err)
	}
	return e, nil
}

// PodName is the pod of an ordinal.
func (e *Etcd) PodName(ordinal int) string { return fmt.Sprintf("%s-%d", e.Spec.Name, ordinal) }

// StatefulSet reads the StatefulSet.
func (e *Etcd) StatefulSet(ctx context.Context) (*appsv1.StatefulSet, error) {
	sts, err := e.c.Kube.AppsV1().StatefulSets(e.Namespace).Get(ctx, e.Spec.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading statefulset %s/%s: %w", e.Namespace, e.Spec.Name, err)
	}
	return sts, nil
}

// Pod reads the pod of an ordinal.
func (e *Etcd) Pod(ctx context.Context, ordinal int) (*corev1.Pod, error) {
	pod, err := e.c.Kube.CoreV1().Pods(e.Namespace).Get(ctx, e.PodName(ordinal), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading pod %s/%s: %w", e.Namespace, e.PodName(ordinal), err)
	}
	return pod, nil
}

// Members returns the daemon's view of the members, by ordinal.
func (e *Etcd) Members(ctx context.Context) ([]memberapi.Member, error) {
	all, err := e.c.Members.Members(ctx)
	if err != nil {
		return nil, err
	}
	var out []memberapi.Member
	for _, m := range all {
		if m.Namespace == e.Namespace && m.StatefulSet == e.Spec.Name {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ordinal < out[j].Ordinal })
	return out, nil
}

// Member returns the daemon's view of one member.
func (e *Etcd) Member(ctx context.Context, ordinal int) (memberapi.Member, error) {
	return e.c.Members.Member(ctx, e.Namespace, e.PodName(ordinal))
}

// ClientTLS is the client side of the cluster's mTLS, or nil without TLS.
func (e *Etcd) ClientTLS() (*tls.Config, error) {
	if e.TLS == nil {
		return nil, nil
	}
	return e.TLS.ClientConfig()
}

// Client dials the members of the given ordinals (all when none) directly on their local client ports: the
// tests' own view, not the product's port-forward path. The caller closes it.
func (e *Etcd) Client(ctx context.Context, ordinals ...int) (*clientv3.Client, error) {
	if len(ordinals) == 0 {
		for i := range e.Spec.Replicas {
			ordinals = append(ordinals, i)
		}
	}
	var eps []string
	for _, o := range ordinals {
		m, err := e.Member(ctx, o)
		if err != nil {
			return nil, err
		}
		eps = append(eps, m.ClientURL)
	}
	return e.NewClient(eps...)
}

// NewClient is an etcd client for the given endpoints with the cluster's TLS (if any): for endpoints the
// caller found another way, such as port-forwards. It is the harness's view: it also trusts the foreign CA
// of CertOptions.ForeignCA, which ClientTLS (the users' view) does not.
func (e *Etcd) NewClient(endpoints ...string) (*clientv3.Client, error) {
	var tc *tls.Config
	if e.TLS != nil {
		var err error
		if tc, err = e.TLS.harnessClientConfig(); err != nil {
			return nil, err
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: tc, DialTimeout: 3 * time.Second,
		Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s/%s %v: %w", e.Namespace, e.Spec.Name, endpoints, err)
	}
	return cli, nil
}

// WaitHealthy waits until every pod exists at the StatefulSet's current state, is Ready, its member
// process runs for that very pod, every member answers a linearizable read, and all agree on one leader
// with no learner.
func (e *Etcd) WaitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second+e.Spec.worstStart(e.Spec.Replicas))
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		last = e.checkHealthy(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("etcd %s/%s not healthy: %w (last: %v)", e.Namespace, e.Spec.Name, err, last)
	}
	return nil
}

func (e *Etcd) checkHealthy(ctx context.Context) error {
	members, err := e.Members(ctx)
	if err != nil {
		return err
	}
	if len(members) != e.Spec.Replicas {
		return fmt.Errorf("%d of %d members known to the daemon", len(members), e.Spec.Replicas)
	}
	var leader uint64
	for i, m := range members {
		pod, err := e.Pod(ctx, i)
		if err != nil {
			return err
		}
		if m.State != memberapi.StateRunning || m.PodUID != string(pod.UID) {
			return fmt.Errorf("member %s is %s for pod uid %q (pod has %s)", m.Pod, m.State, m.PodUID, pod.UID)
		}
		if !podReady(pod) {
			return fmt.Errorf("pod %s not Ready", pod.Name)
		}
		st, err := e.c.Members.Status(ctx, e.Namespace, m.Pod)
		if err != nil {
			return err
		}
		if st.IsLearner || st.Leader == 0 || (leader != 0 && st.Leader != leader) {
			return fmt.Errorf("member %s: leader %x learner %v (others see leader %x)", m.Pod, st.Leader, st.IsLearner, leader)
		}
		leader = st.Leader
		if err := e.linearizableRead(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

func (e *Etcd) linearizableRead(ctx context.Context, m memberapi.Member) error {
	cli, err := e.NewClient(m.ClientURL)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := cli.Get(ctx, "health"); err != nil {
		return fmt.Errorf("linearizable read on %s: %w", m.Pod, err)
	}
	return nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// SetPartition sets the StatefulSet's rollingUpdate.partition.
func (e *Etcd) SetPartition(ctx context.Context, partition int) error {
	patch := fmt.Sprintf(`{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":%d}}}}`, partition)
	_, err := e.c.Kube.AppsV1().StatefulSets(e.Namespace).Patch(ctx, e.Spec.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("setting partition of %s/%s to %d: %w", e.Namespace, e.Spec.Name, partition, err)
	}
	return nil
}

// UpdateTemplate changes the pod template with mutate and returns the new status.updateRevision once the
// StatefulSet controller has computed it. With the partition locked, no pod is recreated.
func (e *Etcd) UpdateTemplate(ctx context.Context, mutate func(*corev1.PodTemplateSpec)) (string, error) {
	var generation int64
	before := ""
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts, err := e.StatefulSet(ctx)
		if err != nil {
			return err
		}
		before = sts.Status.UpdateRevision
		mutate(&sts.Spec.Template)
		updated, err := e.c.Kube.AppsV1().StatefulSets(e.Namespace).Update(ctx, sts, metav1.UpdateOptions{})
		if err == nil {
			generation = updated.Generation
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("updating the pod template of %s/%s: %w", e.Namespace, e.Spec.Name, err)
	}
	var rev string
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		sts, err := e.StatefulSet(ctx)
		if err != nil {
			return false, err
		}
		rev = sts.Status.UpdateRevision
		return sts.Status.ObservedGeneration >= generation && rev != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("waiting for the StatefulSet controller to see generation %d of %s/%s: %w", generation, e.Namespace, e.Spec.Name, err)
	}
	if rev == before {
		return rev, fmt.Errorf("template change of %s/%s did not produce a new revision (still %s)", e.Namespace, e.Spec.Name, rev)
	}
	return rev, nil
}

// SetTemplateAnnotation is the usual template change: it sets one pod-template annotation.
func (e *Etcd) SetTemplateAnnotation(ctx context.Context, key, value string) (string, error) {
	return e.UpdateTemplate(ctx, func(t *corev1.PodTemplateSpec) {
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[key] = value
	})
}

// WaitPodRecreated waits until the pod of ordinal has a UID other than oldUID, is Ready, and its member
// process runs for it. It returns the new pod.
func (e *Etcd) WaitPodRecreated(ctx context.Context, ordinal int, oldUID types.UID) (*corev1.Pod, error) {
	var pod *corev1.Pod
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := e.Pod(ctx, ordinal)
		if apierrors.IsNotFound(err) {
			last = err
			return false, nil
		}
		if err != nil {
			return false, err
		}
		m, err := e.Member(ctx, ordinal)
		if err != nil {
			return false, err
		}
		pod, last = p, fmt.Errorf("pod uid %s ready %v, member %s for uid %s", p.UID, podReady(p), m.State, m.PodUID)
		return p.UID != oldUID && podReady(p) && m.State == memberapi.StateRunning && m.PodUID == string(p.UID), nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for %s/%s to be recreated: %w (last: %v)", e.Namespace, e.PodName(ordinal), err, last)
	}
	return pod, nil
}
