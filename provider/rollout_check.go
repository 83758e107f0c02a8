package provider

import (
	"context"
	"fmt"
	"path"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

var _ infer.CustomCheck[RolloutArgs] = (*Rollout)(nil)

// Check validates every input with a message that names the field and says what is wrong, before anything
// is touched. Then, when the cluster can be reached, it writes the pending plan into the inputs so that the
// preview shows which members will roll and where the leader moves.
func (r *Rollout) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[RolloutArgs], error) {
	in, failures, err := infer.DefaultCheck[RolloutArgs](ctx, req.NewInputs)
	if err != nil || len(failures) > 0 {
		return infer.CheckResponse[RolloutArgs]{Inputs: in, Failures: failures}, err
	}
	known := func(key string) bool { return !req.NewInputs.Get(key).IsComputed() }
	failures = validateArgs(in, known)
	in.Plan = nil
	if len(failures) == 0 && known("kubeconfig") && known("context") && known("cluster") && known("stsName") && known("namespace") {
		oldHash, hadOld := stringInput(req.OldInputs, "versionHash")
		templateChanges := !known("versionHash") || (hadOld && oldHash != in.VersionHash)
		mustExist := hadOld || (known("stsMustExist") && in.StsMustExist != nil && *in.StsMustExist)
		plan, clusterFailures := r.previewPlan(ctx, in, templateChanges, mustExist)
		failures = append(failures, clusterFailures...)
		in.Plan = plan
	}
	return infer.CheckResponse[RolloutArgs]{Inputs: in, Failures: failures}, nil
}

// validateArgs checks each known input; a field that is still unknown (preview of a value computed from
// another resource) is checked when it is known.
func validateArgs(in RolloutArgs, known func(string) bool) []p.CheckFailure {
	var failures []p.CheckFailure
	fail := func(prop, format string, args ...any) {
		failures = append(failures, p.CheckFailure{Property: prop, Reason: fmt.Sprintf(format, args...)})
	}
	if known("stsName") {
		// Pod names become etcd member hostnames, and the StatefulSet controller adds "-<ordinal>" and a
		// revision label, so the name must be a DNS-1123 label with room to spare.
		for _, msg := range validation.IsDNS1123Label(in.StsName) {
			fail("stsName", "stsName %q is not a valid StatefulSet name: %s", in.StsName, msg)
		}
		if len(in.StsName) > 52 {
			fail("stsName", "stsName %q is %d characters long; a StatefulSet name must be at most 52 so its pods' revision labels fit", in.StsName, len(in.StsName))
		}
	}
	if known("namespace") {
		for _, msg := range validation.IsDNS1123Label(in.Namespace) {
			fail("namespace", "namespace %q is not a valid namespace name: %s", in.Namespace, msg)
		}
	}
	if known("serviceName") {
		for _, msg := range validation.IsDNS1035Label(in.ServiceName) {
			fail("serviceName", "serviceName %q is not a valid Service name: %s", in.ServiceName, msg)
		}
	}
	if known("clientPort") && in.ClientPort != nil && (*in.ClientPort < 1 || *in.ClientPort > 65535) {
		fail("clientPort", "clientPort %d is out of range: a TCP port is 1 to 65535", *in.ClientPort)
	}
	if known("versionHash") && strings.TrimSpace(in.VersionHash) == "" {
		fail("versionHash", "versionHash is empty: pass a value that changes whenever the pod template changes")
	}
	if known("cooldownSeconds") && in.CooldownSeconds != nil && (*in.CooldownSeconds < 0 || tooManySeconds(*in.CooldownSeconds)) {
		fail("cooldownSeconds", "cooldownSeconds is %d: it must be 0 or more, and at most %d", *in.CooldownSeconds, maxSeconds)
	}
	if known("readyTimeoutSeconds") && in.ReadyTimeoutSeconds != nil && (*in.ReadyTimeoutSeconds <= 0 || tooManySeconds(*in.ReadyTimeoutSeconds)) {
		fail("readyTimeoutSeconds", "readyTimeoutSeconds is %d: it must be a positive number of seconds, at most %d", *in.ReadyTimeoutSeconds, maxSeconds)
	}
	if known("healthTimeoutSeconds") && in.HealthTimeoutSeconds != nil && (*in.HealthTimeoutSeconds <= 0 || tooManySeconds(*in.HealthTimeoutSeconds)) {
		fail("healthTimeoutSeconds", "healthTimeoutSeconds is %d: it must be a positive number of seconds, at most %d", *in.HealthTimeoutSeconds, maxSeconds)
	}
	if known("onFailure") && in.OnFailure != nil {
		switch rollout.FailurePolicy(*in.OnFailure) {
		case rollout.FailureRevert, rollout.FailureStop:
		default:
			fail("onFailure", "onFailure is %q: it must be %q (bring a failed member back on the old revision) or %q (leave it as it is)",
				*in.OnFailure, rollout.FailureRevert, rollout.FailureStop)
		}
	}
	if known("snapshotTo") && in.SnapshotTo != nil && *in.SnapshotTo != "" {
		if err := rollout.CheckSnapshotDestination(*in.SnapshotTo); err != nil {
			fail("snapshotTo", "snapshotTo is refused: %v", err)
		}
	}
	if known("tls") && in.TLS != nil {
		failures = append(failures, validateTLS(*in.TLS)...)
	}
	return failures
}

// validateTLS enforces all-or-nothing: a half-configured TLS client would fail only when the first member is
// dialled, after the rollout has started.
func validateTLS(t TLS) []p.CheckFailure {
	files := []struct{ prop, value string }{
		{"tls.caFile", t.CaFile}, {"tls.certFile", t.CertFile}, {"tls.keyFile", t.KeyFile},
	}
	var missing []string
	var failures []p.CheckFailure
	for _, f := range files {
		switch {
		case f.value == "":
			missing = append(missing, f.prop)
		case !path.IsAbs(f.value):
			failures = append(failures, p.CheckFailure{Property: f.prop,
				Reason: fmt.Sprintf("%s %q must be an absolute path inside the etcd container", f.prop, f.value)})
		}
	}
	if len(missing) > 0 && len(missing) < len(files) {
		failures = append(failures, p.CheckFailure{Property: "tls",
			Reason: fmt.Sprintf("tls needs caFile, certFile and keyFile together; missing %s", strings.Join(missing, ", "))})
	}
	if len(missing) == len(files) {
		failures = append(failures, p.CheckFailure{Property: "tls",
			Reason: "tls is set but empty: give caFile, certFile and keyFile, or leave tls out for plain HTTP"})
	}
	return failures
}

func stringInput(m property.Map, key string) (string, bool) {
	v, ok := m.GetOk(key)
	if !ok || !v.IsString() {
		return "", false
	}
	return v.AsString(), true
}
