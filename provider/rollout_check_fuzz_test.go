package provider

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// rolloutInputs are the properties a Check failure may name: the Rollout's inputs as a program writes them.
var rolloutInputs = map[string]bool{"stsName": true, "namespace": true, "serviceName": true, "clientPort": true,
	"tls": true, "tls.caFile": true, "tls.certFile": true, "tls.keyFile": true, "versionHash": true,
	"cooldownSeconds": true, "readyTimeoutSeconds": true, "healthTimeoutSeconds": true}

// FuzzValidateArgs checks the provider's input validation against the engine's own: whatever the inputs,
// validateArgs never panics, each failure names an input and says why, and inputs it passes make an
// engine Config that the engine accepts too. Otherwise a bad input would get through `pulumi preview` and
// fail only in `pulumi up`, the moment CONTRIBUTING.md's rule ("bad input gets a clear error before
// anything is touched") is about.
func FuzzValidateArgs(f *testing.F) {
	f.Add("etcd", "default", "etcd-headless", 2379, true, "/tls/ca.crt", "/tls/client.crt", "/tls/client.key", "v1", 30, 300, 60, true)
	f.Add("", "", "", 0, true, "", "rel", "", " ", -1, 0, -1, true)
	f.Add("a.b", "NS", "1svc", 70000, false, "", "", "", "v", 0, 1, 1, false)
	f.Add(strings.Repeat("e", 53), "n", "s", 1, true, "/a", "/b", "/c", "h", 0, 1, 1, true)
	f.Add("etcd", "default", "etcd", 2379, false, "", "", "", "v", 1<<62, 1<<62, 9223372037, false) // seconds that overflow a Duration
	f.Fuzz(func(t *testing.T, sts, ns, svc string, port int, withPort bool, ca, cert, key, hash string, cooldown, ready, health int, withTLS bool) {
		in := RolloutArgs{StsName: sts, Namespace: ns, ServiceName: svc, VersionHash: hash,
			CooldownSeconds: &cooldown, ReadyTimeoutSeconds: &ready, HealthTimeoutSeconds: &health}
		if withPort {
			in.ClientPort = &port
		}
		if withTLS {
			in.TLS = &TLS{CaFile: ca, CertFile: cert, KeyFile: key}
		}
		failures := validateArgs(in, func(string) bool { return true })
		for _, fl := range failures {
			require.True(t, rolloutInputs[fl.Property], "failure names %q, which is not an input", fl.Property)
			require.Contains(t, fl.Reason, fl.Property, "the reason names the field")
		}
		if len(failures) > 0 {
			return
		}
		require.NoError(t, engineConfig(in, "fuzz").Validate(), "Check passed inputs the engine refuses: %+v", in)
	})
}
