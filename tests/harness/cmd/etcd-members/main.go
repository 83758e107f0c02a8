// Command etcd-members is the kubelet of the local cluster's etcd pods: tests/cluster/up.sh starts it, and it
// gives every pod of an opted-in StatefulSet (label etcd-rollout.test/member: "true" in the pod template) a
// real etcd process on 127.0.0.1. See package tests/harness/internal/members for what it does and
// tests/harness/memberapi for its control API. SIGTERM or SIGINT stops it and every member it runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/internal/members"
)

func main() {
	var cfg members.Config
	flag.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig of the local cluster")
	flag.StringVar(&cfg.RunDir, "run-dir", "", "the cluster's run dir (tests/.run)")
	flag.StringVar(&cfg.Listen, "listen", "127.0.0.1:18390", "control API address")
	flag.StringVar(&cfg.BinDir, "bin-dir", "", "directory with the etcd binaries: etcd, etcd-v3.5 and etcd-v<release> such as etcd-v3.5.21")
	flag.StringVar(&cfg.MemberPorts, "member-ports", "20000-28999", "local port range for the members")
	node := flag.String("node", "kwok-node-0", "the fake node (informational)")
	flag.Parse()
	if cfg.Kubeconfig == "" || cfg.RunDir == "" || cfg.BinDir == "" {
		fmt.Fprintln(os.Stderr, "etcd-members: --kubeconfig, --run-dir and --bin-dir are required")
		os.Exit(2)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	slog.Info("starting", "node", *node, "runDir", cfg.RunDir)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := members.Run(ctx, cfg); err != nil {
		slog.Error("etcd-members failed", "err", err)
		os.Exit(1)
	}
}
