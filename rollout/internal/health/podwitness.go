package health

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// PodWitness is the kubelet's account of one member's container across a wait. A look that never reaches a
// member's etcd, or a client port that refuses us while the member votes, says nothing of the member by
// itself; the kubelet's account can: a container that restarted, or a pod that went not Ready, did not stay
// up, whatever the path to it does. Only a pod the kubelet kept Ready, with no restart, makes a member we
// cannot look at unknown rather than failed (a crash-looping member is connected to its peers between its
// crashes, so the peers' word alone cannot tell the two apart).
//
// It compares each pod with the first one it saw, never with the engine's clock: the node's clock may differ.
type PodWitness struct {
	Seen     bool
	UID      string
	Restarts int32
	// readySince is the Ready condition's lastTransitionTime when first seen: it moves on every flap, even
	// one that fell between two looks.
	readySince time.Time
	// Fell says why the container did not stay up; empty while it did. Gone says it fell because its pod is
	// going or gone (deleted, replaced, terminating): whatever answers behind the name now is another pod.
	Fell string
	Gone bool
}

// Observe takes one reading of the member's pod (nil: it does not exist).
func (w *PodWitness) Observe(p *corev1.Pod) {
	if w.Fell != "" {
		return
	}
	if p == nil {
		w.Fell, w.Gone = "its pod was deleted", true
		return
	}
	ready, since := PodReady(p), ReadySince(p)
	if !w.Seen {
		w.Seen, w.UID, w.Restarts, w.readySince = true, string(p.UID), ContainerRestarts(p), since
	}
	switch {
	case string(p.UID) != w.UID:
		w.Fell, w.Gone = "its pod was replaced", true
	case p.DeletionTimestamp != nil:
		w.Fell, w.Gone = "its pod is terminating", true
	case !ready:
		w.Fell = fmt.Sprintf("its pod went not Ready (phase %s)", p.Status.Phase)
	case ContainerRestarts(p) > w.Restarts:
		w.Fell = fmt.Sprintf("its container restarted (%d restarts, %d before)", ContainerRestarts(p), w.Restarts)
	case !since.Equal(w.readySince):
		w.Fell = "its pod went not Ready and back (Ready since " + since.UTC().Format(time.RFC3339) + ")"
	}
}

// StayedUp says every reading showed the same pod, Ready without a break, its containers never restarted.
// A witness that saw nothing vouches for nothing.
func (w *PodWitness) StayedUp() bool { return w.Seen && w.Fell == "" }

// ContainerRestarts is the kubelet's count of restarts of the pod's containers.
func ContainerRestarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

// PodReady says the pod's Ready condition is true.
func PodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ReadySince is when the pod last turned Ready (its condition's lastTransitionTime, by the node's clock); zero
// while it is not Ready.
func ReadySince(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
