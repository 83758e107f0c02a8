package rollout

import (
	"errors"
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/statefulset"
)

// reconcileOnPatch makes a patch of the fake StatefulSet behave as on an API server with a StatefulSet
// controller: a spec change raises the generation (and the controller, unless it was already behind,
// observes it at once), and after the engine's own partition writes every pod at or above the new
// partition moves to the update revision, as reconcile does when a pod is read. The engine reads pods from
// its watch during a run, so a controller that only acted on GETs would never act on its writes; and the
// engine tells its own write from a stale cache by the generation, which the fake tracker alone never
// raises. A stranger's write is still acted on only when a pod is read: a controller slower than the
// engine's interference check, which tests rely on to show the check stops the run first.
func (c *fakeCluster) reconcileOnPatch(action k8stesting.Action) (bool, runtime.Object, error) {
	before, err := c.kube.Tracker().Get(stsGVR, "db", "etcd")
	if err != nil {
		return false, nil, nil
	}
	handled, obj, err := k8stesting.ObjectReaction(c.kube.Tracker())(action)
	var status apierrors.APIStatus
	if err != nil && !errors.As(err, &status) {
		// A patch that does not apply (a JSON patch test that fails) is a 422 on a real API server.
		err = apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", stsGVR.GroupResource(), "etcd", err.Error(), 0, false)
	}
	if err != nil || !handled {
		return handled, obj, err
	}
	old, sts := before.(*appsv1.StatefulSet), obj.(*appsv1.StatefulSet).DeepCopy()
	if !apiequality.Semantic.DeepEqual(old.Spec, sts.Spec) {
		sts.Generation = old.Generation + 1
		if old.Status.ObservedGeneration >= old.Generation {
			sts.Status.ObservedGeneration = sts.Generation
		}
		if err := c.kube.Tracker().Update(stsGVR, sts, "db"); err != nil {
			return true, nil, err
		}
	}
	if patch, ok := action.(k8stesting.PatchActionImpl); ok && patch.PatchOptions.FieldManager == statefulset.PatchOptions.FieldManager {
		for i := 0; i < c.n; i++ {
			c.reconcile(planner.PodName("etcd", i))
		}
	}
	return true, sts, nil
}
