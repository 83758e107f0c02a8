package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// hardenedMinReady is default-hardened's minReadySeconds: the 3 s the engine's canary window waits on a
// revision's first member, here on every member.
const hardenedMinReady = 3

// readyzProbe is the readinessProbe a careful user puts on etcd, the one the harness manifest uses for
// memberapi.ReadyOnProbe (the member daemon marks a pod with it Ready only while /readyz answers 200).
func readyzProbe() *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("metrics")}},
		PeriodSeconds:    1,
		FailureThreshold: 1,
	}
}

// writeTemplate is the template change a rollout of st rolls: the run's annotation, and the readinessProbe and
// minReadySeconds of default-hardened for that strategy only (the scenario's own probe stays for all). The
// other strategies' template drops what default-hardened added, so each strategy rolls what it configures.
func writeTemplate(ctx context.Context, kube kubernetes.Interface, e *harness.Etcd, st Strategy, annotation, value string) error {
	minReady := int32(0)
	if st.Hardened {
		minReady = hardenedMinReady
	}
	if err := setMinReadySeconds(ctx, kube, e, minReady); err != nil {
		return err
	}
	probe := st.Hardened || e.Spec.Readiness == memberapi.ReadyOnProbe
	_, err := e.UpdateTemplate(ctx, func(t *corev1.PodTemplateSpec) {
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[annotation] = value
		for i := range t.Spec.Containers {
			if t.Spec.Containers[i].Name != "etcd" {
				continue
			}
			switch {
			case probe && t.Spec.Containers[i].ReadinessProbe == nil:
				t.Spec.Containers[i].ReadinessProbe = readyzProbe()
			case !probe:
				t.Spec.Containers[i].ReadinessProbe = nil
			}
		}
	})
	return err
}

// setMinReadySeconds sets the StatefulSet's minReadySeconds; it changes no revision.
func setMinReadySeconds(ctx context.Context, kube kubernetes.Interface, e *harness.Etcd, seconds int32) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts, err := e.StatefulSet(ctx)
		if err != nil || sts.Spec.MinReadySeconds == seconds {
			return err
		}
		sts.Spec.MinReadySeconds = seconds
		_, err = kube.AppsV1().StatefulSets(e.Namespace).Update(ctx, sts, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("setting minReadySeconds %d on %s/%s: %w", seconds, e.Namespace, e.Spec.Name, err)
	}
	return nil
}
