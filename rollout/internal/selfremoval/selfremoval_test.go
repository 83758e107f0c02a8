package selfremoval

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func withPreStop(command ...string) corev1.Container {
	return corev1.Container{Name: "etcd", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: command}}}}
}

func TestFind(t *testing.T) {
	tests := []struct {
		name      string
		container corev1.Container
		want      []Hook
	}{
		{"the Bitnami chart's hook", withPreStop("/opt/bitnami/scripts/etcd/prestop.sh"),
			[]Hook{{Container: "etcd", Command: "/opt/bitnami/scripts/etcd/prestop.sh", TurnOff: "the Bitnami etcd chart's removeMemberOnContainerTermination: false"}}},
		{"the Bitnami hook through a shell", withPreStop("/bin/bash", "-c", "/opt/bitnami/scripts/etcd/prestop.sh"),
			[]Hook{{Container: "etcd", Command: "/bin/bash -c /opt/bitnami/scripts/etcd/prestop.sh", TurnOff: "the Bitnami etcd chart's removeMemberOnContainerTermination: false"}}},
		{"Kubernetes' e2e etcd StatefulSet's one-liner", withPreStop("/bin/sh", "-ec", "EPS=$(eps); etcdctl --endpoints ${EPS} member remove $(member_hash); rm -rf /var/run/etcd/*"),
			[]Hook{{Container: "etcd", Command: "/bin/sh -ec EPS=$(eps); etcdctl --endpoints ${EPS} member remove $(member_hash); rm -rf /var/run/etcd/*"}}},
		{"a multi-line script that removes only above the initial size (the template cannot say which ordinals)",
			withPreStop("/bin/sh", "-ec", "SET_ID=${HOSTNAME##*[^0-9]}\nif [ \"${SET_ID}\" -ge ${INITIAL_CLUSTER_SIZE} ]; then\n\tETCDCTL_ENDPOINT=${EPS} etcdctl member remove $(member_hash)\nfi"),
			[]Hook{{Container: "etcd", Command: "/bin/sh -ec SET_ID=${HOSTNAME##*[^0-9]}\nif [ \"${SET_ID}\" -ge ${INITIAL_CLUSTER_SIZE} ]; then\n\tETCDCTL_ENDPOINT=${EPS} etcdctl member remove $(member_hash)\nfi"}}},
		{"an etcdctl call with the command words apart", withPreStop("etcdctl", "member", "remove", "8e9e05c52164694d"),
			[]Hook{{Container: "etcd", Command: "etcdctl member remove 8e9e05c52164694d"}}},
		{"a hook that only sleeps", withPreStop("sleep", "5"), nil},
		{"a hook that lists members", withPreStop("etcdctl", "member", "list"), nil},
		{"another chart's prestop.sh, whose content is elsewhere", withPreStop("/scripts/prestop.sh"), nil},
		{"no hook", corev1.Container{Name: "etcd"}, nil},
		{"an HTTP hook", corev1.Container{Name: "etcd", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/stop"}}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Find(&corev1.PodSpec{Containers: []corev1.Container{tt.container}}))
		})
	}
	assert.Nil(t, Find(nil))
}

// A native sidecar (an init container with restartPolicy Always) runs beside etcd, and its preStop hook runs
// when the pod stops (review 3, item 6: only spec.containers was read). A plain init container's never runs.
func TestFindReadsNativeSidecars(t *testing.T) {
	always, onFailure := corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicy("OnFailure")
	remover := withPreStop("/bin/sh", "-c", "etcdctl member remove $(cat /var/run/etcd/member_id)")
	remover.Name = "member-janitor"
	for _, tt := range []struct {
		name   string
		policy *corev1.ContainerRestartPolicy
		want   []Hook
	}{
		{"a native sidecar", &always, []Hook{{Container: "member-janitor", Command: "/bin/sh -c etcdctl member remove $(cat /var/run/etcd/member_id)"}}},
		{"a plain init container", nil, nil},
		{"an init container with another policy", &onFailure, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			init := remover
			init.RestartPolicy = tt.policy
			spec := &corev1.PodSpec{InitContainers: []corev1.Container{init}, Containers: []corev1.Container{{Name: "etcd"}}}
			assert.Equal(t, tt.want, Find(spec))
		})
	}
}
