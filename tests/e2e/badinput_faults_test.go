//go:build e2e && faults

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/sdk/go/etcdrollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// badInputProgram is the old call shape in Go, every input from stack config so each preview can get one
// wrong. There is no dependsOnSts: nothing in the program creates the StatefulSet, so a missing one is bad
// input already on the first create.
func badInputProgram(ctx *pulumi.Context) error {
	cfg := config.New(ctx, "")
	args := &etcdrollout.EtcdRollingUpgradeArgs{
		StsName:         pulumi.String(cfg.Require("stsName")),
		Namespace:       pulumi.String(cfg.Require("namespace")),
		ServiceName:     pulumi.String(cfg.Require("serviceName")),
		VersionHash:     pulumi.String("v1"),
		CooldownSeconds: pulumi.Int(0),
		Kubeconfig:      pulumi.String(cfg.Require("kubeconfig")),
	}
	if v, err := cfg.TryInt("readyTimeoutSeconds"); err == nil {
		args.ReadyTimeoutSeconds = pulumi.Int(v)
	}
	if v, err := cfg.TryInt("healthTimeoutSeconds"); err == nil {
		args.HealthTimeoutSeconds = pulumi.Int(v)
	}
	if dir := cfg.Get("tlsDir"); dir != "" {
		args.Tls = &etcdrollout.TLSArgs{CaFile: pulumi.String(dir + "/ca.crt"),
			CertFile: pulumi.String(dir + "/client.crt"), KeyFile: pulumi.String(dir + "/client.key")}
	}
	_, err := etcdrollout.NewEtcdRollingUpgrade(ctx, "etcd", args)
	return err
}

