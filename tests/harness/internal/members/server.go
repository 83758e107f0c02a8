package members

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// routes is the control API (see memberapi.Client). It listens on 127.0.0.1 only.
func (d *Daemon) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /v1/members", func(w http.ResponseWriter, _ *http.Request) {
		d.mu.Lock()
		ms := make([]*member, 0, len(d.members))
		for _, m := range d.members {
			ms = append(ms, m)
		}
		d.mu.Unlock()
		list := make([]memberapi.Member, 0, len(ms))
		for _, m := range ms {
			list = append(list, m.info())
		}
		sort.Slice(list, func(i, j int) bool {
			return list[i].Namespace+"/"+list[i].Pod < list[j].Namespace+"/"+list[j].Pod
		})
		writeJSON(w, list)
	})
	mux.HandleFunc("GET /v1/members/{ns}/{pod}", d.withMember(func(w http.ResponseWriter, _ *http.Request, m *member) {
		writeJSON(w, m.info())
	}))
	mux.HandleFunc("POST /v1/members/{ns}/{pod}/signal", d.withMember(func(w http.ResponseWriter, r *http.Request, m *member) {
		var req memberapi.SignalRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := m.signal(req.Signal); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		writeJSON(w, m.info())
	}))
	mux.HandleFunc("POST /v1/members/{ns}/{pod}/hang-on-term", d.withMember(func(w http.ResponseWriter, r *http.Request, m *member) {
		var req memberapi.HangOnTermRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
			return
		}
		m.setHangOnTerm(req.Enabled)
		writeJSON(w, m.info())
	}))
	mux.HandleFunc("GET /v1/members/{ns}/{pod}/metrics", d.withMember(func(w http.ResponseWriter, r *http.Request, m *member) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", m.ports.Metrics))
		if err != nil {
			http.Error(w, "reading member metrics: "+err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		_, _ = io.Copy(w, resp.Body)
	}))
	mux.HandleFunc("GET /v1/members/{ns}/{pod}/status", d.withMember(func(w http.ResponseWriter, r *http.Request, m *member) {
		st, err := memberStatus(r.Context(), m.info())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		writeJSON(w, st)
	}))
	return mux
}

func (d *Daemon) withMember(h func(http.ResponseWriter, *http.Request, *member)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		m, _ := d.member(r.Context(), r.PathValue("ns"), r.PathValue("pod"), false)
		if m == nil {
			http.Error(w, fmt.Sprintf("no member for pod %s/%s", r.PathValue("ns"), r.PathValue("pod")), http.StatusNotFound)
			return
		}
		h(w, r, m)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// memberStatus asks the member itself (Status RPC on its client URL, with the client certificate in TLS mode).
func memberStatus(ctx context.Context, mi memberapi.Member) (memberapi.Status, error) {
	cfg := clientv3.Config{Endpoints: []string{mi.ClientURL}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
	if mi.TLS {
		tc, err := ClientTLS(mi.TLSDir)
		if err != nil {
			return memberapi.Status{}, err
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return memberapi.Status{}, fmt.Errorf("dialing member %s/%s: %w", mi.Namespace, mi.Pod, err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	s, err := cli.Status(ctx, mi.ClientURL)
	if err != nil {
		return memberapi.Status{}, fmt.Errorf("status of member %s/%s: %w", mi.Namespace, mi.Pod, err)
	}
	return memberapi.Status{MemberID: s.Header.MemberId, Leader: s.Leader, RaftTerm: s.RaftTerm,
		RaftIndex: s.RaftIndex, AppliedIndex: s.RaftAppliedIndex, IsLearner: s.IsLearner, Version: s.Version}, nil
}

// ClientTLS is the client side of a member's mTLS, from the files the daemon wrote into its TLS dir (also
// trusting the foreign CA of a negative test, when there is one).
func ClientTLS(dir string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, memberapi.SecretClientCert), filepath.Join(dir, memberapi.SecretClientKey))
	if err != nil {
		return nil, fmt.Errorf("loading client certificate from %s: %w", dir, err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, memberapi.SecretCA))
	if err != nil {
		return nil, fmt.Errorf("reading CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in %s", filepath.Join(dir, memberapi.SecretCA))
	}
	// A server certificate from a foreign CA (a negative test of the engine) must not blind the daemon.
	if foreign, err := os.ReadFile(filepath.Join(dir, memberapi.SecretForeignCA)); err == nil {
		pool.AppendCertsFromPEM(foreign)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
