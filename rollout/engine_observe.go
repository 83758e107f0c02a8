package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/configfile"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/durability"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/health"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/kubeapi"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/podfile"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/poll"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/probes"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/selfremoval"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/statefulset"
)

// Observe reads the StatefulSet, its pods and every member's own view of etcd, all afresh. It fails only
// when the StatefulSet cannot be read; members that do not answer are reported with their Problem.
func (e *Engine) Observe(ctx context.Context) (ClusterState, error) {
	sts, err := e.settledStatefulSet(ctx)
	if err != nil {
		return ClusterState{}, err
	}
	st := stsState(sts)
	st.ObservedAt = time.Now()
	st.PodTemplate = &sts.Spec.Template.Spec
	files := e.podFiles.Memo()
	if c := EtcdContainer(sts.Spec.Template.Spec.Containers); c != nil {
		claims := make([]string, 0, len(sts.Spec.VolumeClaimTemplates))
		for _, vct := range sts.Spec.VolumeClaimTemplates {
			claims = append(claims, vct.Name)
		}
		st.Durability = durabilityOf(ctx, files, &sts.Spec.Template.Spec, c, claims)
		if file := EtcdFlagValues(c)["config-file"]; file != "" {
			// etcd reads only the file then: what it says of the initial cluster state is what counts.
			settings, err := configfile.Read(ctx, files, &sts.Spec.Template.Spec, c, file)
			st.TemplateInitialClusterState = settings.InitialClusterState
			st.TemplateInitialClusterStateOmitted = err == nil && settings.InitialClusterState == ""
		}
	}
	if st.Replicas > 0 && sts.Spec.ServiceName != "" && sts.Spec.ServiceName != e.cfg.ServiceName {
		return st, fmt.Errorf("%w: serviceName %q is not the StatefulSet's governing service %q", ErrBlocked, e.cfg.ServiceName, sts.Spec.ServiceName)
	}

	st.Members = make([]MemberState, st.Replicas)
	var wg sync.WaitGroup
	for i := range st.Members {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			st.Members[i] = e.observeMember(ctx, files, i)
		}(i)
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return st, err
	}
	e.observeMemberList(ctx, &st)
	e.observeClusterVersion(ctx, &st)
	if planner.AnyDataLost(st) {
		// Only where a member is replaced rather than restarted: a replacement a killed run left half done
		// is found from its record.
		if st.Replacing, err = e.records.Load(ctx); err != nil {
			return st, err
		}
	}
	return st, nil
}

// settleTimeout is how long settledStatefulSet waits for the controller to observe the latest spec.
var settleTimeout = 10 * time.Second

// settledStatefulSet reads the StatefulSet, giving the controller a few seconds to observe the latest spec
// (right after our own partition write its status is briefly stale). After that the status may still be
// stale (a controller manager catching up after an API server restart); stsState then leaves the
// updateRevision unknown, and the planner holds. While a run's watch can answer, it is read from there
// (settledFromWatch), else with GETs; the first successful GET of a run starts the watch.
func (e *Engine) settledStatefulSet(ctx context.Context) (*appsv1.StatefulSet, error) {
	deadline := time.Now().Add(settleTimeout)
	if sts, err := e.settledFromWatch(ctx, deadline); sts != nil || err != nil {
		return sts, err
	}
	// Past the deadline the last read is the answer, settled or not: the look says done then.
	sts, err := poll.Until(ctx, time.Time{}, poll.Every(100*time.Millisecond), func(ctx context.Context) (*appsv1.StatefulSet, bool, error) {
		var sts *appsv1.StatefulSet
		err := kubeapi.WithRetry(ctx, func(ctx context.Context) (err error) {
			sts, err = e.kube.AppsV1().StatefulSets(e.cfg.Namespace).Get(ctx, e.cfg.StatefulSet, metav1.GetOptions{})
			return err
		})
		if apierrors.IsNotFound(err) {
			return nil, false, fmt.Errorf("%w: StatefulSet %s/%s not found", ErrBlocked, e.cfg.Namespace, e.cfg.StatefulSet)
		}
		if err != nil {
			return nil, false, fmt.Errorf("reading StatefulSet %s/%s: %w", e.cfg.Namespace, e.cfg.StatefulSet, err)
		}
		e.startWatch(sts)
		return sts, sts.Status.ObservedGeneration >= sts.Generation || time.Now().After(deadline), nil
	})
	if err != nil {
		return nil, err
	}
	return sts, nil
}

