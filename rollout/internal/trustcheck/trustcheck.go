// Package trustcheck runs the trust check of a restart (package trust) against a live cluster, on both sides
// of a member's TLS. Peer side: it reads the peer material the restarted pod will mount (the template's
// --peer-trusted-ca-file, --peer-cert-file and --peer-key-file, from the Secrets or ConfigMaps behind them),
// probes every other member's running peer trust with the new leaf, and judges. Client side: it reads the
// --trusted-ca-file and --cert-file, and judges them against the engine's own client certificate and trust
// and against the certificate every other member serves on its client port now. The engine asks it before
// every restart and in preview (issue 33).
package trustcheck

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/podfile"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/trust"
)

// Prober asks a running member whether its peer trust accepts a certificate (member.Clients).
type Prober interface {
	ProbePeerTrust(ctx context.Context, pod string, peerPort int, leaf tls.Certificate, roots *x509.CertPool, serverName string) (member.PeerTrustProbe, error)
}

// Engine is the engine's own side of the members' client ports (member.Clients): the certificate it
// presents, how its connections judge a member's server certificate, and what a member serves now.
type Engine interface {
	ClientChain(ctx context.Context) ([]*x509.Certificate, error)
	RefusesServerChain(ctx context.Context, pod string, chain []*x509.Certificate) (string, error)
	ServedChain(ctx context.Context, pod string, port int) ([]*x509.Certificate, error)
}

// Files are one side's TLS files, as etcd's flags name them.
type Files struct {
	CA, Cert, Key string
}

// ClientFilesOf reads the client-port TLS files from etcd's flag values; ok is false when the member serves
// its clients without TLS (no --cert-file). CA is empty when it asks clients for no certificate.
func ClientFilesOf(flags map[string]string) (Files, bool) {
	f := Files{CA: flags["trusted-ca-file"], Cert: flags["cert-file"], Key: flags["key-file"]}
	return f, f.Cert != "" && f.Key != ""
}

// FilesOf reads the peer TLS files from etcd's flag values; ok is false when the members talk to each other
// without client certificates of their own (no peer TLS, or no --peer-cert-file), where there is nothing to
// check.
func FilesOf(flags map[string]string) (Files, bool) {
	f := Files{CA: flags["peer-trusted-ca-file"], Cert: flags["peer-cert-file"], Key: flags["peer-key-file"]}
	return f, f.Cert != "" && f.Key != "" && f.CA != ""
}

// Member is a member as the check needs it: its pod, the peer URL etcd lists it under (whose host the
// member's certificate must name, and whose port its peers dial), and whether it answers us.
type Member struct {
	Pod       string
	PeerURL   string
	Reachable bool
	// UID is the pod's, Restarts the kubelet's count of its container restarts: a Memo keeps what a member
	// answered only for the process that answered, the same container in the same pod.
	UID      string
	Restarts int32
}

// Template is the pod template the restarted members start from.
type Template struct {
	Spec      *corev1.PodSpec
	Container *corev1.Container
	Flags     map[string]string
}

