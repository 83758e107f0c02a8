package rollout

import (
	"context"
	"errors"
	"fmt"
)

// ErrPointOfNoReturn is wrapped when a revert is refused because the cluster version has already moved past
// the version the member would go back to: etcd refuses a member older than the cluster version, so the way
// out is forward (a template that works on the new version).
var ErrPointOfNoReturn = errors.New("past the point of no return")

// checkPointOfNoReturn allows deleting a member's pod (a revert, a recreate) while the cluster version cannot
// have moved past comingBack, the image the pod comes back on (comingBackImage): as long as another healthy
// member still runs the current revision, or the change is within one minor version, etcd keeps the old
// protocol and storage version. Otherwise it asks etcd for the cluster version and refuses when that is
// newer, or when nobody can say.
func (e *Engine) checkPointOfNoReturn(ctx context.Context, st ClusterState, ordinal int, comingBack string) error {
	for _, m := range st.Members {
		if st.CurrentRevision != st.UpdateRevision && m.Ordinal != ordinal && m.Revision == st.CurrentRevision && m.Healthy {
			return nil
		}
	}
	back, knownBack := ImageVersion(comingBack)
	to, knownTo := ImageVersion(st.TemplateImage)
	if knownBack && knownTo && back.Major == to.Major && back.Minor == to.Minor {
		return nil
	}
	pod := st.Members[ordinal].Pod
	cluster, err := e.clusterVersion(ctx, st, ordinal)
	if err != nil {
		return fmt.Errorf("%w: %s was the last member on the old revision and the cluster version cannot be read to confirm it is still %s (%v); fix forward with a template that works, or revert by hand once `curl <member>/version` shows the old cluster version",
			ErrPointOfNoReturn, pod, describeVersion(back, knownBack), err)
	}
	if knownBack && (cluster.Major < back.Major || (cluster.Major == back.Major && cluster.Minor <= back.Minor)) {
		return nil
	}
	return fmt.Errorf("%w: the cluster version is already %d.%d since every member ran the new version, and %s would go back to %s, which etcd refuses to let rejoin; fix forward: apply a template that works on %d.%d and run again",
		ErrPointOfNoReturn, cluster.Major, cluster.Minor, pod, describeVersion(back, knownBack), cluster.Major, cluster.Minor)
}

// clusterVersion is the cluster version the observation already read (Observe asks one healthy member), or,
// when it could not, what the healthy members other than the failed one say, asked in order until one answers.
func (e *Engine) clusterVersion(ctx context.Context, st ClusterState, except int) (EtcdVersion, error) {
	if v, ok := ParseVersion(st.ClusterVersion); ok {
		return v, nil
	}
	var (
		found EtcdVersion
		known bool
	)
	last := errors.New("no other member is healthy")
	e.askHealthyOthers(ctx, st, except, func(ctx context.Context, pod string) bool {
		v, err := e.etcd.ClusterVersion(ctx, pod)
		if err != nil {
			last = err
			return false
		}
		if found, known = ParseVersion(v); !known {
			last = fmt.Errorf("%s reports cluster version %q", pod, v)
		}
		return known
	})
	if !known {
		return EtcdVersion{}, last
	}
	return found, nil
}

// askHealthyOthers asks the healthy members other than except, in order and each within memberCallTimeout,
// until ask says it has its answer: for what any member of the quorum can tell about the cluster or another
// member.
func (e *Engine) askHealthyOthers(ctx context.Context, st ClusterState, except int, ask func(ctx context.Context, pod string) (answered bool)) {
	for _, m := range st.Members {
		if m.Ordinal == except || !m.Healthy {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
		answered := ask(cctx, m.Pod)
		cancel()
		if answered {
			return
		}
	}
}

func describeVersion(v EtcdVersion, known bool) string {
	if !known {
		return "its old image (version unknown: not a version tag)"
	}
	return v.String()
}