// settledFromWatch is settledStatefulSet from the watch's cache: it waits for events until the cache has
// seen this engine's last partition write and the controller has observed the latest generation, or the
// deadline passes. Neither result nor error means the cache cannot answer (not running, refused, or behind
// for longer than statefulset.WatchLagLimit): the caller reads with GETs.
func (e *Engine) settledFromWatch(ctx context.Context, deadline time.Time) (*appsv1.StatefulSet, error) {
	e.reportWatchRefusal()
	lag := &statefulset.WatchLag{}
	var event <-chan struct{}
	sts, err := poll.Until(ctx, time.Time{}, func(ctx context.Context) error { return e.waitForChange(ctx, event) },
		func(context.Context) (*appsv1.StatefulSet, bool, error) {
			event = e.watch.Changes() // taken before the look, so a change during it is not missed
			sts, pending := e.sts.FromWatch(0, lag)
			settled := sts != nil && (sts.Status.ObservedGeneration >= sts.Generation || time.Now().After(deadline))
			return sts, settled || (sts == nil && !pending), nil
		})
	if err != nil {
		return nil, ctx.Err()
	}
	return sts, nil
}

func stsState(sts *appsv1.StatefulSet) ClusterState {
	st := ClusterState{
		StatefulSetUID:  string(sts.UID),
		Generation:      sts.Generation,
		Replicas:        1,
		UpdateRevision:  sts.Status.UpdateRevision,
		CurrentRevision: sts.Status.CurrentRevision,
		Partition:       -1,
	}
	st.OrderedReady = sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	st.MinReadySeconds = int(sts.Spec.MinReadySeconds)
	if c := EtcdContainer(sts.Spec.Template.Spec.Containers); c != nil {
		st.TemplateImage = c.Image
		st.TemplateSettings = EtcdSettings(c)
		st.TemplateInitialClusterState = EtcdFlagValues(c)["initial-cluster-state"]
		st.TemplateInitialClusterStateOmitted = st.TemplateInitialClusterState == "" && planner.StartsEtcdVisibly(c)
		st.PeerURLFromPodIP = planner.PeerURLFromPodIP(c)
		st.ProbeWarnings = probes.Judge(c)
	}
	st.SelfRemoval = selfremoval.Find(&sts.Spec.Template.Spec)
	if sts.Spec.Replicas != nil {
		st.Replicas = int(*sts.Spec.Replicas)
	}
	// A stale status describes an older template: treat the update revision as unknown until the controller
	// has caught up, so the planner waits instead of rolling to the wrong revision.
	if sts.Status.ObservedGeneration < sts.Generation {
		st.UpdateRevision = ""
	}
	if st.Partition = statefulset.Partition(sts); st.Partition >= 0 && sts.Spec.UpdateStrategy.RollingUpdate != nil {
		st.MaxUnavailable = maxUnavailable(sts.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable, st.Replicas)
	}
	return st
}

// maxUnavailable resolves a rolling update's maxUnavailable as the StatefulSet controller does: 1 when unset,
// a percentage of the replicas rounded down, never below 1. A value the API server would not have accepted
// reads as 1.
func maxUnavailable(v *intstr.IntOrString, replicas int) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(v, intstr.FromInt32(1)), replicas, false)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// durabilityOf classifies where etcd keeps its data in a pod spec, reading its configuration file (once per
// look, through files) when it is given one.
func durabilityOf(ctx context.Context, files *podfile.Memo, spec *corev1.PodSpec, c *corev1.Container, claims []string) []durability.Dir {
	t := durability.Template{Spec: spec, Container: c, Claims: claims, FlagValues: EtcdFlagValues(c)}
	if file := t.FlagValues["config-file"]; file != "" {
		if s, err := configfile.Read(ctx, files, spec, c, file); err != nil {
			t.ConfigProblem = err.Error()
		} else {
			t.Config = &durability.ConfigFile{Name: s.Name, DataDir: s.DataDir, WALDir: s.WALDir}
		}
	}
	return durability.Of(t)
}

func (e *Engine) observeMember(ctx context.Context, files *podfile.Memo, ordinal int) MemberState {
	m := MemberState{Ordinal: ordinal, Pod: planner.PodName(e.cfg.StatefulSet, ordinal)}
	pod, err := e.sts.ReadPod(ctx, m.Pod)
	switch {
	case apierrors.IsNotFound(err):
		m.Problem, m.Reason = "pod does not exist", ProblemPodMissing
		return m
	case err != nil:
		m.Problem, m.Reason = "reading pod: "+err.Error(), problemOf(err)
		return m
	}
	m.PodExists, m.PodUID, m.Restarts = true, string(pod.UID), health.ContainerRestarts(pod)
	m.Revision = pod.Labels[appsv1.ControllerRevisionHashLabelKey]
	m.SelfRemoval = selfremoval.Find(&pod.Spec)
	m.Ready, m.ReadySince, m.Running = health.PodReady(pod), health.ReadySince(pod), pod.Status.Phase == corev1.PodRunning
	if c := EtcdContainer(pod.Spec.Containers); c != nil {
		m.Image, m.V2Enabled = c.Image, V2Enabled(c)
		for _, d := range durabilityOf(ctx, files, &pod.Spec, c, nil) {
			if d.Kind.Lost() && !m.DataLost {
				m.DataLost, m.DataWhy = true, d.Why
			}
		}
	}
	if pod.DeletionTimestamp != nil {
		m.Ready = false
		m.Problem, m.Reason = "pod is terminating", ProblemPodTerminating
		return m
	}

	cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	defer cancel()
	s, err := e.etcd.Status(cctx, m.Pod)
	if err != nil {
		m.Problem, m.Reason, m.Unseen = err.Error(), problemOf(err), member.CouldNotLook(err)
		var refused *member.MemberCertError
		if errors.As(err, &refused) {
			m.CertRefusal = refused.SharedCause()
		}
		return m
	}
	m.Reachable = true
	m.MemberID, m.IsLeader, m.IsLearner, m.LeaderID = s.ID, s.Leader != 0 && s.Leader == s.ID, s.IsLearner, s.Leader
	m.RaftTerm, m.RaftIndex, m.AppliedIndex = s.RaftTerm, s.RaftIndex, s.AppliedIndex
	m.ServerVersion, m.StorageVersion, m.DowngradeTarget = s.Version, s.StorageVersion, s.DowngradeTarget
	switch {
	case len(s.Errors) > 0:
		m.Problem, m.Reason = "etcd reports: "+strings.Join(s.Errors, "; "), ProblemEtcdErrors
	case s.IsLearner:
		m.Problem, m.Reason = "member is a learner", ProblemNotVoting
	case s.Leader == 0:
		m.Problem, m.Reason = "member sees no leader", ProblemNoLeader
	default:
		if err := e.etcd.LinearizableRead(cctx, m.Pod); err != nil {
			m.Problem, m.Reason = err.Error(), problemOf(err)
		} else {
			m.Healthy = true
		}
	}
	return m
}

