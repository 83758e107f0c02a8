package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/etcd-rollout/pulumi-etcd-rollout/bench/engineroll"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// Target, EngineOutcome, TimedEvent and EngineRun are the engine child's (engineroll's) account.
type (
	Target        = engineroll.Target
	EngineOutcome = engineroll.EngineOutcome
	TimedEvent    = engineroll.TimedEvent
	EngineRun     = engineroll.EngineRun
)

func targetOf(e *harness.Etcd) Target {
	t := Target{Namespace: e.Namespace, StatefulSet: e.Spec.Name, Service: e.Spec.ServiceName}
	if e.TLS != nil {
		t.TLSFiles = tlsFiles
	}
	return t
}

// tlsFiles are the client certificate paths inside the etcd container of the mTLS manifests.
var tlsFiles = &rollout.TLSFiles{
	CAFile:   memberapi.DefaultTLSDir + "/" + memberapi.SecretCA,
	CertFile: memberapi.DefaultTLSDir + "/" + memberapi.SecretClientCert,
	KeyFile:  memberapi.DefaultTLSDir + "/" + memberapi.SecretClientKey,
}

// engineBinary is the child that runs the engines: bench-engine, built next to this binary by run.sh.
const engineBinary = "bench-engine"

// rollWithEnginesInChild runs the engines in a fresh process of the lean bench-engine binary (engineroll), so
// the CPU time and peak RSS are those of a process that did nothing but the rollouts and links nothing but the
// engine.
// oneMember gives the engines the consent a one-member etcd's roll needs, and a snapshot directory next to
// the binaries (bench/out/snapshots).
func rollWithEnginesInChild(ctx context.Context, kubeconfig string, targets []Target, st Strategy, profilePrefix string, oneMember bool) (EngineRun, error) {
	self, err := os.Executable()
	if err != nil {
		return EngineRun{}, fmt.Errorf("finding the bench binary: %w", err)
	}
	child := filepath.Join(filepath.Dir(self), engineBinary)
	spec, err := json.Marshal(targets)
	if err != nil {
		return EngineRun{}, err
	}
	cmd := exec.CommandContext(ctx, child, "-kubeconfig", kubeconfig, "-policy", string(st.Policy),
		"-cooldown", st.Cooldown.String(), "-stable-for", st.StableFor.String(), "-targets", string(spec),
		"-profile", profilePrefix, "-snapshot-to", filepath.Join(filepath.Dir(self), "snapshots"))
	if oneMember {
		cmd.Args = append(cmd.Args, "-accept-write-outage")
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return EngineRun{}, fmt.Errorf("%s (child): %w: %s", child, err, strings.TrimSpace(stderr.String()))
	}
	var run EngineRun
	if err := json.Unmarshal(stdout.Bytes(), &run); err != nil {
		return EngineRun{}, fmt.Errorf("decoding the child's answer: %w", err)
	}
	run.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return run, nil
}

// rollDefault is the default StatefulSet roll of every cluster at once: partition 0, then wait until the
// StatefulSet controller has replaced every pod and etcd is healthy (harness.WaitRolledOut), then the
// partition goes back to replicas so the engine strategies find the lock they expect.
func rollDefault(ctx context.Context, clusters []*harness.Etcd) (time.Duration, error) {
	start := time.Now()
	for _, e := range clusters {
		if err := e.SetPartition(ctx, 0); err != nil {
			return 0, err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, e := range clusters {
		g.Go(func() error { return e.WaitRolledOut(gctx, 3*time.Minute) })
	}
	err := g.Wait()
	wall := time.Since(start)
	for _, e := range clusters {
		if lerr := e.SetPartition(context.WithoutCancel(ctx), e.Spec.Replicas); lerr != nil {
			err = errors.Join(err, lerr)
		}
	}
	return wall, err
}
