package main

import (
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// pluginBinary is the file name under which kubectl runs this command as a plugin: `kubectl etcd-rollout ...`
// makes kubectl look for kubectl-etcd_rollout on PATH (a dash in a plugin's command is an underscore in its
// file name) and run it with the remaining arguments. `make kubectl-plugin` installs it under that name.
const pluginBinary = "kubectl-etcd_rollout"

// nameForInvocation makes usage and help name the command the way it was typed: "kubectl etcd-rollout" when
// kubectl ran it as a plugin, so the examples a person copies from --help work as they are.
func nameForInvocation(root *cobra.Command, argv0 string) {
	if strings.TrimSuffix(filepath.Base(argv0), ".exe") != pluginBinary {
		return
	}
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[cobra.CommandDisplayNameAnnotation] = "kubectl etcd-rollout"
}
