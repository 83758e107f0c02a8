package rollout

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// slowControllerStream seeds the draw of a StatefulSet controller slow to recreate pods (schedule.SlowRecreate).
const slowControllerStream = 0x5c0

// drawSlowController makes one schedule in four one whose StatefulSet controller takes 50 to 600 ms to create
// the pod for a member our writes restarted or deleted: the pod is gone meanwhile, and its etcd with it, as
// when the controller manager is busy or the scheduler waits for a node (issue 31, item 4). It draws from a
// stream of its own, so every other draw of a seed stays as it was.
func drawSlowController(seed uint64, s *schedule) {
	rng := rand.New(rand.NewPCG(seed, slowControllerStream))
	if rng.IntN(4) == 0 {
		s.SlowRecreate = time.Duration(50+rng.IntN(551)) * time.Millisecond
	}
}

// hiddenPod is a pod the slow controller has not created yet, and when it will.
type hiddenPod struct {
	pod *corev1.Pod
	at  time.Time
}

// slowController makes the fake controller slow (holdCreate): a pod it would put in place of one it deletes
// (a lowering, or one of our deletes) is held until the schedule's SlowRecreate has passed, with the old pod
// gone meanwhile. The old pod is deleted, never shown replaced first: a watch that lags or a List that
// arrives late must not show a reader the new pod before the controller creates it (the long mode's seed
// 93983 of 100,000: the pod was updated in place and then hidden, a lagging cache showed it at the update
// revision, and the world later re-added the same pod relabelled at the old revision, which no controller
// does). w.mu is held when the controller runs.
func (w *world) slowController() {
	if w.s.SlowRecreate <= 0 {
		return
	}
	w.c.holdCreate = func(p *corev1.Pod) bool {
		w.hidden[p.Name] = hiddenPod{pod: p.DeepCopy(), at: time.Now().Add(w.s.SlowRecreate)}
		return true
	}
}

// recreateSlowly marks down the etcd of every pod the request just served made the controller hold
// (slowController): its pod is gone until the controller creates it. w.mu is held.
func (w *world) recreateSlowly(pre worldSnapshot) {
	if w.s.SlowRecreate <= 0 {
		return
	}
	w.c.mu.Lock()
	recreated := append(append([]string(nil), w.c.restarted[pre.restarted:]...), w.c.deleted[pre.deleted:]...)
	w.c.mu.Unlock()
	for _, name := range recreated {
		if _, held := w.hidden[name]; !held {
			continue
		}
		w.f.mu.Lock()
		w.f.down[name] = true
		w.f.mu.Unlock()
		w.logf("world", "the controller is slow: %s's pod comes in %s", name, w.s.SlowRecreate)
	}
}

// createDue creates every hidden pod whose time has come, at the revision the controller would give it now
// (the update revision at or above the partition, else the current one), and starts its etcd from a new
// process. w.mu is held.
func (w *world) createDue() {
	for name, h := range w.hidden {
		if time.Now().Before(h.at) {
			continue
		}
		delete(w.hidden, name)
		sts := w.stsNow()
		ordinal, _ := strconv.Atoi(strings.TrimPrefix(name, "etcd-"))
		rev := sts.Status.CurrentRevision
		if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil && ordinal >= int(*ru.Partition) {
			rev = sts.Status.UpdateRevision
		}
		h.pod.Labels[appsv1.ControllerRevisionHashLabelKey] = rev
		h.pod.ResourceVersion = ""
		if err := w.c.kube.Tracker().Add(h.pod); err != nil {
			w.t.Fatalf("creating %s: %v", name, err)
		}
		w.f.mu.Lock()
		delete(w.f.down, name)
		w.f.bumpIncarnation(name)
		w.f.mu.Unlock()
		w.loopsStale = true
		w.logf("world", "the controller created %s's pod at %s", name, rev)
	}
}
