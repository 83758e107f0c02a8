package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// podWitness is the kubelet's account of one member's container across a wait. A look that never reaches a
// member's etcd, or a client port that refuses us while the member votes, says nothing of the member by
// itself; the kubelet's account can: a container that restarted, or a pod that went not Ready, did not stay
// up, whatever the path to it does. Only a pod the kubelet kept Ready, with no restart, makes a member we
// cannot look at unknown rather than failed (a crash-looping member is connected to its peers between its
// crashes, so the peers' word alone cannot tell the two apart).
//
// It compares each pod with the first one it saw, never with the engine's clock: the node's clock may differ.
type podWitness struct {
	seen     bool
	uid      string
	restarts int32
	// readySince is the Ready condition's lastTransitionTime when first seen: it moves on every flap, even
	// one that fell between two looks.
	readySince time.Time
	// fell says why the container did not stay up; empty while it did. gone says it fell because its pod is
	// going or gone (deleted, replaced, terminating): whatever answers behind the name now is another pod.
	fell string
	gone bool
}

// observe takes one reading of the member's pod (nil: it does not exist).
func (w *podWitness) observe(p *corev1.Pod) {
	if w.fell != "" {
		return
	}
	if p == nil {
		w.fell, w.gone = "its pod was deleted", true
		return
	}
	ready, since := podReady(p), readySince(p)
	if !w.seen {
		w.seen, w.uid, w.restarts, w.readySince = true, string(p.UID), containerRestarts(p), since
	}
	switch {
	case string(p.UID) != w.uid:
		w.fell, w.gone = "its pod was replaced", true
	case p.DeletionTimestamp != nil:
		w.fell, w.gone = "its pod is terminating", true
	case !ready:
		w.fell = fmt.Sprintf("its pod went not Ready (phase %s)", p.Status.Phase)
	case containerRestarts(p) > w.restarts:
		w.fell = fmt.Sprintf("its container restarted (%d restarts, %d before)", containerRestarts(p), w.restarts)
	case !since.Equal(w.readySince):
		w.fell = "its pod went not Ready and back (Ready since " + since.UTC().Format(time.RFC3339) + ")"
	}
}

// stayedUp says every reading showed the same pod, Ready without a break, its containers never restarted.
// A witness that saw nothing vouches for nothing.
func (w *podWitness) stayedUp() bool { return w.seen && w.fell == "" }

func containerRestarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}
