//go:build tools

// Package tools pins the Kubernetes control-plane commands the local test cluster runs, and the kubectl
// the tests run the README's `kubectl wait` line with.
// It lives in its own module so that k8s.io/kubernetes and its staging replaces never reach the main go.mod.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
