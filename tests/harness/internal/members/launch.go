package members

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// launch is everything needed to start one incarnation of a member, read from its pod, its StatefulSet and
// its TLS Secret. The container's own command line is not used: it names in-cluster paths and DNS names;
// the member runs the equivalent on 127.0.0.1.
type launch struct {
	version   string
	binary    string
	broken    bool
	readiness memberapi.Readiness
	grace     time.Duration
	tls       bool
	secret    string // TLS Secret name
	// flags are the container's TLS flags, honoured when it names both sides' files (tlsflags.go).
	flags  tlsFlags
	faults startFaults

	clientPort int // container ports, mapped by the PortForward rule
	peerPort   int
	replicas   int
	// dataDiesWithPod: the etcd container's data mount (DataMountPath) is an emptyDir, so the member's data is
	// wiped when its pod is recreated (not when its container restarts), and an empty data dir starts with
	// --initial-cluster-state=existing while another member answers (the start script docs/usage.md shows).
	dataDiesWithPod bool
}

// DataMountPath is where the harness's manifests mount the etcd data volume.
const DataMountPath = "/var/lib/etcd"

// dataOnEmptyDir says the container mounts an emptyDir at DataMountPath.
func dataOnEmptyDir(pod *corev1.Pod, c *corev1.Container) bool {
	for _, m := range c.VolumeMounts {
		if filepath.Clean(m.MountPath) != DataMountPath {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				return true
			}
		}
	}
	return false
}

// etcdContainer is the container named etcd, else the first one.
func etcdContainer(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "etcd" {
			return &pod.Spec.Containers[i]
		}
	}
	if len(pod.Spec.Containers) == 0 {
		return nil
	}
	return &pod.Spec.Containers[0]
}

// ownerStatefulSet returns the name of the StatefulSet that controls pod and the pod's ordinal.
func ownerStatefulSet(pod *corev1.Pod) (string, int, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "StatefulSet" {
		return "", 0, fmt.Errorf("pod %s/%s is not controlled by a StatefulSet; only StatefulSet pods get an etcd member", pod.Namespace, pod.Name)
	}
	suffix, ok := strings.CutPrefix(pod.Name, ref.Name+"-")
	ord, err := strconv.Atoi(suffix)
	if !ok || err != nil || ord < 0 {
		return "", 0, fmt.Errorf("pod %s/%s: name does not end in an ordinal of StatefulSet %s", pod.Namespace, pod.Name, ref.Name)
	}
	return ref.Name, ord, nil
}

// readLaunch decides what the member of pod runs.
func readLaunch(pod *corev1.Pod, sts *appsv1.StatefulSet, binDir string) (launch, error) {
	c := etcdContainer(pod)
	if c == nil {
		return launch{}, fmt.Errorf("pod %s/%s has no container", pod.Namespace, pod.Name)
	}
	l := launch{
		version:    pod.Annotations[memberapi.AnnotationVersion],
		broken:     pod.Annotations[memberapi.AnnotationBroken] == "true",
		readiness:  memberapi.ReadyOnStart,
		grace:      30 * time.Second,
		clientPort: memberapi.DefaultClientPort,
		peerPort:   memberapi.DefaultPeerPort,
		replicas:   1,
	}
	version, binary, err := etcdBinary(l.version)
	if err != nil {
		return launch{}, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	l.version, l.binary = version, filepath.Join(binDir, binary)
	if l.faults, err = readStartFaults(pod); err != nil {
		return launch{}, err
	}
	faulted, err := faultsApplyTo(pod)
	if err != nil {
		return launch{}, err
	}
	if !faulted {
		l.faults, l.broken = startFaults{}, false
	}
	if _, err := os.Stat(l.binary); err != nil {
		return launch{}, fmt.Errorf("etcd %s binary: %w (run make tools)", l.version, err)
	}
	if c.ReadinessProbe != nil {
		l.readiness = memberapi.ReadyOnProbe
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		l.grace = time.Duration(*g) * time.Second
	}
	for _, p := range c.Ports {
		switch p.Name {
		case memberapi.PortNameClient:
			l.clientPort = int(p.ContainerPort)
		case memberapi.PortNamePeer:
			l.peerPort = int(p.ContainerPort)
		}
	}
	if sts.Spec.Replicas != nil {
		l.replicas = int(*sts.Spec.Replicas)
	}
	l.secret = tlsSecretName(pod, c)
	if l.flags, err = readTLSFlags(pod, c); err != nil {
		return launch{}, err
	}
	l.tls = l.secret != "" || l.flags.honoured()
	l.dataDiesWithPod = dataOnEmptyDir(pod, c)
	return l, nil
}

// startFaults are how the pod's annotations make its member start: late, slowly or crash-looping.
type startFaults struct {
	startDelay time.Duration // the pod stays Pending this long before its first start
	serveDelay time.Duration // each start: the container runs this long before etcd does
	crashAfter time.Duration // each start: the container is killed this long after it started
	// clientsRefused: etcd runs and joins Raft, but the pod's client port refuses every connection.
	clientsRefused bool
}

// readStartFaults parses the fault annotations. A bad value is an error, so the pod stays Pending with the
// reason in the daemon log, as a kubelet keeps a pod with a bad spec from starting.
func readStartFaults(pod *corev1.Pod) (startFaults, error) {
	var f startFaults
	for key, dst := range map[string]*time.Duration{
		memberapi.AnnotationStartDelay: &f.startDelay,
		memberapi.AnnotationServeDelay: &f.serveDelay,
		memberapi.AnnotationCrashAfter: &f.crashAfter,
	} {
		d, err := memberapi.ParseSeconds(pod.Annotations[key])
		if err != nil {
			return f, fmt.Errorf("pod %s/%s: annotation %s: %w", pod.Namespace, pod.Name, key, err)
		}
		*dst = d
	}
	switch v := pod.Annotations[memberapi.AnnotationClientsRefused]; v {
	case "", "false":
	case "true":
		f.clientsRefused = true
	default:
		return f, fmt.Errorf("pod %s/%s: annotation %s=%q: want \"true\" or \"false\"", pod.Namespace, pod.Name, memberapi.AnnotationClientsRefused, v)
	}
	return f, nil
}

// faultsApplyTo says whether the template's start faults (and broken) are meant for pod: always, unless
// memberapi.AnnotationFaultOrdinals lists ordinals and pod's is not among them.
func faultsApplyTo(pod *corev1.Pod) (bool, error) {
	ordinals, err := memberapi.ParseOrdinals(pod.Annotations[memberapi.AnnotationFaultOrdinals])
	if err != nil {
		return false, fmt.Errorf("pod %s/%s: annotation %s: %w", pod.Namespace, pod.Name, memberapi.AnnotationFaultOrdinals, err)
	}
	if len(ordinals) == 0 {
		return true, nil
	}
	_, ordinal, err := ownerStatefulSet(pod)
	if err != nil {
		return false, err
	}
	return slices.Contains(ordinals, ordinal), nil
}

// startDelayOf is the start delay pod waits out: its annotation's, when the faults apply to it. A bad value
// reads as zero here; starting the pod reports it (readLaunch).
func startDelayOf(pod *corev1.Pod) time.Duration {
	delay, err := memberapi.ParseSeconds(pod.Annotations[memberapi.AnnotationStartDelay])
	if err != nil || delay == 0 {
		return 0
	}
	if faulted, err := faultsApplyTo(pod); err != nil || !faulted {
		return 0
	}
	return delay
}

// tlsSecretName finds the Secret volume that the etcd container mounts at the TLS dir, if any.
func tlsSecretName(pod *corev1.Pod, c *corev1.Container) string {
	dir := pod.Annotations[memberapi.AnnotationTLSDir]
	if dir == "" {
		dir = memberapi.DefaultTLSDir
	}
	for _, m := range c.VolumeMounts {
		if filepath.Clean(m.MountPath) != filepath.Clean(dir) {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return v.Secret.SecretName
			}
		}
	}
	return ""
}

