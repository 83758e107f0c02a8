package rollout

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"path/filepath"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/snapshot"
)

// minorUpgradeStream seeds the draw of schedules whose template moves the members from 3.5 to 3.6
// (schedule.MinorUpgrade), and of the events moved onto their snapshot.
const minorUpgradeStream = 0x36

// atSnapshot is the engine's request for the snapshot it stores before a minor change's first disruption: a
// kill, a crash of the leader, a cancel or an outage there lands in the middle of it.
const atSnapshot injectionPoint = "etcd Snapshot"

// drawMinorUpgrade makes one schedule in four whose members do not lose their data with their pod a minor
// upgrade (3.5.35 → 3.6.8): every run must store a verified snapshot before the schedule's first disruption
// (invariant s). Half of its events move onto the snapshot's request. It draws from a stream of its own, so
// every other draw of a seed stays as it was.
func drawMinorUpgrade(seed uint64, s *schedule) {
	rng := rand.New(rand.NewPCG(seed, minorUpgradeStream))
	if s.Ephemeral || rng.IntN(4) > 0 {
		return
	}
	s.MinorUpgrade = true
	for i := range s.Events {
		if rng.IntN(2) == 0 && s.Events[i].At != atPassed && s.Events[i].Nth == 0 {
			s.Events[i].At = atSnapshot
		}
	}
}

// makeMinorUpgrade gives the world's revisions 3.5 and 3.6 images, and the fake members the versions etcd
// reports: 3.5.35 on the current revision, 3.6.8 on the update revision, cluster version 3.5 until every
// member runs 3.6. Engines store their snapshots in snapshotDir.
func (w *world) makeMinorUpgrade() {
	images := map[string]string{oldRev: "registry.k8s.io/etcd:3.5.35-0", newRev: "registry.k8s.io/etcd:3.6.8-0"}
	if w.s.DigestImages {
		// Pinned by tag and digest: the version is the tag's (review 3, item 5: it was unknown, and the upgrade
		// took no snapshot).
		images = map[string]string{oldRev: "registry.k8s.io/etcd:3.5.35-0@sha256:35", newRev: "registry.k8s.io/etcd:3.6.8-0@sha256:36"}
	}
	w.c.withImages(w.t, images)
	w.f.clusterVersion, w.f.clusterVersionOnceAllRestarted = "3.5.0", "3.6.0"
	w.f.serverVersions, w.f.storageVersions = map[string]string{}, map[string]string{}
	for i := 0; i < w.s.Members; i++ {
		w.f.serverVersions[planner.PodName("etcd", i)] = "3.5.35"
	}
	for _, i := range w.s.Updated {
		w.f.serverVersions[planner.PodName("etcd", i)], w.f.storageVersions[planner.PodName("etcd", i)] = "3.6.8", "3.5.0"
	}
	w.snapshotDir = w.t.TempDir()
}

// judgeSnapshotFirst is invariant (s): in a minor upgrade nothing is disrupted before a snapshot that passes
// its check is stored, by the files in the snapshot directory, never by what an engine says. w.mu is held.
func (w *world) judgeSnapshotFirst(se *schedEngine, what string) {
	if !w.s.MinorUpgrade && !w.s.OneMember || w.snapshotSeen {
		return
	}
	files, _ := filepath.Glob(filepath.Join(w.snapshotDir, "db", "etcd", "*.db"))
	for _, f := range files {
		if _, err := snapshot.Verify(f); err == nil {
			w.snapshotSeen = true
			return
		}
	}
	w.violate("s", se, "%s in a minor upgrade or a one-member etcd before a verified snapshot was stored (%d file(s) in the snapshot dir)", what, len(files))
}

// Snapshot reaches pod like any other call. The stream is read within the call's turn and handed to the
// engine after it, so that the engine's verifying and storing (and the events it emits) run outside the
// world's lock, as they run outside the member in production.
func (s *scheduledEtcd) Snapshot(ctx context.Context, pod string, consume func(member.SnapshotStream) error) error {
	var (
		got  member.SnapshotStream
		data []byte
	)
	err := s.call(ctx, atSnapshot, "Snapshot", pod, func() error {
		return s.w.f.Snapshot(ctx, pod, func(st member.SnapshotStream) (err error) {
			got = st
			data, err = io.ReadAll(st.Data)
			return err
		})
	})
	if err != nil {
		return err
	}
	got.Data = bytes.NewReader(data)
	return consume(got)
}
