package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
)

// configFields are the names Validate may use in its messages: the names a user writes.
var configFields = []string{"stsName", "namespace", "serviceName", "clientPort", "tls.caFile", "tls.certFile",
	"tls.keyFile", "cooldownSeconds", "readyTimeoutSeconds", "healthTimeoutSeconds", "leaderPolicy", "holder"}

// FuzzConfigValidate checks Config.Validate, the gate in front of everything the engine touches: it never
// panics; every complaint starts with the name of the field it is about; and a Config it accepts really
// is usable (names Kubernetes accepts, a TCP port, absolute TLS paths, positive time limits), so bad input
// can never get past it to the cluster.
func FuzzConfigValidate(f *testing.F) {
	f.Add("etcd", "default", "etcd-headless", 2379, false, "/tls/ca.crt", "/tls/client.crt", "/tls/client.key", int64(30), int64(300), int64(60), "lazy")
	f.Add("", "", "", 0, true, "", "ca.crt", "/k", int64(-1), int64(0), int64(-5), "eager")
	f.Add("Etcd_1", "kube-system", "svc.with.dots", 65536, true, "/a", "/b", "/c", int64(0), int64(1), int64(1), "job-like")
	f.Add(strings.Repeat("a", 300), "ns", "s", 1, false, "", "", "", int64(0), int64(1), int64(1), "lazy")
	f.Fuzz(func(t *testing.T, sts, ns, svc string, port int, withTLS bool, ca, cert, key string, cooldown, ready, health int64, policy string) {
		cfg := Config{StatefulSet: sts, Namespace: ns, ServiceName: svc, ClientPort: port,
			Cooldown: time.Duration(cooldown), ReadyTimeout: time.Duration(ready), HealthTimeout: time.Duration(health),
			LeaderPolicy: LeaderPolicy(policy), Holder: "fuzz"}
		if withTLS {
			cfg.TLS = &TLSFiles{CAFile: ca, CertFile: cert, KeyFile: key}
		}
		err := cfg.Validate()
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				named := false
				for _, field := range configFields {
					named = named || strings.HasPrefix(line, field+": ")
				}
				require.True(t, named, "complaint %q does not start with a field name", line)
			}
			return
		}
		require.Empty(t, validation.IsDNS1123Subdomain(sts))
		require.Empty(t, validation.IsDNS1123Label(ns))
		require.Empty(t, validation.IsDNS1123Subdomain(svc))
		require.True(t, port >= 1 && port <= 65535)
		require.True(t, cooldown >= 0 && ready > 0 && health > 0)
		require.Contains(t, []LeaderPolicy{LeaderLazy, LeaderJobLike}, cfg.LeaderPolicy)
		if withTLS {
			for _, p := range []string{ca, cert, key} {
				require.True(t, strings.HasPrefix(p, "/"), "TLS path %q is not absolute", p)
			}
		}
	})
}