// writeTLSFiles copies the member certificates from the Secret into dir (mode 0600), as the kubelet would
// project the Secret volume.
func writeTLSFiles(ctx context.Context, d *Daemon, namespace, secret, dir string) error {
	s, err := d.kube.CoreV1().Secrets(namespace).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading TLS secret %s/%s: %w", namespace, secret, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating TLS dir: %w", err)
	}
	for _, k := range []string{memberapi.SecretCA, memberapi.SecretServerCert, memberapi.SecretServerKey,
		memberapi.SecretPeerCert, memberapi.SecretPeerKey, memberapi.SecretClientCert, memberapi.SecretClientKey} {
		v, ok := s.Data[k]
		if !ok {
			return fmt.Errorf("TLS secret %s/%s has no key %q", namespace, secret, k)
		}
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", k, err)
		}
	}
	foreign := filepath.Join(dir, memberapi.SecretForeignCA) // optional: only for the daemon's own client
	if v, ok := s.Data[memberapi.SecretForeignCA]; ok {
		return os.WriteFile(foreign, v, 0o600)
	}
	if err := os.Remove(foreign); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing a stale %s: %w", memberapi.SecretForeignCA, err)
	}
	return nil
}

// etcdArgs is the member's command line: the same flags a production etcd pod runs with, on 127.0.0.1.
// Heartbeat and election timeout stay at etcd's defaults (100 ms / 1 s) so that elections cost what they cost
// in production; fsync is off because test data is disposable and the disk is shared.
func etcdArgs(name, dataDir, tlsDir, token, state string, l launch, self portSet, cluster []string) []string {
	scheme := "http"
	if l.tls {
		scheme = "https"
	}
	url := func(p int) string { return fmt.Sprintf("%s://127.0.0.1:%d", scheme, p) }
	args := []string{
		"--name=" + name,
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + url(self.Client),
		"--advertise-client-urls=" + url(self.Client),
		"--listen-peer-urls=" + url(self.Peer),
		"--initial-advertise-peer-urls=" + url(self.Peer),
		fmt.Sprintf("--listen-metrics-urls=http://127.0.0.1:%d", self.Metrics),
		"--initial-cluster=" + strings.Join(cluster, ","),
		"--initial-cluster-state=" + state,
		"--initial-cluster-token=" + token,
		"--unsafe-no-fsync",
		"--logger=zap",
		"--log-outputs=stderr",
	}
	switch {
	case l.flags.honoured():
		args = append(args, l.flags.args(filepath.Join(tlsDir, "flags"))...)
	case l.tls:
		f := func(k string) string { return filepath.Join(tlsDir, k) }
		args = append(args,
			"--client-cert-auth", "--trusted-ca-file="+f(memberapi.SecretCA),
			"--cert-file="+f(memberapi.SecretServerCert), "--key-file="+f(memberapi.SecretServerKey),
			"--peer-client-cert-auth", "--peer-trusted-ca-file="+f(memberapi.SecretCA),
			"--peer-cert-file="+f(memberapi.SecretPeerCert), "--peer-key-file="+f(memberapi.SecretPeerKey))
	}
	if l.broken {
		// An unknown flag: etcd exits at once with a clear message in the member log, like a bad revision.
		args = append(args, "--etcd-rollout-broken-revision")
	}
	return args
}
