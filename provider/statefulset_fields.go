package provider

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// fieldClass is what a change to a StatefulSet spec field does, where the component owns the StatefulSet.
type fieldClass int

const (
	// rolled: a change rolls the members, one at a time, through the rollout (the pod template).
	rolled fieldClass = iota + 1
	// inPlace: the API server applies a change in place and no member restarts (replicas, minReadySeconds, ...).
	inPlace
	// locked: the API server refuses a change in place, so pulumi-kubernetes plans it as a replacement of the
	// StatefulSet, which deletes every member at once: the component refuses it in preview.
	locked
)

func (c fieldClass) String() string {
	return map[fieldClass]string{rolled: "rolled", inPlace: "applied in place", locked: "locked"}[c]
}

// statefulSetFields classifies every field of a StatefulSet's spec (apps/v1), by its JSON name. The API server
// updates in place only replicas, ordinals, template, updateStrategy, revisionHistoryLimit,
// persistentVolumeClaimRetentionPolicy and minReadySeconds (its validation of a StatefulSet update); every
// other field is locked. updateStrategy is the component's own: it writes partition = replicas itself.
// TestEveryStatefulSetFieldIsClassified fails when Kubernetes adds a field this table does not name.
var statefulSetFields = map[string]fieldClass{
	"template":                             rolled,
	"replicas":                             inPlace,
	"ordinals":                             inPlace,
	"updateStrategy":                       inPlace,
	"revisionHistoryLimit":                 inPlace,
	"persistentVolumeClaimRetentionPolicy": inPlace,
	"minReadySeconds":                      inPlace,
	"selector":                             locked,
	"serviceName":                          locked,
	"volumeClaimTemplates":                 locked,
	"podManagementPolicy":                  locked,
}

// lockedFieldChange is a locked field whose value in the manifest differs from the live StatefulSet's.
type lockedFieldChange struct {
	Field      string // spec.volumeClaimTemplates
	Live, Want string // what the live StatefulSet has and what the manifest asks for, for a person
}

// lockedFieldChanges compares the locked fields of a StatefulSet manifest (as the component applies it) with
// the live StatefulSet, after the defaults the API server fills in, so that a manifest that leaves a default
// out is no change. It returns the fields a change would make pulumi-kubernetes replace, in name order.
func lockedFieldChanges(live *appsv1.StatefulSet, manifest map[string]any) ([]lockedFieldChange, error) {
	raw, err := json.Marshal(manifest)
	if err != nil {
		return nil, fmt.Errorf("reading the statefulSet manifest: %w", err)
	}
	var want appsv1.StatefulSet
	if err := json.Unmarshal(raw, &want); err != nil {
		return nil, fmt.Errorf("reading the statefulSet manifest as an apps/v1 StatefulSet: %w", err)
	}
	have, asked := normalizedLocked(live.Spec), normalizedLocked(want.Spec)
	var changes []lockedFieldChange
	add := func(field string, h, w any) {
		if !equality.Semantic.DeepEqual(h, w) {
			changes = append(changes, lockedFieldChange{Field: "spec." + field, Live: describe(h), Want: describe(w)})
		}
	}
	add("podManagementPolicy", have.PodManagementPolicy, asked.PodManagementPolicy)
	add("selector", have.Selector, asked.Selector)
	add("serviceName", have.ServiceName, asked.ServiceName)
	add("volumeClaimTemplates", have.VolumeClaimTemplates, asked.VolumeClaimTemplates)
	sort.Slice(changes, func(i, j int) bool { return changes[i].Field < changes[j].Field })
	return changes, nil
}

// normalizedLocked is spec's locked fields with the API server's defaults filled in and what it adds on its
// own (a claim template's status, kind and apiVersion) taken out.
func normalizedLocked(spec appsv1.StatefulSetSpec) appsv1.StatefulSetSpec {
	out := appsv1.StatefulSetSpec{
		PodManagementPolicy: spec.PodManagementPolicy, Selector: spec.Selector, ServiceName: spec.ServiceName,
	}
	if out.PodManagementPolicy == "" {
		out.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	for _, t := range spec.VolumeClaimTemplates {
		c := corev1.PersistentVolumeClaim{Spec: *t.Spec.DeepCopy()}
		c.Name, c.Labels, c.Annotations = t.Name, t.Labels, t.Annotations
		if c.Spec.VolumeMode == nil {
			mode := corev1.PersistentVolumeFilesystem
			c.Spec.VolumeMode = &mode
		}
		out.VolumeClaimTemplates = append(out.VolumeClaimTemplates, c)
	}
	return out
}

// describe is a field's value for a person: claim templates by name and size, the rest as JSON.
func describe(v any) string {
	if claims, ok := v.([]corev1.PersistentVolumeClaim); ok {
		var parts []string
		for _, c := range claims {
			size := c.Spec.Resources.Requests[corev1.ResourceStorage]
			parts = append(parts, fmt.Sprintf("%s %s", c.Name, size.String()))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// lockedFieldsError is the component's refusal of a locked-field change, made in preview before anything is
// touched. Its first line says what happened and what to do; the fields follow.
func lockedFieldsError(target string, changes []lockedFieldChange) error {
	var fields []string
	for _, c := range changes {
		fields = append(fields, c.Field)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "StatefulSet %s: %s cannot change in place, and replacing the StatefulSet would delete every etcd member at once; nothing was changed: put the live value back in statefulSet, and see docs/usage.md \"Fields a rollout cannot change\" for how to change it safely",
		target, strings.Join(fields, ", "))
	for _, c := range changes {
		fmt.Fprintf(&b, "\n  %s: live %s, asked %s", c.Field, c.Live, c.Want)
	}
	return fmt.Errorf("%s", b.String())
}

// lockedFields names the locked fields of the table, in name order.
func lockedFields() []string {
	var names []string
	for name, class := range statefulSetFields {
		if class == locked {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
