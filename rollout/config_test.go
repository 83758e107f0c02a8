package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewConfigDefaults(t *testing.T) {
	c := NewConfig("etcd", "prod", "etcd")
	require.NoError(t, c.Validate())
	assert.Equal(t, 2379, c.ClientPort)
	assert.Equal(t, 30*time.Second, c.Cooldown)
	assert.Equal(t, 300*time.Second, c.ReadyTimeout)
	assert.Equal(t, 60*time.Second, c.HealthTimeout)
	assert.Equal(t, LeaderLazy, c.LeaderPolicy)
	assert.Contains(t, c.Holder, "etcd-rollout@")
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string
	}{
		{"missing names", func(c *Config) { c.StatefulSet, c.Namespace, c.ServiceName = "", "", "" },
			[]string{"stsName: is required", "namespace: is required", "serviceName: is required"}},
		{"bad namespace", func(c *Config) { c.Namespace = "Prod_1" }, []string{`namespace: "Prod_1" is not a valid namespace`}},
		{"port", func(c *Config) { c.ClientPort = 0 }, []string{"clientPort: 0 is not a TCP port"}},
		{"timeouts", func(c *Config) { c.ReadyTimeout, c.HealthTimeout, c.Cooldown = 0, -time.Second, -time.Second },
			[]string{"readyTimeoutSeconds: must be positive", "healthTimeoutSeconds: must be positive", "cooldownSeconds: must not be negative"}},
		{"partial tls", func(c *Config) { c.TLS = &TLSFiles{CAFile: "/etc/etcd/pki/ca.crt", CertFile: "certs/client.crt"} },
			[]string{`tls.certFile: "certs/client.crt" must be an absolute path`, "tls.keyFile: is required when tls is set"}},
		{"policy", func(c *Config) { c.LeaderPolicy = "fast" }, []string{`leaderPolicy: "fast" is not`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewConfig("etcd", "prod", "etcd")
			tt.mutate(&c)
			err := c.Validate()
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
