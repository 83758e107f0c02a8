// Package statefulset is the engine's hold on one StatefulSet and its member pods: what it reads of them
// (through the watch's cache when that can answer), what it writes (the partition, a pod delete, each
// disruptive write under the gate's permit) and the ownership it leaves in their managed fields.
package statefulset

import (
	"errors"
	"fmt"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/memberwatch"
)

// Handle is one StatefulSet as the engine holds it.
type Handle struct {
	Kube      kubernetes.Interface
	Namespace string
	Name      string
	// Watch caches the StatefulSet and its pods while a run holds the lease.
	Watch *memberwatch.Watch

	// wrote is the StatefulSet generation of the engine's last partition write: a cache that has not seen
	// it yet is behind, not interfered with.
	wrote atomic.Int64
}

// Wrote is the generation of the engine's last partition write (0: none yet).
func (h *Handle) Wrote() int64 { return h.wrote.Load() }

// MarkWritten records generation as the engine's own last write.
func (h *Handle) MarkWritten(generation int64) { h.wrote.Store(generation) }

// Partition is the StatefulSet's rolling-update partition: -1 when its update strategy is not RollingUpdate.
func Partition(sts *appsv1.StatefulSet) int {
	s := sts.Spec.UpdateStrategy
	if s.Type != "" && s.Type != appsv1.RollingUpdateStatefulSetStrategyType {
		return -1
	}
	if s.RollingUpdate == nil {
		return 0
	}
	return int(ptr.Deref(s.RollingUpdate.Partition, 0))
}

// ErrInterference is wrapped when someone else changed the StatefulSet (partition, template, replicas)
// while the rollout ran, or lowered the partition before it started. The engine stops rather than race.
var ErrInterference = errors.New("the StatefulSet was changed by someone else")

// ErrReplacedMidGate is wrapped when a member's pod was deleted or replaced by someone else (a person, a
// drain, the descheduler) while the member was in its gates: whatever answers behind the name now is another
// pod, perhaps on another revision (the controller recreates it on the current one while the partition is
// locked), so it proves nothing and fails nothing. The run looks again and rolls or waits for the member anew.
var ErrReplacedMidGate = errors.New("the member's pod was replaced by someone else during its gates")

// InterferenceError is a conditional write of the engine that the StatefulSet refused because its spec
// moved past the generation the run had observed: someone else wrote it in between. Nothing was written.
type InterferenceError struct {
	// Action is what the run was about to do ("lowering the partition to 1").
	Action string
	// Generation is the StatefulSet's generation now; Expected the one the run observed and planned from.
	Generation, Expected int64
	// Writer is the field manager that wrote the spec last, by managedFields; empty when none says.
	Writer string
}

func (e *InterferenceError) Error() string {
	return fmt.Sprintf("%v before %s: generation %d, this run observed %d, %s; nothing was written and the run stops rather than race it: find who changed it and why, then run again to roll to its current template",
		ErrInterference, e.Action, e.Generation, e.Expected, e.Who())
}

// Who names the writer as far as the StatefulSet says.
func (e *InterferenceError) Who() string {
	if e.Writer != "" {
		return fmt.Sprintf("last written by %q (managedFields)", e.Writer)
	}
	return "the StatefulSet's managedFields name no writer"
}

func (e *InterferenceError) Unwrap() error { return ErrInterference }
