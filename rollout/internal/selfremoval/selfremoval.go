// Package selfremoval finds a pod that changes etcd's membership by itself when it stops: a preStop hook that
// runs `etcdctl member remove` for its own member (the Bitnami etcd chart's removeMemberOnContainerTermination,
// on by default for years; Kubernetes' own e2e etcd StatefulSet). With such a hook every pod the rollout
// restarts first removes its member, with no quorum check and racing the rollout, and its start script adds it
// back as a voter, not a learner (issue 32; ../shared/notes/shapes.md §1.3 has the chart's bug trail). The
// engine refuses to roll such pods unless the user accepts it.
//
// It recognises what the pod spec says in so many words: an exec hook whose command runs `member remove`, or
// the Bitnami image's prestop.sh. A hook that runs a script whose content is elsewhere is not guessed at.
package selfremoval

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Hook is one container's preStop hook that removes the member from etcd.
type Hook struct {
	Container string
	// Command is the hook's command, its words joined by spaces, for a person.
	Command string
	// TurnOff says what setting removes the hook, when it is a known chart's ("" when it is not).
	TurnOff string
}

// bitnamiPreStop is the script the Bitnami etcd image runs on termination when the chart's
// removeMemberOnContainerTermination is on: it runs `etcdctl member remove` with the ID in the data dir.
const bitnamiPreStop = "/opt/bitnami/scripts/etcd/prestop.sh"

// Find returns the hooks that remove the member from etcd, in container order: the native sidecars' first
// (init containers with restartPolicy Always, which run beside etcd and whose preStop hooks run when the pod
// stops, after the main containers'), then the containers'. A plain init container has exited long before
// the pod stops: its hooks never run.
func Find(spec *corev1.PodSpec) []Hook {
	if spec == nil {
		return nil
	}
	var running []corev1.Container
	for _, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			running = append(running, c)
		}
	}
	running = append(running, spec.Containers...)
	var hooks []Hook
	for _, c := range running {
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil {
			continue
		}
		words := c.Lifecycle.PreStop.Exec.Command
		command := strings.Join(words, " ")
		switch {
		case runsBitnamiPreStop(words):
			hooks = append(hooks, Hook{Container: c.Name, Command: command,
				TurnOff: "the Bitnami etcd chart's removeMemberOnContainerTermination: false"})
		case removesMember(command):
			hooks = append(hooks, Hook{Container: c.Name, Command: command})
		}
	}
	return hooks
}

// removesMember says a command line (a shell one-liner included) runs etcdctl's member remove.
func removesMember(command string) bool {
	fields := strings.Fields(command)
	for i := 0; i+1 < len(fields); i++ {
		if fields[i] == "member" && (fields[i+1] == "remove" || strings.HasPrefix(fields[i+1], "remove;")) {
			return true
		}
	}
	return false
}

// runsBitnamiPreStop says the hook runs the Bitnami image's prestop.sh, directly or through a shell.
func runsBitnamiPreStop(words []string) bool {
	for _, w := range words {
		for _, f := range strings.Fields(w) {
			if path.Clean(f) == bitnamiPreStop {
				return true
			}
		}
	}
	return false
}
