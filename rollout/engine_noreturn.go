package rollout

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/poll"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/snapshot"
)

// ErrPointOfNoReturn is wrapped when a revert is refused because the cluster version has already moved past
// the version the member would go back to: etcd refuses a member older than the cluster version, so the way
// out is forward (a template that works on the new version).
var ErrPointOfNoReturn = errors.New("past the point of no return")

// This file is the engine at a point of no return: it refuses a revert past one (checkPointOfNoReturn), and
// takes the snapshot that is the only way back after one (Snapshot).

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
	to, knownTo := planner.TemplateVersion(st)
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
	if v, ok := planner.ParseVersion(st.ClusterVersion); ok {
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
		if found, known = planner.ParseVersion(v); !known {
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

// SnapshotRecord is one stored, verified snapshot: its location, size, sha256, revision and storage version.
type SnapshotRecord = snapshot.Record

// ErrSnapshotCorrupt is wrapped when a snapshot fails its check (etcd's sha256, bbolt's structure, or the
// stored copy read back); ErrBadSnapshotDestination when its destination URL is refused before anything is
// asked of etcd.
var (
	ErrSnapshotCorrupt        = snapshot.ErrCorrupt
	ErrBadSnapshotDestination = snapshot.ErrBadDestination
)

// SnapshotOptions says where a snapshot goes.
type SnapshotOptions struct {
	// Destination is a directory (a path or file:// URL) or an object store URL (s3://, gs://, azblob://).
	Destination string
	// SpoolDir is where it is verified before it is stored; the system's temporary directory when empty.
	SpoolDir string
}

// Snapshot takes a snapshot of the cluster from its leader (the member every write went through, so nothing
// acknowledged is missing from it), verifies it and stores it with its record. It is the rollback path a run
// takes before a point of no return, and `etcd-rollout snapshot` on demand; it disrupts nothing and needs no
// lease. The destination is checked before etcd is asked for anything.
func (e *Engine) Snapshot(ctx context.Context, opts SnapshotOptions) (SnapshotRecord, error) {
	dest, err := snapshot.Parse(opts.Destination)
	if err != nil {
		return SnapshotRecord{}, err
	}
	st, err := e.Observe(ctx)
	if err != nil {
		return SnapshotRecord{}, err
	}
	rec, err := e.snapshotOf(ctx, st, dest, opts.SpoolDir)
	if err == nil {
		e.emit(Step{}, "snapshot: %s verified (%d bytes, revision %d, sha256 %s) in %.1f s", rec.Location, rec.Size, rec.Revision, rec.SHA256, rec.Seconds)
	}
	return rec, err
}

// snapshotOf takes the snapshot from the leader of st, the cluster as just observed.
func (e *Engine) snapshotOf(ctx context.Context, st ClusterState, dest *snapshot.Destination, spool string) (SnapshotRecord, error) {
	leader := -1
	for i, m := range st.Members {
		if m.IsLeader && m.Healthy {
			leader = i
		}
	}
	if leader < 0 {
		return SnapshotRecord{}, errors.New("no snapshot taken: no member is a healthy leader that answers us, so none can vouch that the snapshot holds every acknowledged write; run `etcd-rollout status` and take it once a leader is healthy")
	}
	pod := st.Members[leader].Pod
	before, err := e.etcd.Status(ctx, pod)
	if err != nil {
		return SnapshotRecord{}, fmt.Errorf("no snapshot taken: the leader %s did not answer just before it: %w", pod, err)
	}
	e.emit(Step{}, "snapshot: taking one from the leader %s (about %d MB) to %s", pod, before.DbSize>>20, dest)
	rec, err := snapshot.Take(ctx, e.snapshotSource(pod), dest, snapshot.Options{
		// The time and the revision: two snapshots of one cluster never share a name unless they hold the same.
		Key:    path.Join(e.cfg.Namespace, e.cfg.StatefulSet, fmt.Sprintf("%s-r%d.db", time.Now().UTC().Format("20060102T150405Z"), before.Revision)),
		Member: pod, EtcdVersion: before.Version, ExpectedSize: before.DbSize, RevisionBefore: before.Revision,
		SpoolDir: spool,
		Progress: func(p snapshot.Progress) {
			e.emit(Step{}, "snapshot: %d of about %d MB from %s after %s", p.Done>>20, p.Expected>>20, pod, p.Elapsed.Round(time.Second))
		},
	})
	if err != nil {
		return SnapshotRecord{}, fmt.Errorf("no snapshot stored: %w", err)
	}
	return rec, nil
}

// fillSnapshot names the destination of the snapshot p plans, for the preview.
func (e *Engine) fillSnapshot(p *Plan) {
	if p.Snapshot != nil {
		p.Snapshot.To = e.cfg.SnapshotDestination()
	}
}

// snapshotSource streams pod's snapshot through the member's client, as the snapshot package reads it.
func (e *Engine) snapshotSource(pod string) snapshot.Source {
	return func(ctx context.Context, consume func(snapshot.Stream) error) error {
		return e.etcd.Snapshot(ctx, pod, func(s member.SnapshotStream) error {
			return consume(snapshot.Stream{Data: s.Data, Revision: s.Revision, StorageVersion: s.StorageVersion, ClusterID: s.ClusterID})
		})
	}
}

// CheckSnapshotDestination says whether a snapshot destination would be accepted (a known scheme, no
// credential in it), so a preview can refuse bad input before anything is touched.
func CheckSnapshotDestination(raw string) error {
	_, err := snapshot.Parse(raw)
	return err
}

// awaitClusterVersion waits, after the last member of a minor-version change, for etcd to move the cluster
// version to the target's minor (the leader decides it every few seconds once every member runs the new
// version), for up to the health timeout, and returns the cluster version it last saw. A cluster version
// that does not move is reported, not failed: every member is on the new revision and healthy, and etcd
// moves it on its own; the operator is told what it still is.
func (e *Engine) awaitClusterVersion(ctx context.Context, st ClusterState, to EtcdVersion) string {
	start, seen, first := time.Now(), st.ClusterVersion, true
	seen, err := poll.Until(ctx, start.Add(e.cfg.HealthTimeout), poll.Every(e.pollEvery), func(ctx context.Context) (string, bool, error) {
		if !first { // the first look is at the version the last observation read
			if now := e.freshClusterVersion(ctx, st); now != "" {
				seen = now
			}
		}
		first = false
		v, ok := planner.ParseVersion(seen)
		return seen, ok && v.Major == to.Major && v.Minor == to.Minor, nil
	})
	if err != nil {
		e.emit(Step{Kind: StepRelock}, "cluster version is still %q, not yet %d.%d: etcd moves it once its leader has seen every member run %d.%d", seen, to.Major, to.Minor, to.Major, to.Minor)
		return seen
	}
	e.emit(Step{Kind: StepRelock}, "cluster version is %s (%s after the last member)", seen, time.Since(start).Round(100*time.Millisecond))
	return seen
}

// comingBackImage is the etcd image a member's pod comes back on when it is deleted with the partition
// locked: the StatefulSet controller recreates pods below the partition from its current revision, whatever
// the member ran before. A revert or a recreate is judged on that image (checkPointOfNoReturn), never on the
// one this run restarted the member from, which a resumed run or a third revision makes another. It reads
// the ControllerRevision; without it (not allowed, or gone) a pod at the current revision names the image;
// "" when neither can, which the point-of-no-return check takes for an unknown version.
func (e *Engine) comingBackImage(ctx context.Context, st ClusterState, ordinal int) string {
	img, err := e.sts.RevisionImage(ctx, st.CurrentRevision)
	if err == nil {
		return img
	}
	e.emit(Step{Kind: StepRecreate, Ordinal: ordinal}, "reading revision %s, which %s would come back on: %v; taking the image of a pod at that revision instead",
		st.CurrentRevision, st.Members[ordinal].Pod, explainForbidden(err))
	for _, m := range st.Members {
		if m.Ordinal != ordinal && m.Revision == st.CurrentRevision && m.Image != "" {
			return m.Image
		}
	}
	return ""
}
