package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// ChangeVersion changes the pod template to etcd version ("3.5", "3.6" or "3.5.21") with start faults f, in
// one revision, as a real upgrade changes the image: the member daemon runs the binary the version annotation
// names, and the engine reads the version from the etcd container's image tag, so both move together. With
// the partition locked nothing restarts; it returns the new updateRevision.
func (e *Etcd) ChangeVersion(ctx context.Context, version string, f StartFaults) (string, error) {
	if err := checkVersion(version); err != nil {
		return "", fmt.Errorf("etcd %s/%s: %w", e.Namespace, e.Spec.Name, err)
	}
	if err := f.validateFor(e.Spec.Replicas); err != nil {
		return "", fmt.Errorf("start faults for %s/%s: %w", e.Namespace, e.Spec.Name, err)
	}
	return e.UpdateTemplate(ctx, func(t *corev1.PodTemplateSpec) {
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[memberapi.AnnotationVersion] = version
		for i := range t.Spec.Containers {
			if t.Spec.Containers[i].Name == "etcd" {
				t.Spec.Containers[i].Image = etcdImage(version)
			}
		}
		f.Apply(t)
	})
}

// ChangeVersion makes a new revision that runs etcd version with start faults f, and returns it.
func (m MustEtcd) ChangeVersion(version string, f StartFaults) string {
	m.t.Helper()
	ctx, cancel := m.ctx(time.Minute)
	defer cancel()
	rev, err := m.e.ChangeVersion(ctx, version, f)
	require.NoError(m.t, err)
	return rev
}

// ClusterVersion is the cluster version the member of ordinal reports on its /version endpoint
// ("etcdcluster", such as "3.5.0"): the version the whole cluster speaks, which etcd raises once every
// member runs the newer one. The harness asks the member directly, not through its pod's port.
func (e *Etcd) ClusterVersion(ctx context.Context, ordinal int) (string, error) {
	m, err := e.Member(ctx, ordinal)
	if err != nil {
		return "", err
	}
	client := &http.Client{Timeout: 3 * time.Second}
	if e.TLS != nil {
		tc, err := e.TLS.harnessClientConfig()
		if err != nil {
			return "", err
		}
		client.Transport = &http.Transport{TLSClientConfig: tc}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.ClientURL+"/version", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("cluster version from %s/%s: %w", e.Namespace, m.Pod, err)
	}
	defer resp.Body.Close()
	var v struct {
		Cluster string `json:"etcdcluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("cluster version from %s/%s: status %s, decoding: %v", e.Namespace, m.Pod, resp.Status, err)
	}
	return v.Cluster, nil
}