// TestFaultsBadInput: each bad input is refused by `pulumi preview`, with a message that names the field,
// before anything is touched. One namespace holds a real 3-member etcd and a few StatefulSets with no etcd
// behind their pods; one stack previews every case, then one up records the StatefulSet's UID and a
// recreated StatefulSet (the resolved cluster is not the one in the state) is refused.
func TestFaultsBadInput(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	ctx := t.Context()
	ns := c.Namespace(t)
	_, err := c.CreateEtcd(ctx, ns, harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", Replicas: 3})
	require.NoError(t, err)
	plainArgs := []string{"--listen-client-urls=http://0.0.0.0:2379"}
	tlsArgs := []string{"--listen-client-urls=https://0.0.0.0:2379", "--cert-file=/var/lib/etcd-tls/server.crt"}
	for _, s := range []*appsv1.StatefulSet{
		noEtcdStatefulSet("not-etcd", 3, plainArgs, c.NodeName),
		noEtcdStatefulSet("tls-etcd", 3, tlsArgs, c.NodeName),
		noEtcdStatefulSet("zero", 0, plainArgs, c.NodeName),
		noEtcdStatefulSet("two", 2, plainArgs, c.NodeName),
		noEtcdStatefulSetOf("old35", 3, plainArgs, c.NodeName, "registry.k8s.io/etcd:3.5.21-0"),
		noEtcdStatefulSet("scratch-new", 3, append([]string{"--data-dir=/var/lib/etcd/data", "--initial-cluster-state=new"}, plainArgs...), c.NodeName),
		withPreStop(noEtcdStatefulSet("prestop", 3, plainArgs, c.NodeName), "/opt/bitnami/scripts/etcd/prestop.sh"),
	} {
		_, err := c.Kube.AppsV1().StatefulSets(ns).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	waitPodsReady(ctx, t, c, ns, "not-etcd-0", "not-etcd-1", "not-etcd-2", "old35-0", "old35-1", "old35-2")
	// old35's members run 3.5.21; its template now says 3.6.8, held back by the partition.
	_, err = c.Kube.AppsV1().StatefulSets(ns).Patch(ctx, "old35", types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"etcd","image":"registry.k8s.io/etcd:3.6.8-0"}]}}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	// scratch-new's and prestop's templates change too: their refusals are about a roll, and only a pending
	// one is refused (a template nobody rolls restarts nothing).
	for _, name := range []string{"scratch-new", "prestop"} {
		_, err = c.Kube.AppsV1().StatefulSets(ns).Patch(ctx, name, types.StrategicMergePatchType,
			[]byte(`{"spec":{"template":{"metadata":{"annotations":{"example.etcd-rollout/pod-revision":"2"}}}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	}

	r := newGoRunner(t, p, "etcd-rollout-badinput", badInputProgram)
	good := map[string]string{"kubeconfig": c.Kubeconfig, "namespace": ns, "stsName": "etcd", "serviceName": "etcd-headless",
		"readyTimeoutSeconds": "", "healthTimeoutSeconds": "", "tlsDir": ""}
	with := func(changes map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range good {
			out[k] = v
		}
		for k, v := range changes {
			out[k] = v
		}
		return out
	}
	before := snapshot(ctx, t, c, ns)

	cases := []struct {
		name   string
		config map[string]string
		// setup changes the cluster before the preview; it returns the undo.
		setup func(t *testing.T) func()
		// want: each must appear in the preview's error text; the first names the field.
		want []string
	}{
		{name: "missing StatefulSet", config: with(map[string]string{"stsName": "etcd-missing"}),
			want: []string{"stsName", "StatefulSet " + ns + "/etcd-missing was not found on the cluster"}},
		{name: "missing namespace", config: with(map[string]string{"namespace": "no-such-namespace"}),
			want: []string{"namespace", `namespace "no-such-namespace" was not found on the cluster`}},
		// Pods Ready for less than readyTimeoutSeconds may be members still loading their database: only
		// pods Ready for longer that nobody answers on are "not etcd".
		{name: "not etcd", config: with(map[string]string{"stsName": "not-etcd", "serviceName": "not-etcd", "readyTimeoutSeconds": "2"}),
			setup: func(t *testing.T) func() {
				waitReadyFor(ctx, t, c, ns, 2*time.Second, "not-etcd-0", "not-etcd-1", "not-etcd-2")
				return func() {}
			},
			want: []string{"stsName", "no member of StatefulSet " + ns + "/not-etcd answered as etcd on http port 2379 although 3 pod(s) have been Ready for over 2s"}},
		{name: "0 replicas", config: with(map[string]string{"stsName": "zero", "serviceName": "zero"}),
			want: []string{"stsName", "spec.replicas 0"}},
		// One replica is no bad input: its restart needs acceptWriteOutage, which the preview of a template
		// change asks for (TestFaultsOneMemberExampleThroughPulumiUp).
		{name: "even replicas", config: with(map[string]string{"stsName": "two", "serviceName": "two"}),
			want: []string{"stsName", "spec.replicas 2: an even etcd cluster"}},
		{name: "serviceName not the StatefulSet's", config: with(map[string]string{"serviceName": "etcd-client"}),
			want: []string{"serviceName", `serviceName "etcd-client" is not the governing Service of StatefulSet ` + ns + `/etcd, which is "etcd-headless"`}},
		{name: "TLS files not mounted", config: with(map[string]string{"stsName": "tls-etcd", "serviceName": "tls-etcd", "tlsDir": "/etc/etcd/pki"}),
			want: []string{"tls.caFile", `tls.caFile "/etc/etcd/pki/ca.crt" is not on any volume mounted in container etcd`,
				"tls.certFile", "tls.keyFile"}},
		{name: "TLS given for a plain cluster", config: with(map[string]string{"tlsDir": "/var/lib/etcd"}),
			want: []string{"tls", "tls is set, but container etcd of StatefulSet " + ns + "/etcd serves clients over plain http"}},
		{name: "TLS not given for a TLS cluster", config: with(map[string]string{"stsName": "tls-etcd", "serviceName": "tls-etcd"}),
			want: []string{"tls", "serves clients over TLS (https client URLs or --cert-file), but tls is not set"}},
		{name: "readyTimeoutSeconds 0", config: with(map[string]string{"readyTimeoutSeconds": "0"}),
			want: []string{"readyTimeoutSeconds", "readyTimeoutSeconds is 0: it must be a positive number of seconds"}},
		{name: "healthTimeoutSeconds negative", config: with(map[string]string{"healthTimeoutSeconds": "-5"}),
			want: []string{"healthTimeoutSeconds", "healthTimeoutSeconds is -5: it must be a positive number of seconds"}},
		{name: "3.5 older than 3.5.32 to 3.6", config: with(map[string]string{"stsName": "old35", "serviceName": "old35"}),
			want: []string{"stsName", "cannot be rolled onto old35-0, which runs registry.k8s.io/etcd:3.5.21-0: etcd 3.5.21 -> 3.6.8: etcd supports upgrading to 3.6 only from 3.5.32 or later"}},
		// Members whose data dies with their pod (issue 32): a template that would found a new cluster when a
		// replaced member starts, and pods that remove their own member on every stop.
		{name: "emptyDir data with --initial-cluster-state=new", config: with(map[string]string{"stsName": "scratch-new", "serviceName": "scratch-new"}),
			want: []string{"stsName", "the template starts etcd with --initial-cluster-state=new, but a member whose data dies with its pod"}},
		{name: "a preStop hook that removes the member", config: with(map[string]string{"stsName": "prestop", "serviceName": "prestop"}),
			want: []string{"stsName", "/opt/bitnami/scripts/etcd/prestop.sh", "acceptPreStopMemberRemoval"}},
		{name: "partition lowered by someone else", config: good,
			setup: func(t *testing.T) func() {
				setPartition(ctx, t, c, ns, "etcd", 1)
				return func() { setPartition(ctx, t, c, ns, "etcd", 3) }
			},
			want: []string{"stsName", "partition 1 with 3 replicas and no rollout holds Lease etcd-etcd-rollout: something else lowered it"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				defer tc.setup(t)()
			}
			res, err := r.preview(ctx, tc.config)
			require.Error(t, err, "preview must refuse %s:\n%s", tc.name, res.explained())
			text := res.Text + err.Error()
			for _, w := range tc.want {
				assert.Contains(t, text, w)
			}
			t.Logf("pulumi preview refused %s:\n%s", tc.name, refusal(text))
		})
	}
	// Only the test's own partition edit and its undo changed a StatefulSet; no rollout Lease was taken.
	before["etcd"] += 2
	after := snapshot(ctx, t, c, ns)
	for name, gen := range before {
		assert.Equal(t, gen, after[name], "StatefulSet %s: generation (spec) unchanged by the previews", name)
	}
	_, err = c.Kube.CoordinationV1().Leases(ns).Get(ctx, "etcd-etcd-rollout", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no rollout Lease after previews: %v", err)

	// A kubeconfig for another cluster: the state records the StatefulSet's UID on the first up; the same
	// name with another UID (here: recreated, its pods orphaned and adopted, etcd untouched) is refused.
	res, err := r.up(ctx, good)
	require.NoError(t, err, "up:\n%s", res.explained())
	oldUID := recreateStatefulSet(ctx, t, c, ns, "etcd")
	res, err = r.preview(ctx, good)
	require.Error(t, err, "preview against another StatefulSet UID must fail:\n%s", res.explained())
	assert.Contains(t, res.Text+err.Error(), "but this rollout was first run on UID "+oldUID)
	t.Logf("pulumi preview refused a different StatefulSet UID:\n%s", refusal(res.Text+err.Error()))
	require.NoError(t, r.destroy(ctx))
}

// noEtcdStatefulSet is a locked StatefulSet whose pods run on the kwok node with no etcd behind them (no
// harness opt-in label): Ready pods that nobody answers on.
func noEtcdStatefulSet(name string, replicas int32, args []string, node string) *appsv1.StatefulSet {
	return noEtcdStatefulSetOf(name, replicas, args, node, "registry.k8s.io/etcd:3.6.8-0")
}

func noEtcdStatefulSetOf(name string, replicas int32, args []string, node, image string) *appsv1.StatefulSet {
	labels := map[string]string{"app.kubernetes.io/name": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas), ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(replicas)}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
					Name: "etcd", Image: image, Command: []string{"etcd"}, Args: args,
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
				}}, Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}},
			},
		},
	}
}

// withPreStop gives the etcd container of s a preStop hook that runs command, as the Bitnami chart's
// removeMemberOnContainerTermination does.
func withPreStop(s *appsv1.StatefulSet, command ...string) *appsv1.StatefulSet {
	s.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: command}}}
	return s
}

func waitPodsReady(ctx context.Context, t *testing.T, c *harness.Cluster, ns string, pods ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, name := range pods {
			pod, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || !podReady(pod) {
				return false
			}
		}
		return true
	}, 2*time.Minute, 500*time.Millisecond, "pods %v Ready", pods)
}

// waitReadyFor waits until every pod has been Ready for at least d by its Ready condition's transition time.
func waitReadyFor(ctx context.Context, t *testing.T, c *harness.Cluster, ns string, d time.Duration, pods ...string) {
	t.Helper()
	waitPodsReady(ctx, t, c, ns, pods...)
	var latest time.Time
	for _, name := range pods {
		pod, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.LastTransitionTime.After(latest) {
				latest = cond.LastTransitionTime.Time
			}
		}
	}
	time.Sleep(time.Until(latest.Add(d + time.Second)))
}

func podReady(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// snapshot is each StatefulSet's generation, which any spec write (partition, template, strategy) raises.
func snapshot(ctx context.Context, t *testing.T, c *harness.Cluster, ns string) map[string]int64 {
	t.Helper()
	list, err := c.Kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]int64{}
	for _, s := range list.Items {
		out[s.Name] = s.Generation
	}
	return out
}

func setPartition(ctx context.Context, t *testing.T, c *harness.Cluster, ns, name string, partition int) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"updateStrategy":{"rollingUpdate":{"partition":%d}}}}`, partition)
	_, err := c.Kube.AppsV1().StatefulSets(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

// recreateStatefulSet deletes the StatefulSet leaving its pods (orphan) and creates it again from its spec:
// the same name on the same cluster with a new UID, which is what the state check sees of another cluster.
func recreateStatefulSet(ctx context.Context, t *testing.T, c *harness.Cluster, ns, name string) (oldUID string) {
	t.Helper()
	old, err := c.Kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, c.Kube.AppsV1().StatefulSets(ns).Delete(ctx, name,
		metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}))
	require.Eventually(t, func() bool {
		_, err := c.Kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 200*time.Millisecond)
	_, err = c.Kube.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: old.Name, Labels: old.Labels, Annotations: old.Annotations},
		Spec:       old.Spec,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return string(old.UID)
}

// refusal keeps the lines of a preview's text that say what was wrong.
func refusal(text string) string {
	var out strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "error:") || strings.Contains(line, "has a problem") {
			out.WriteString(line + "\n")
		}
	}
	return out.String()
}
