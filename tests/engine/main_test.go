//go:build integration

package engine_test

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// TestMain silences client-go's klog: every member restart closes port-forward streams, and client-go
// reports each one on stderr, which would bury the test output.
func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
