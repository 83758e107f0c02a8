package harness

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
)

// Exec runs command in the pod's etcd container through the API server, as `kubectl exec` does. kwok's
// Exec rule (written by the member daemon) runs it on this host, in the member dir, with ETCDCTL_*
// pointing at the member; the pinned etcdctl is on kwok's PATH. kwok does not pass exit codes through: a
// failing command is an error whose text carries its status. Commands get no stdin.
func (e *Etcd) Exec(ctx context.Context, ordinal int, command ...string) (stdout, stderr string, err error) {
	req := e.c.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(e.Namespace).Name(e.PodName(ordinal)).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: "etcd", Command: command, Stdout: true, Stderr: true,
	}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(e.c.Config, "POST", req.URL())
	if err != nil {
		return "", "", fmt.Errorf("exec in %s/%s: %w", e.Namespace, e.PodName(ordinal), err)
	}
	var out, errOut bytes.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	if err != nil {
		err = fmt.Errorf("exec %v in %s/%s: %w (stderr: %s)", command, e.Namespace, e.PodName(ordinal), err, errOut.String())
	}
	return out.String(), errOut.String(), err
}
