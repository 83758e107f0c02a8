package provider

import (
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// engineConfig maps the resource's inputs onto the engine's Config, filling the engine's defaults for what
// the program left out. holder names this rollout in the StatefulSet's lease; empty keeps NewConfig's
// etcd-rollout@host/pid/random.
func engineConfig(in RolloutArgs, holder string) rollout.Config {
	cfg := rollout.NewConfig(in.StsName, in.Namespace, in.ServiceName)
	if holder != "" {
		cfg.Holder = holder
	}
	cfg.TemplateVersion = in.VersionHash
	if in.ClientPort != nil {
		cfg.ClientPort = *in.ClientPort
	}
	if in.TLS != nil {
		cfg.TLS = &rollout.TLSFiles{CAFile: in.TLS.CaFile, CertFile: in.TLS.CertFile, KeyFile: in.TLS.KeyFile}
	}
	if in.CooldownSeconds != nil {
		cfg.Cooldown = seconds(*in.CooldownSeconds)
	}
	if in.ReadyTimeoutSeconds != nil {
		cfg.ReadyTimeout = seconds(*in.ReadyTimeoutSeconds)
	}
	if in.HealthTimeoutSeconds != nil {
		cfg.HealthTimeout = seconds(*in.HealthTimeoutSeconds)
	}
	if in.OnFailure != nil && *in.OnFailure != "" {
		cfg.OnFailure = rollout.FailurePolicy(*in.OnFailure)
	}
	cfg.AcceptPreStopMemberRemoval = in.AcceptPreStopMemberRemoval != nil && *in.AcceptPreStopMemberRemoval
	cfg.AcceptWriteOutage = in.AcceptWriteOutage != nil && *in.AcceptWriteOutage
	if in.SnapshotTo != nil {
		cfg.SnapshotTo = *in.SnapshotTo
	}
	cfg.ProceedWithoutSnapshot = in.ProceedWithoutSnapshot != nil && *in.ProceedWithoutSnapshot
	return cfg
}

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }
