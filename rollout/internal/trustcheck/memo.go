package trustcheck

import (
	"crypto/sha256"
	"crypto/x509"
	"fmt"
	"sync"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/trust"
)

// Memo keeps what a run's probes found, for its later checks: a running member answers a probe of the same
// new material the same way for as long as the same process runs, since etcd loads its trust only when its
// process starts. A process is named by its pod and the kubelet's count of container restarts there: a
// container restarted in the same pod may have loaded other trust material (a Secret the kubelet delivered
// since), so its answers are not the last process's. What the member serves can still change under it while the kubelet delivers a
// Secret changed before (up to a minute), but only towards the material being judged, which its own check
// already covers. So a run probes a member once per pod and material instead of before every leader move and
// restart: each probe is a connection through the API server (make bench mtls: 8.7 probes per member rolled,
// about one API request each). A check made for a revert takes no Memo: it looks afresh.
type Memo struct {
	mu sync.Mutex
	// material is what the entries were probed with, per side; a new material empties that side.
	material map[trust.Side][32]byte
	peer     map[string]member.PeerTrustProbe
	served   map[string][]*x509.Certificate
}

// NewMemo is an empty Memo, for one run.
func NewMemo() *Memo {
	return &Memo{material: map[trust.Side][32]byte{}, peer: map[string]member.PeerTrustProbe{}, served: map[string][]*x509.Certificate{}}
}

// fingerprint names a material: its trust file's CAs and its certificate chain.
func fingerprint(m trust.Material) [32]byte {
	h := sha256.New()
	for _, c := range append(append([]*x509.Certificate{m.Leaf}, m.Chain...), m.CAs...) {
		if c != nil {
			h.Write(c.Raw)
		}
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// key is a member's process: the pod it runs in now, and how many times its container restarted there.
func (m Member) key() string { return fmt.Sprintf("%s/%s/%d", m.Pod, m.UID, m.Restarts) }

// use makes side's entries those of material, forgetting what other material found.
func (memo *Memo) use(side trust.Side, material trust.Material) {
	fp := fingerprint(material)
	if memo.material[side] == fp {
		return
	}
	memo.material[side] = fp
	if side == trust.Peer {
		memo.peer = map[string]member.PeerTrustProbe{}
	} else {
		memo.served = map[string][]*x509.Certificate{}
	}
}

// peerProbe is what a probe of m's peer port found with material, if a probe of this run did.
func (memo *Memo) peerProbe(material trust.Material, m Member) (member.PeerTrustProbe, bool) {
	if memo == nil || m.UID == "" {
		return member.PeerTrustProbe{}, false
	}
	memo.mu.Lock()
	defer memo.mu.Unlock()
	memo.use(trust.Peer, material)
	p, ok := memo.peer[m.key()]
	return p, ok
}

func (memo *Memo) keepPeerProbe(material trust.Material, m Member, p member.PeerTrustProbe) {
	if memo == nil || m.UID == "" {
		return
	}
	memo.mu.Lock()
	defer memo.mu.Unlock()
	memo.use(trust.Peer, material)
	memo.peer[m.key()] = p
}

// servedChain is the chain m's client port served, if a read of this run, with material judged, saw it.
func (memo *Memo) servedChain(material trust.Material, m Member) ([]*x509.Certificate, bool) {
	if memo == nil || m.UID == "" {
		return nil, false
	}
	memo.mu.Lock()
	defer memo.mu.Unlock()
	memo.use(trust.Client, material)
	c, ok := memo.served[m.key()]
	return c, ok
}

func (memo *Memo) keepServedChain(material trust.Material, m Member, chain []*x509.Certificate) {
	if memo == nil || m.UID == "" {
		return
	}
	memo.mu.Lock()
	defer memo.mu.Unlock()
	memo.use(trust.Client, material)
	memo.served[m.key()] = chain
}
