//go:build integration

package harness_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// handshake dials ordinal's client port with the users' TLS view of the cluster, checking serverName.
func handshake(t *testing.T, e *harness.Etcd, ordinal int, serverName string) error {
	m, err := e.Member(t.Context(), ordinal)
	require.NoError(t, err)
	cfg, err := e.ClientTLS()
	require.NoError(t, err)
	cfg.ServerName = serverName
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", m.ClientPort), cfg)
	if err == nil {
		conn.Close()
	}
	return err
}

// Members serving shaped and negative certificates still form a healthy cluster (the harness's view), while
// a client with the users' view (ca.crt, names checked) accepts exactly the name the certificate carries
// and gets the verification failure the certificate is there to cause.
func TestShapedCertificatesServe(t *testing.T) {
	t.Parallel() // waits on delays, not on the CPU: overlapping them keeps make test lean
	hostnameErr := func(err error) bool { var h x509.HostnameError; return errors.As(err, &h) }
	tests := []struct {
		name  string
		certs harness.CertOptions
		// accepted and refused are server names dialled on etcd-1 (%s: the namespace); accepted "" skips.
		accepted, refused string
		why               func(error) bool
	}{
		{"wildcard .svc", harness.CertOptions{Shape: harness.CertShapeWildcardSvc},
			"etcd-1.etcd-headless.%s.svc", "etcd-1.etcd-headless.%s", hostnameErr},
		{"another member's certificate", harness.CertOptions{OnlyPod: "etcd-0"},
			"etcd-0.etcd-headless.%s.svc", "etcd-1.etcd-headless.%s.svc", hostnameErr},
		{"foreign CA", harness.CertOptions{ForeignCA: true}, "", "etcd-1.etcd-headless.%s.svc",
			func(err error) bool { var u x509.UnknownAuthorityError; return errors.As(err, &u) }},
	}
	c := harness.Connect(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := c.Namespace(t)
			e := c.MustCreateEtcd(t, ns, harness.EtcdSpec{TLS: true, GracePeriod: 5 * time.Second, Certs: tt.certs})
			if tt.accepted != "" {
				assert.NoError(t, handshake(t, e, 1, fmt.Sprintf(tt.accepted, ns)))
			}
			err := handshake(t, e, 1, fmt.Sprintf(tt.refused, ns))
			require.Error(t, err)
			assert.True(t, tt.why(err), "unexpected failure: %v", err)
			st, err := e.Status(t.Context(), 1)
			require.NoError(t, err, "the daemon still reads the member")
			assert.NotZero(t, st.Leader)
		})
	}
}
