// Command etcd-rollout rolls an etcd StatefulSet one member at a time with the leader kept off the member
// being restarted, health-gated on etcd's own word. It is the operator's face of the rollout package, the
// same engine the Pulumi provider runs.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// Exit codes, documented in --help and the README, so scripts and CI can tell outcomes apart.
const (
	exitOK          = 0
	exitFailed      = 1   // the rollout failed after it started; the partition was re-locked
	exitUsage       = 2   // bad flags or input; nothing was touched
	exitBlocked     = 3   // the cluster's state does not allow a rollout (quorum, leader, learners...); nothing was changed
	exitLocked      = 4   // another rollout holds the StatefulSet's lease
	exitTimeout     = 5   // a member did not pass its gate in time (and was reverted, unless --on-failure=stop); the partition was re-locked
	exitInterfered  = 6   // someone else changed the StatefulSet (partition/template) before or during the run
	exitInterrupted = 130 // Ctrl-C or SIGTERM; the partition was re-locked
)

const exitCodesHelp = `Exit codes:
  0    success (run: every member at updateRevision and healthy, partition re-locked)
  1    the rollout failed after it started; the partition was re-locked
  2    bad flags or input; nothing was touched
  3    blocked: the cluster's state does not allow a rollout (quorum, no leader, learners, one member
       without --accept-write-outage); nothing changed
  4    another rollout holds the StatefulSet's lease (the error names the holder)
  5    a member did not pass a gate in time (the error names member, gate and what was last seen); with
       --on-failure=revert (the default) it was brought back on the old revision: "reverted etcd-2 to ..."
  6    someone else changed the StatefulSet's partition or template before or during the run
  130  interrupted (Ctrl-C); the partition was re-locked`

// version is set at build time (make etcd-rollout: -ldflags "-X main.version=..."), from the same
// PROVIDER_VERSION as the provider's.
var version = ""

// cliVersion is version, or the module version `go install` recorded, or "dev".
func cliVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return strings.TrimPrefix(bi.Main.Version, "v")
	}
	return "dev"
}

// usageError marks errors in the command line itself.
type usageError struct{ error }

func main() {
	// client-go's port-forward reports every closed stream on stderr; a member restart closes several.
	klog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCommand()
	nameForInvocation(root, os.Args[0])
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
	}
	os.Exit(exitCode(ctx, err))
}

func exitCode(ctx context.Context, err error) int {
	var usage usageError
	var gate *rollout.GateTimeoutError
	var locked *rollout.LockedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &usage):
		return exitUsage
	case ctx.Err() != nil:
		return exitInterrupted
	case errors.As(err, &locked):
		return exitLocked
	case errors.As(err, &gate):
		return exitTimeout
	case errors.Is(err, rollout.ErrInterference):
		return exitInterfered
	case errors.Is(err, rollout.ErrBlocked):
		return exitBlocked
	}
	return exitFailed
}

func newRootCommand() *cobra.Command {
	opts := &options{}
	root := &cobra.Command{
		Use:   "etcd-rollout",
		Short: "Roll an etcd StatefulSet member by member with no uncontrolled Raft elections",
		Long: `etcd-rollout rolls an etcd StatefulSet that is locked (RollingUpdate with partition = replicas) to its
updateRevision one member at a time, from ordinal N-1 down to 0. Before a member restarts, the Raft leader is
moved off it (to an already-updated member when there is one); after it restarts, the next member waits until
the pod is at updateRevision and Ready and etcd calls the member a healthy, caught-up voter. The partition goes
back to replicas on every exit, including Ctrl-C.

` + exitCodesHelp,
		Version:       cliVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	opts.bind(root)
	root.AddCommand(newStatusCommand(opts), newPlanCommand(opts), newRunCommand(opts), newUnlockCommand(opts), newSnapshotCommand(opts))
	return root
}
