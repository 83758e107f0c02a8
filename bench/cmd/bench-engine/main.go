// Command bench-engine is the process make bench measures: it rolls the StatefulSets it is given at once with
// the engine and prints what that took as JSON (engineroll.EngineRun). bench/run.sh builds it next to the
// bench binary, which starts it for every engine rollout.
package main

import (
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/etcd-rollout/pulumi-etcd-rollout/bench/engineroll"
)

func main() {
	// client-go's port-forward reports every stream a stopping member cuts; that is the roll, not news.
	klog.SetLogger(logr.Discard())
	if err := engineroll.Command(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench-engine:", err)
		os.Exit(1)
	}
}