// Sources names the objects the template's TLS files come from ("Secret etcd-peer-tls (key tls.crt)"), each
// once, peer side first: where a person puts material back.
func (t Template) Sources() []string {
	var files []string
	if f, ok := FilesOf(t.Flags); ok {
		files = append(files, f.CA, f.Cert, f.Key)
	}
	if f, ok := ClientFilesOf(t.Flags); ok {
		files = append(files, f.CA, f.Cert, f.Key)
	}
	var out []string
	for _, file := range files {
		if file == "" {
			continue
		}
		srcs, _, err := podfile.Locate(t.Spec, t.Container, file)
		if err != nil {
			continue
		}
		for _, s := range srcs {
			if name := s.String(); !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// peerPort is the container's port named "peer" (0 when none): the pod's port a port-forward reaches the peer
// listener on, which the peer URL's port (a Service's) need not be.
func (t Template) peerPort() int {
	if t.Container == nil {
		return 0
	}
	for _, p := range t.Container.Ports {
		if p.Name == "peer" {
			return int(p.ContainerPort)
		}
	}
	return 0
}

// Checker checks restarts. Without Engine, or without ClientPort, only the peer side is checked.
type Checker struct {
	Files  *podfile.Memo
	Prober Prober
	Engine Engine
	// Probes, when set, keeps what the run's probes found, and answers from it (Memo says when).
	Probes *Memo
	// ClientPort is the members' client port, where the engine reaches them.
	ClientPort int
	Now        func() time.Time
}

// ErrUnreadable says the new material could not be read from the API (a volume no Secret or ConfigMap
// backs): the check cannot be made, and the caller says so rather than judging.
var ErrUnreadable = errors.New("the template's peer TLS material cannot be read from the API")

// Report is what one check found: the refusals (none: the restarts keep every member able to talk to its peers
// and its clients), and what it cost: Probes is how many members' ports it opened a TLS connection to (one
// handshake each, two for a peer probe whose new trust refuses the member's certificate).
type Report struct {
	Refusals []trust.Refusal
	Probes   int
	// Undecided names the members whose running peer trust gave no verdict on the new leaf (trust.Undecided):
	// their trust of it was not checked, only the chain they serve.
	Undecided []string
}

// Check judges restarting each pod of restart onto t's TLS material, peer side then client side, against every
// member of members as it runs now. A *SideError says a side's check could not be made; a side whose
// material cannot be read from the API (ErrUnreadable) does not keep the other side's refusals back.
func (c Checker) Check(ctx context.Context, t Template, restart []string, members []Member) (Report, error) {
	sides := []struct {
		side  trust.Side
		check func(context.Context, Template, []string, []Member, *Report) error
	}{{trust.Peer, c.checkPeer}, {trust.Client, c.checkClient}}
	var report Report
	var unread error
	for _, s := range sides {
		err := s.check(ctx, t, restart, members, &report)
		switch {
		case errors.Is(err, ErrUnreadable):
			unread = &SideError{Side: s.side, Err: err}
		case err != nil:
			return report, &SideError{Side: s.side, Err: err}
		}
	}
	return report, unread
}

// SideError says the check of one side could not be made (ErrUnreadable among others).
type SideError struct {
	Side trust.Side
	Err  error
}

func (e *SideError) Error() string { return e.Err.Error() }
func (e *SideError) Unwrap() error { return e.Err }

// checkPeer is the peer side: the new leaf presented to every other member's running peer trust, the new
// trust file against the leaf each one serves, the leaf on its own.
func (c Checker) checkPeer(ctx context.Context, t Template, restart []string, members []Member, report *Report) error {
	files, ok := FilesOf(t.Flags)
	if !ok {
		return nil
	}
	material, pair, err := c.read(ctx, t, files, "peer-")
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	for _, ca := range material.CAs {
		roots.AddCert(ca)
	}
	probes := map[string]member.PeerTrustProbe{}
	for _, m := range members {
		if !m.Reachable || (len(restart) == 1 && restart[0] == m.Pod) {
			continue // a member is judged against the others only: the one restarted alone is not probed
		}
		host, port, err := hostPort(m.PeerURL)
		if err != nil {
			continue
		}
		if named := t.peerPort(); named != 0 {
			port = named
		}
		if p, ok := c.Probes.peerProbe(material, m); ok {
			probes[m.Pod] = p
			continue
		}
		report.Probes++
		if p, err := c.Prober.ProbePeerTrust(ctx, m.Pod, port, pair, roots, host); err == nil {
			probes[m.Pod] = p
			c.Probes.keepPeerProbe(material, m, p)
		}
	}
	for _, m := range members {
		if p, ok := probes[m.Pod]; ok && p.Verdict == trust.Undecided {
			report.Undecided = append(report.Undecided, m.Pod)
		}
	}
	for _, pod := range restart {
		r := trust.Restart{Member: pod, New: material, Now: c.Now()}
		for _, m := range members {
			if m.Pod == pod {
				r.PeerHost, _, _ = hostPort(m.PeerURL)
				continue
			}
			o := trust.Other{Name: m.Pod, Verdict: trust.Unprobed}
			if p, ok := probes[m.Pod]; ok {
				o.Served, o.Verdict, o.Alert = p.Served, p.Verdict, p.Alert
			}
			r.Others = append(r.Others, o)
		}
		report.Refusals = append(report.Refusals, trust.Check(r)...)
	}
	return nil
}

// checkClient is the client side: the new trust file against the engine's client certificate and against the
// server certificate every other member serves on its client port now, and the new server certificate as
// the engine's connections will judge it.
func (c Checker) checkClient(ctx context.Context, t Template, restart []string, members []Member, report *Report) error {
	files, ok := ClientFilesOf(t.Flags)
	if !ok || c.Engine == nil || c.ClientPort == 0 {
		return nil
	}
	material, _, err := c.read(ctx, t, files, "")
	if err != nil {
		return err
	}
	engineChain, err := c.Engine.ClientChain(ctx)
	if err != nil {
		return fmt.Errorf("reading the engine's client certificate: %w", err)
	}
	served := map[string][]*x509.Certificate{}
	worthReading := material.SignsOwnLeaf() // else what the others serve says nothing (trust.CheckClient)
	for _, m := range members {
		if !worthReading || !m.Reachable || (len(restart) == 1 && restart[0] == m.Pod) {
			continue
		}
		if chain, ok := c.Probes.servedChain(material, m); ok {
			served[m.Pod] = chain
			continue
		}
		report.Probes++
		if chain, err := c.Engine.ServedChain(ctx, m.Pod, c.ClientPort); err == nil {
			served[m.Pod] = chain
			c.Probes.keepServedChain(material, m, chain)
		}
	}
	for _, pod := range restart {
		refusal, err := c.Engine.RefusesServerChain(ctx, pod, append([]*x509.Certificate{material.Leaf}, material.Chain...))
		if err != nil {
			return err
		}
		r := trust.ClientRestart{Member: pod, New: material, EngineChain: engineChain, EngineRefusal: refusal, Now: c.Now(),
			AsksClientCert: files.CA != "" || t.Flags["client-cert-auth"] == "true"}
		for _, m := range members {
			if m.Pod != pod {
				r.Others = append(r.Others, trust.Other{Name: m.Pod, Served: served[m.Pod]})
			}
		}
		report.Refusals = append(report.Refusals, trust.CheckClient(r)...)
	}
	return nil
}

// read reads and parses one side's new material (flag names the side's flags: "peer-" or ""), and its key
// pair, which a peer probe presents. A side without a trusted-CA file has no CAs.
func (c Checker) read(ctx context.Context, t Template, f Files, flag string) (trust.Material, tls.Certificate, error) {
	var got [3][]byte
	for i, file := range []string{f.CA, f.Cert, f.Key} {
		if file == "" {
			continue
		}
		b, _, err := c.Files.Read(ctx, t.Spec, t.Container, file)
		if errors.Is(err, podfile.ErrNotReadable) {
			return trust.Material{}, tls.Certificate{}, fmt.Errorf("%w: %v", ErrUnreadable, err)
		}
		if err != nil {
			return trust.Material{}, tls.Certificate{}, err
		}
		got[i] = b
	}
	m, err := trust.ParseLeaf(got[1])
	if err == nil && f.CA != "" {
		m, err = trust.ParseMaterial(got[0], got[1])
	}
	if err != nil {
		return trust.Material{}, tls.Certificate{}, fmt.Errorf("the template's --%strusted-ca-file %s and --%scert-file %s: %w", flag, f.CA, flag, f.Cert, err)
	}
	pair, err := tls.X509KeyPair(got[1], got[2])
	if err != nil {
		// The parse error never quotes the material, but name only the files to keep it that way.
		return trust.Material{}, tls.Certificate{}, fmt.Errorf("the template's --%scert-file %s and --%skey-file %s do not form a key pair", flag, f.Cert, flag, f.Key)
	}
	return m, pair, nil
}

// hostPort is a peer URL's host and port (2380 when it names none).
func hostPort(peerURL string) (string, int, error) {
	u, err := url.Parse(peerURL)
	if err != nil || u.Host == "" {
		return "", 0, fmt.Errorf("peer URL %q has no host", peerURL)
	}
	host, portText, err := net.SplitHostPort(u.Host)
	if err != nil {
		return strings.Trim(u.Host, "[]"), 2380, nil
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return "", 0, fmt.Errorf("peer URL %q has no port number", peerURL)
	}
	return host, port, nil
}
