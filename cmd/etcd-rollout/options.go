package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/memberdial"
)

// options are the flags every subcommand shares: which StatefulSet, how to reach it, how to roll it.
type options struct {
	sts, namespace, kubeconfig, kubeContext, service string
	clientPort                                       int
	caFile, certFile, keyFile                        string
	cooldown, readyTimeout, healthTimeout            time.Duration
	leaderPolicy, onFailure                          string
	direct, acceptPreStopMemberRemoval               bool
	leaseDuration                                    time.Duration
	snapshotTo                                       string
	proceedWithoutSnapshot                           bool
	acceptWriteOutage                                bool
}

func (o *options) bind(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&o.sts, "sts", "", "name of the etcd StatefulSet (required)")
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the StatefulSet (default: the kubeconfig context's)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig (default: $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&o.kubeContext, "context", "", "kubeconfig context to use (default: the current one)")
	f.StringVar(&o.service, "service", "", "governing (headless) Service of the StatefulSet (default: its spec.serviceName)")
	f.IntVar(&o.clientPort, "client-port", rollout.DefaultClientPort, "etcd client port in the pod")
	f.StringVar(&o.caFile, "ca-file", "", "with TLS: CA certificate path inside the etcd container")
	f.StringVar(&o.certFile, "cert-file", "", "with TLS: client certificate path inside the etcd container")
	f.StringVar(&o.keyFile, "key-file", "", "with TLS: client key path inside the etcd container")
	f.DurationVar(&o.cooldown, "cooldown", rollout.DefaultCooldown, "pause after each member has passed its health gate")
	f.DurationVar(&o.readyTimeout, "ready-timeout", rollout.DefaultReadyTimeout, "per member: limit for the pod to be at updateRevision and Ready")
	f.DurationVar(&o.healthTimeout, "health-timeout", rollout.DefaultHealthTimeout, "per member: limit for etcd to call it healthy and caught up")
	f.StringVar(&o.leaderPolicy, "leader-policy", string(rollout.LeaderLazy), `where the leader goes before a member restarts: "lazy" (fewest transfers) or "job-like" (the old Job's: to member 0, then to N-1)`)
	f.StringVar(&o.onFailure, "on-failure", string(rollout.FailureRevert), `what happens to a member that fails its gates on the new revision: "revert" (delete its pod with the partition locked, so it comes back on the old revision, then fail) or "stop" (leave it for a person)`)
	f.DurationVar(&o.leaseDuration, "lease-duration", 15*time.Second, "how long the rollout lease stays valid without renewal: after a run is killed, the next one waits this long")
	f.BoolVar(&o.acceptPreStopMemberRemoval, "accept-prestop-member-removal", false, "roll pods whose preStop hook removes their own member from etcd (the Bitnami chart's removeMemberOnContainerTermination); refused without it, as every restart would remove a voter with no quorum check")
	f.BoolVar(&o.acceptWriteOutage, "accept-write-outage", false, "roll a one-member etcd: its only member's restart stops every read and write until it is back; refused without it. A verified snapshot is stored first (always) and the outage is measured")
	f.StringVar(&o.snapshotTo, "snapshot-to", "", "where a minor-version change stores its verified snapshot before the first restart: a directory, or a file://, s3://, gs:// or azblob:// URL (default: "+rollout.DefaultSnapshotDir()+")")
	f.BoolVar(&o.proceedWithoutSnapshot, "proceed-without-snapshot", false, "let a minor-version change go on when its snapshot fails (the summary says so); without it the run stops before its first restart")
	f.BoolVar(&o.direct, "direct", false, "reach members at <pod>.<service>.<namespace>.svc instead of port-forwarding (inside the cluster)")
}

// engine loads the kubeconfig, fills defaults from the StatefulSet and builds the engine.
func (o *options) engine(ctx context.Context, onEvent func(rollout.Event)) (*rollout.Engine, error) {
	if o.sts == "" {
		return nil, usageError{errors.New("--sts is required")}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.kubeContext})
	restConfig, err := loader.ClientConfig()
	if err != nil {
		return nil, usageError{fmt.Errorf("loading kubeconfig: %w", err)}
	}
	ns := o.namespace
	if ns == "" {
		if ns, _, err = loader.Namespace(); err != nil {
			return nil, usageError{fmt.Errorf("no --namespace and none in the kubeconfig: %w", err)}
		}
	}
	service := o.service
	if service == "" {
		kube, err := kubernetes.NewForConfig(restConfig)
		if err != nil {
			return nil, err
		}
		sts, err := kube.AppsV1().StatefulSets(ns).Get(ctx, o.sts, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading StatefulSet %s/%s for its serviceName: %w", ns, o.sts, err)
		}
		service = sts.Spec.ServiceName
	}

	cfg := rollout.NewConfig(o.sts, ns, service)
	cfg.ClientPort = o.clientPort
	cfg.Cooldown, cfg.ReadyTimeout, cfg.HealthTimeout = o.cooldown, o.readyTimeout, o.healthTimeout
	cfg.LeaderPolicy = rollout.LeaderPolicy(o.leaderPolicy)
	cfg.OnFailure = rollout.FailurePolicy(o.onFailure)
	cfg.AcceptPreStopMemberRemoval = o.acceptPreStopMemberRemoval
	cfg.AcceptWriteOutage = o.acceptWriteOutage
	cfg.SnapshotTo, cfg.ProceedWithoutSnapshot = o.snapshotTo, o.proceedWithoutSnapshot
	if o.caFile != "" || o.certFile != "" || o.keyFile != "" {
		cfg.TLS = &rollout.TLSFiles{CAFile: o.caFile, CertFile: o.certFile, KeyFile: o.keyFile}
	}
	if err := cfg.Validate(); err != nil {
		return nil, usageError{err}
	}
	opts := rollout.Options{RestConfig: restConfig, OnEvent: onEvent, LeaseDuration: o.leaseDuration}
	if o.direct {
		opts.Dialer = memberdial.NewDirect(service)
	}
	e, err := rollout.New(cfg, opts)
	if err != nil {
		return nil, usageError{err}
	}
	return e, nil
}
