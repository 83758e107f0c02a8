package rollout

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/snapshot"
)

// NewConfig returns a Config for one StatefulSet with the old Job's defaults: client port 2379, 30s
// cool-down, 300s ready timeout, 60s health timeout, lazy leader placement; a member that fails on the new
// revision is reverted (the Job left it down); and a holder name unique to this Config
// ("etcd-rollout@host/pid/random", see RunIdentity) so a refused second rollout can tell a person where the
// first one runs, and a run never mistakes a dead predecessor's Lease for its own.
func NewConfig(sts, namespace, service string) Config {
	return Config{
		StatefulSet:   sts,
		Namespace:     namespace,
		ServiceName:   service,
		ClientPort:    DefaultClientPort,
		Cooldown:      DefaultCooldown,
		ReadyTimeout:  DefaultReadyTimeout,
		HealthTimeout: DefaultHealthTimeout,
		LeaderPolicy:  LeaderLazy,
		OnFailure:     FailureRevert,
		Holder:        "etcd-rollout@" + RunIdentity(),
	}
}

// Validate reports every bad field at once, each error naming the field as a user wrote it, so a preview
// can reject the input before anything in the cluster is touched.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	dnsName := func(field, v string) {
		if v == "" {
			bad(field, "is required")
			return
		}
		if msgs := validation.IsDNS1123Subdomain(v); len(msgs) > 0 {
			bad(field, "%q is not a valid name: %s", v, strings.Join(msgs, "; "))
		}
	}
	dnsName("stsName", c.StatefulSet)
	if c.Namespace == "" {
		bad("namespace", "is required")
	} else if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		bad("namespace", "%q is not a valid namespace: %s", c.Namespace, strings.Join(msgs, "; "))
	}
	dnsName("serviceName", c.ServiceName)
	if c.ClientPort < 1 || c.ClientPort > 65535 {
		bad("clientPort", "%d is not a TCP port (1-65535)", c.ClientPort)
	}
	if c.TLS != nil {
		for _, f := range []struct{ name, v string }{{"tls.caFile", c.TLS.CAFile}, {"tls.certFile", c.TLS.CertFile}, {"tls.keyFile", c.TLS.KeyFile}} {
			if f.v == "" {
				bad(f.name, "is required when tls is set")
			} else if !strings.HasPrefix(f.v, "/") {
				bad(f.name, "%q must be an absolute path inside the etcd container", f.v)
			}
		}
	}
	if c.SnapshotTo != "" {
		if _, err := snapshot.Parse(c.SnapshotTo); err != nil {
			bad("snapshotTo", "%v", err)
		}
	}
	if c.Cooldown < 0 {
		bad("cooldownSeconds", "must not be negative, got %s", c.Cooldown)
	}
	if c.ReadyTimeout <= 0 {
		bad("readyTimeoutSeconds", "must be positive, got %s", c.ReadyTimeout)
	}
	if c.HealthTimeout <= 0 {
		bad("healthTimeoutSeconds", "must be positive, got %s", c.HealthTimeout)
	}
	switch c.LeaderPolicy {
	case LeaderLazy, LeaderJobLike:
	default:
		bad("leaderPolicy", "%q is not %q or %q", c.LeaderPolicy, LeaderLazy, LeaderJobLike)
	}
	switch c.OnFailure {
	case FailureRevert, FailureStop, "":
	default:
		bad("onFailure", "%q is not %q or %q", c.OnFailure, FailureRevert, FailureStop)
	}
	if c.Holder == "" {
		bad("holder", "is required (NewConfig fills it)")
	}
	return errors.Join(errs...)
}

// SnapshotDestination is where a run stores the snapshot before a point of no return: SnapshotTo, or
// DefaultSnapshotDir when it is empty. The run and a preview both name it from here.
func (c Config) SnapshotDestination() string { return cmp.Or(c.SnapshotTo, DefaultSnapshotDir()) }

// DefaultSnapshotDir is where a run stores the snapshot before a point of no return when Config.SnapshotTo is
// empty: a directory of the user running it ($XDG_STATE_HOME/etcd-rollout/snapshots, or
// ~/.local/state/etcd-rollout/snapshots), which outlives reboots, unlike the temporary directory.
func DefaultSnapshotDir() string {
	if dir := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "etcd-rollout", "snapshots")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "etcd-rollout", "snapshots")
	}
	return filepath.Join(os.TempDir(), "etcd-rollout", "snapshots")
}

// consents are the risks this rollout's user accepted, as the planner's CheckConsents reads them.
func (c Config) consents() planner.Consents {
	return planner.Consents{PreStopMemberRemoval: c.AcceptPreStopMemberRemoval, WriteOutage: c.AcceptWriteOutage}
}

// RunIdentity names this run for the StatefulSet's Lease: host name, process id and random bytes, as
// "host/pid/3f9c2a1b". The host and pid tell a person refused by the Lease where the holder runs; the
// random part keeps two runs apart that share both (a pid reused after a restart, containers that each
// run the tool as pid 1 under the same host name). Without it a run could not tell a dead predecessor's
// Lease from its own and would not know the partition it left lowered is its to re-lock.
func RunIdentity() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown-host"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail (it crashes the program rather than return an error)
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b))
}