// observeMemberList counts voters and learners as the leader (else any reachable member) sees them.
func (e *Engine) observeMemberList(ctx context.Context, st *ClusterState) {
	order := make([]MemberState, 0, len(st.Members))
	for _, m := range st.Members {
		if m.IsLeader {
			order = append([]MemberState{m}, order...)
		} else if m.Reachable {
			order = append(order, m)
		}
	}
	for _, m := range order {
		cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
		list, err := e.etcd.MemberList(cctx, m.Pod)
		cancel()
		if err != nil {
			continue
		}
		st.VotingMembers, st.Learners, st.Membership, st.MembershipKnown = 0, 0, list, true
		for _, mem := range list {
			if mem.IsLearner {
				st.Learners++
			} else {
				st.VotingMembers++
			}
		}
		return
	}
}

// observeClusterVersion asks one healthy member, the leader first, for the cluster version: a single HTTP
// request per observation (the Status RPC does not carry it). A member that does not answer leaves it
// empty; nobody else is asked, so a slow member costs one call timeout at most.
func (e *Engine) observeClusterVersion(ctx context.Context, st *ClusterState) {
	ask := -1
	for _, m := range st.Members {
		if m.Healthy && (ask < 0 || m.IsLeader) {
			ask = m.Ordinal
		}
	}
	if ask < 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	defer cancel()
	if v, err := e.etcd.ClusterVersion(cctx, st.Members[ask].Pod); err == nil {
		st.ClusterVersion = v
	}
}

// freshClusterVersion asks for the cluster version again, as observeClusterVersion does for st (one healthy
// member, the leader first), ignoring what st already holds; empty when nobody answered.
func (e *Engine) freshClusterVersion(ctx context.Context, st ClusterState) string {
	st.ClusterVersion = ""
	e.observeClusterVersion(ctx, &st)
	return st.ClusterVersion
}

// maxTerm is the highest Raft term any member reports: the cluster's term as far as we can see it.
func maxTerm(st ClusterState) uint64 {
	var t uint64
	for _, m := range st.Members {
		if m.Reachable && m.RaftTerm > t {
			t = m.RaftTerm
		}
	}
	return t
}

// stillAnswers is the light look at members this run already rolled, taken while it cools down. Only the
// member's own failure counts: one that stops answering did not stay up on the new revision. A member that
// answers but sees no leader is waiting out an election elsewhere (a crashed leader), which the run holds
// for like any blocked state.
func (e *Engine) stillAnswers(ctx context.Context, pod string) health.Look {
	cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	defer cancel()
	if _, err := e.etcd.Status(cctx, pod); err != nil {
		return failedLook(err)
	}
	return health.Look{OK: true}
}

// startWatch starts the StatefulSet's watch (internal/memberwatch) once a run holds the lease: a run looks many times,
// while a one-off look (Plan, preview, status) would pay a LIST and a WATCH per resource for nothing.
func (e *Engine) startWatch(sts *appsv1.StatefulSet) {
	if _, held := e.lease.HeldSince(); held {
		e.watch.Start(sts)
	}
}

// reportWatchRefusal says once that the API server refused the watch, and what that costs.
func (e *Engine) reportWatchRefusal() {
	if err := e.watch.Refusal(); err != nil {
		e.emit(Step{}, "watching StatefulSet %s and its pods was refused (%v): reading them with get instead; grant list and watch on statefulsets and pods (deploy/rbac/role.yaml) to spare the API server that load",
			e.cfg.StatefulSet, err)
	}
}
