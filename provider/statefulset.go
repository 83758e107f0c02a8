package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Annotation and value that make pulumi-kubernetes return from a StatefulSet create or update at once.
// Without it, its await logic waits for every pod to reach the update revision, which a partition lock
// prevents, so it would hang for its 10-minute default and fail.
const (
	skipAwaitAnnotation = "pulumi.com/skipAwait"
	skipAwaitValue      = "true"
)

// patchForceAnnotation makes pulumi-kubernetes force its server-side apply of the StatefulSet the component
// owns. The engine drops its field-manager claim on the partition right after each write (rollout's
// releaseFieldOwnership), but a process killed between the two requests (a few milliseconds) leaves the
// claim, and pulumi-kubernetes' next apply would then fail with `conflict with "etcd-rollout" ... partition`
// until someone ran `etcd-rollout unlock`. Forced, the next `pulumi up` writes partition = replicas itself,
// in the same request as any template change, so nothing rolls unwatched and no manual step is needed. The
// component owns every field of that manifest, so forcing takes nothing that belongs to someone else.
const (
	patchForceAnnotation = "pulumi.com/patchForce"
	patchForceValue      = "true"
)

// lockManifest returns a copy of a StatefulSet manifest that the component can own: skipAwait and patchForce
// annotated,
// RollingUpdate with partition = replicas (so a template change rolls nothing by itself), and name,
// namespace and serviceName filled from the component's inputs or checked against them.
func lockManifest(manifest map[string]any, stsName, namespace, serviceName string) (map[string]any, error) {
	m, err := deepCopy(manifest)
	if err != nil {
		return nil, err
	}
	if v, ok := m["apiVersion"]; ok && v != "apps/v1" {
		return nil, fmt.Errorf("statefulSet.apiVersion is %v; only apps/v1 is supported", v)
	}
	if v, ok := m["kind"]; ok && v != "StatefulSet" {
		return nil, fmt.Errorf("statefulSet.kind is %v; it must be StatefulSet", v)
	}
	delete(m, "apiVersion")
	delete(m, "kind")
	delete(m, "status")

	meta := object(m, "metadata")
	if err := fillOrMatch(meta, "name", stsName, "statefulSet.metadata.name", "stsName"); err != nil {
		return nil, err
	}
	if err := fillOrMatch(meta, "namespace", namespace, "statefulSet.metadata.namespace", "namespace"); err != nil {
		return nil, err
	}
	object(meta, "annotations")[skipAwaitAnnotation] = skipAwaitValue
	object(meta, "annotations")[patchForceAnnotation] = patchForceValue

	spec := object(m, "spec")
	if err := fillOrMatch(spec, "serviceName", serviceName, "statefulSet.spec.serviceName", "serviceName"); err != nil {
		return nil, err
	}
	replicas, err := replicasOf(spec)
	if err != nil {
		return nil, err
	}
	if _, ok := spec["template"].(map[string]any); !ok {
		return nil, fmt.Errorf("statefulSet.spec.template is missing: the StatefulSet needs a pod template")
	}
	spec["updateStrategy"] = map[string]any{
		"type":          "RollingUpdate",
		"rollingUpdate": map[string]any{"partition": replicas},
	}
	return m, nil
}

// replicasOf reads spec.replicas. The lock needs a number: Kubernetes' default of 1 would make a silent
// partition of 1 for a manifest that forgot it, which is never what a 3-member etcd wants.
func replicasOf(spec map[string]any) (int, error) {
	switch v := spec["replicas"].(type) {
	case float64:
		if v < 1 || v != float64(int(v)) {
			return 0, fmt.Errorf("statefulSet.spec.replicas is %v; it must be a whole number of at least 1", v)
		}
		return int(v), nil
	case int:
		if v < 1 {
			return 0, fmt.Errorf("statefulSet.spec.replicas is %d; it must be at least 1", v)
		}
		return v, nil
	case nil:
		return 0, fmt.Errorf("statefulSet.spec.replicas is not set: the partition lock needs the member count")
	default:
		return 0, fmt.Errorf("statefulSet.spec.replicas is %v (%T); it must be a number", v, v)
	}
}

// templateHash is the versionHash of a managed StatefulSet: a digest of its pod template, so any change to
// what the pods run changes it and nothing else does. encoding/json sorts map keys, so it is stable.
func templateHash(manifest map[string]any) (string, error) {
	spec, _ := manifest["spec"].(map[string]any)
	tmpl, ok := spec["template"]
	if !ok {
		return "", fmt.Errorf("statefulSet.spec.template is missing")
	}
	b, err := json.Marshal(tmpl)
	if err != nil {
		return "", fmt.Errorf("hashing statefulSet.spec.template: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16], nil
}

func fillOrMatch(m map[string]any, key, want, field, input string) error {
	switch v := m[key].(type) {
	case nil:
		m[key] = want
	case string:
		if v == "" {
			m[key] = want
		} else if v != want {
			return fmt.Errorf("%s is %q but %s is %q: they must name the same thing", field, v, input, want)
		}
	default:
		return fmt.Errorf("%s must be a string, not %T", field, v)
	}
	return nil
}

// object returns m[key] as a map, creating it when absent.
func object(m map[string]any, key string) map[string]any {
	if o, ok := m[key].(map[string]any); ok {
		return o
	}
	o := map[string]any{}
	m[key] = o
	return o
}

func deepCopy(m map[string]any) (map[string]any, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("statefulSet is not a plain object: %w", err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("statefulSet is not a plain object: %w", err)
	}
	return out, nil
}
