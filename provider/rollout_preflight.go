package provider

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// clusterFacts is what Check reads from the cluster to refuse bad input before anything is touched: the
// StatefulSet's spec says most of what can be wrong without contacting a single member.
type clusterFacts struct {
	// StatefulSet is nil when it does not exist.
	StatefulSet *appsv1.StatefulSet
	// NamespaceMissing is true only when the namespace is known not to exist (a namespace-scoped Role
	// cannot read namespaces; then it is false and the message names both fields).
	NamespaceMissing bool
	// LeaseHeld says the rollout Lease names a holder: a run, live or dead, owns a lowered partition, and
	// the engine takes it over or waits for it. Without one, a lowered partition is someone else's doing.
	LeaseHeld bool
	// Lease is who holds the rollout Lease and for how long it promised to renew; zero when it is free,
	// missing or could not be read.
	Lease leaseFacts
	// MemberImages are the etcd container images the existing pods run, by pod name: what each member runs
	// now, while the template says what it will run.
	MemberImages map[string]string
	// MemberV2 are the pods whose etcd runs with --enable-v2: none may roll onto 3.6 (rollout.CheckV2Store).
	MemberV2 []string
	// Applied is what the last rollout published of the template it rolled to (its status ConfigMap): its
	// target revision and the versionHash it was given. Zero when none published.
	Applied rollout.RolloutStatus
}

// leaseFacts describe the rollout Lease's holder as last written, for the preview: whether it is alive is
// judged only by the engine, which watches the Lease for a renewal.
type leaseFacts struct {
	Name     string // namespace/name
	Holder   string
	Duration time.Duration
}

// preflightFailures checks the inputs against the live StatefulSet. mustExist says nothing in this update
// creates the StatefulSet, so a missing one is a bad input. Each failure names the input to fix.
func preflightFailures(in RolloutArgs, f clusterFacts, mustExist bool) []p.CheckFailure {
	target := in.target()
	var failures []p.CheckFailure
	fail := func(prop, format string, args ...any) {
		failures = append(failures, p.CheckFailure{Property: prop, Reason: fmt.Sprintf(format, args...)})
	}
	sts := f.StatefulSet
	if sts == nil {
		switch {
		case !mustExist:
		case f.NamespaceMissing:
			fail("namespace", "namespace %q was not found on the cluster, so StatefulSet %s cannot be there: check namespace (and the kubeconfig/context in use)", in.Namespace, target)
		default:
			fail("stsName", "StatefulSet %s was not found on the cluster: check stsName and namespace (and the kubeconfig/context in use); "+
				"if this program creates it, pass it as dependsOnSts", target)
		}
		return failures
	}

	replicas := 1 // the API's default
	if sts.Spec.Replicas != nil {
		replicas = int(*sts.Spec.Replicas)
	}
	switch {
	case replicas == 0:
		fail("stsName", "StatefulSet %s has spec.replicas 0: there is no etcd member to roll; scale it up first", target)
	case replicas%2 == 0:
		fail("stsName", "StatefulSet %s has spec.replicas %d: an even etcd cluster tolerates no more failures than one member "+
			"fewer (2 members tolerate none, so no member can restart safely). Use an odd count: 3 or 5", target, replicas)
	}
	if sts.Spec.ServiceName != "" && in.ServiceName != sts.Spec.ServiceName {
		fail("serviceName", "serviceName %q is not the governing Service of StatefulSet %s, which is %q: members are "+
			"reached and verified by their DNS names under that Service", in.ServiceName, target, sts.Spec.ServiceName)
	}
	switch ru := sts.Spec.UpdateStrategy.RollingUpdate; {
	case sts.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType:
		fail("stsName", "StatefulSet %s uses updateStrategy OnDelete; the rollout needs RollingUpdate with "+
			"rollingUpdate.partition = replicas (%d)", target, replicas)
	case replicas > 0 && !f.LeaseHeld && (ru == nil || ru.Partition == nil || int(*ru.Partition) < replicas):
		partition := 0
		if ru != nil && ru.Partition != nil {
			partition = int(*ru.Partition)
		}
		fail("stsName", "StatefulSet %s has partition %d with %d replicas and no rollout holds Lease %s: something else "+
			"lowered it (or the StatefulSet was never locked), and the controller may be restarting members on its own. "+
			"Set spec.updateStrategy.rollingUpdate.partition back to %d (`etcd-rollout unlock` does), then run again",
			target, partition, replicas, rollout.LeaseName(in.StsName), replicas)
	}
	failures = append(failures, tlsFailures(in, target, rollout.EtcdContainer(sts.Spec.Template.Spec.Containers))...)
	failures = append(failures, versionFailures(target, sts, f.MemberImages, f.MemberV2)...)
	return failures
}

// versionFailures asks the rollout's gate (rollout.GatePreflight) about the template's etcd container before
// any member is contacted: an image etcd cannot roll to from what a member runs now (say 3.5.21 -> 3.6: the
// members would fail to join after the first restart), the v2 store before 3.6, and etcd flags (and ETCD_*
// variables) that the version its tag names does not accept, such as --feature-gates for 3.5 or --enable-v2
// for 3.6 (a member restarted with one would not start). An untagged image is left to the engine, which asks a
// member on that image. The preview of a template change still sees the old template; the check bites at
// `pulumi up`, whose Check runs after the StatefulSet is applied (locked, so nothing has rolled), in any later
// preview, and in the engine itself before its first disruption.
func versionFailures(target string, sts *appsv1.StatefulSet, memberImages map[string]string, v2Members []string) []p.CheckFailure {
	c := rollout.EtcdContainer(sts.Spec.Template.Spec.Containers)
	if c == nil {
		return nil
	}
	err := rollout.GatePreflight(c, memberImages, v2Members)
	var flags *rollout.FlagsError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &flags):
		return []p.CheckFailure{{Property: "stsName", Reason: fmt.Sprintf("StatefulSet %s, container %s: %v", target, c.Name, flags)}}
	}
	return []p.CheckFailure{{Property: "stsName", Reason: fmt.Sprintf("StatefulSet %s: %v", target, err)}}
}

// tlsFailures compares the tls input with how the etcd container serves clients: TLS for a plain cluster,
// no TLS for a TLS cluster, and files that are not on any volume of the container all fail at the first
// dial, after the rollout has begun, so they are refused here.
func tlsFailures(in RolloutArgs, target string, c *corev1.Container) []p.CheckFailure {
	if c == nil {
		return nil
	}
	var failures []p.CheckFailure
	mode := clientTLSMode(c)
	switch {
	case in.TLS == nil && mode == servesTLS:
		failures = append(failures, p.CheckFailure{Property: "tls", Reason: fmt.Sprintf(
			"container %s of StatefulSet %s serves clients over TLS (https client URLs or --cert-file), but tls is not set: "+
				"give tls {caFile, certFile, keyFile} as the paths mounted inside that container", c.Name, target)})
	case in.TLS != nil && mode == servesPlain:
		failures = append(failures, p.CheckFailure{Property: "tls", Reason: fmt.Sprintf(
			"tls is set, but container %s of StatefulSet %s serves clients over plain http (--listen-client-urls): "+
				"leave tls out, or enable client TLS in etcd first", c.Name, target)})
	}
	if in.TLS == nil {
		return failures
	}
	var mounts []string
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, m.MountPath)
	}
	for _, f := range []struct{ prop, file string }{
		{"tls.caFile", in.TLS.CaFile}, {"tls.certFile", in.TLS.CertFile}, {"tls.keyFile", in.TLS.KeyFile},
	} {
		if f.file != "" && !underAny(f.file, mounts) {
			failures = append(failures, p.CheckFailure{Property: f.prop, Reason: fmt.Sprintf(
				"%s %q is not on any volume mounted in container %s of StatefulSet %s (mounts: %s): the rollout reads "+
					"the TLS material from the volume behind the path", f.prop, f.file, c.Name, target, strings.Join(mounts, ", "))})
		}
	}
	return failures
}

type tlsMode int

const (
	unknownTLS tlsMode = iota
	servesPlain
	servesTLS
)

// clientTLSMode reads etcd's client-side TLS settings from the container's flags (a `sh -c` script's too)
// and ETCD_* environment, as the engine reads them. Unknown (say, flags from a config file) refuses nothing.
func clientTLSMode(c *corev1.Container) tlsMode {
	settings := rollout.EtcdFlagValues(c)
	urls := settings["listen-client-urls"] + "," + settings["advertise-client-urls"]
	switch {
	case settings["cert-file"] != "" || settings["auto-tls"] == "true" || strings.Contains(urls, "https://"):
		return servesTLS
	case strings.Contains(urls, "http://"):
		return servesPlain
	}
	return unknownTLS
}

func underAny(file string, dirs []string) bool {
	file = path.Clean(file)
	for _, d := range dirs {
		d = path.Clean(d)
		if file == d || strings.HasPrefix(file, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

// unansweredFailure refuses a StatefulSet none of whose members answers etcd's Status RPC although some of
// its pods have been Ready for longer than the ready timeout: it is not etcd, or clientPort or tls is wrong.
// A pod Ready for less than that may be a member still loading its database (Ready only says the container
// started) or a new cluster without a leader yet: the engine waits for those, up to the same ready timeout,
// as the old Job waited for an elected leader, so Check must not call them "not etcd". Pods that are not
// Ready at all (a cluster that is down or still starting) are left to the engine's guard too.
func unansweredFailure(in RolloutArgs, s rollout.ClusterState, now time.Time) *p.CheckFailure {
	settle := engineConfig(in, "").ReadyTimeout
	ready, problem := 0, ""
	for _, m := range s.Members {
		if m.Reachable {
			return nil
		}
		if m.Ready && !m.ReadySince.IsZero() && now.Sub(m.ReadySince) >= settle {
			ready++
			if problem == "" {
				problem = fmt.Sprintf("%s: %s", m.Pod, m.Problem)
			}
		}
	}
	if ready == 0 {
		return nil
	}
	port := 2379
	if in.ClientPort != nil {
		port = *in.ClientPort
	}
	scheme := "http"
	if in.TLS != nil {
		scheme = "https"
	}
	return &p.CheckFailure{Property: "stsName", Reason: fmt.Sprintf(
		"no member of StatefulSet %s/%s answered as etcd on %s port %d although %d pod(s) have been Ready for over %s (%s): is it an etcd "+
			"StatefulSet, and are clientPort and tls right?", in.Namespace, in.StsName, scheme, port, ready, settle, problem)}
}
