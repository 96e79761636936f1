package tablesync

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/fenec/fenec-entry/gossip/internal/validate"
)

// Authentication of the snapshot and repair endpoints (see Sync for the whole scheme).
//
// Every request proves knowledge of the gossip key without sending it: the client asks for a
// nonce (GET /_gossip/challenge?node=<its name>), then sends
//
//	Fenec-Proof: <node> <nonce> <base64url(HMAC-SHA256(authKey, "fenec-snapshot <node> <nonce> <METHOD> <path>"))>
//
// and the server answers, on success only,
//
//	Fenec-Proof-Reply: <server node> <base64url(HMAC-SHA256(authKey, "fenec-snapshot-reply <nonce> <node> <METHOD> <path> <server node>"))>
//
// authKey is HMAC-SHA256(gossip key, "fenec-entry snapshot auth v1"): the raw gossip key
// (memberlist's AES key) is never used for anything else. The client uses its keyring's
// primary key; the server accepts a proof under any installed key and answers, proves and
// seals with that same key, so a rotation in progress (some entries already sending with the
// new key, every entry holding both) loses no exchange, and an entry holding only a removed
// key gets nothing. The body of every answer is then
// sealed with the same key (see stream.go), so a peer without the key can feed nothing.
// The proof covers the method and path, not a request body: the one body (a pull's bucket
// bitmap) only chooses what the peer sends back. Without a key (insecure gossip) the header
// is just "Fenec-Proof: <node>", checked against the membership and the source address.
const (
	proofHeader      = "Fenec-Proof"
	proofReplyHeader = "Fenec-Proof-Reply"

	authKeyLabel   = "fenec-entry snapshot auth v1"
	nonceTTL       = 30 * time.Second
	maxNonces      = 1024 // outstanding challenges; at the bound a challenge is refused (503) and counted
	nonceBytes     = 16
	maxProofHeader = 512
)

// deriveAuthKey returns the key all snapshot proofs and seals use. A nil gossip key
// (insecure gossip) gives a fixed, public key: seals are then checksums, not proofs.
func deriveAuthKey(gossipKey []byte) []byte {
	m := hmac.New(sha256.New, gossipKey)
	m.Write([]byte(authKeyLabel))
	return m.Sum(nil)
}

func macString(key []byte, parts ...string) string {
	m := hmac.New(sha256.New, key)
	for i, p := range parts {
		if i > 0 {
			m.Write([]byte{' '})
		}
		m.Write([]byte(p))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// requestProof is the mac of a client's Fenec-Proof header.
func requestProof(authKey []byte, node, nonce, method, path string) string {
	return macString(authKey, "fenec-snapshot", node, nonce, method, path)
}

// replyProof is the mac of a server's Fenec-Proof-Reply header.
func replyProof(authKey []byte, nonce, node, method, path, server string) string {
	return macString(authKey, "fenec-snapshot-reply", nonce, node, method, path, server)
}

func macEqual(a, b string) bool { return hmac.Equal([]byte(a), []byte(b)) }

// nonces are the outstanding challenges: each single use, bound to the node that asked,
// valid for nonceTTL, at most maxNonces at once. Safe for concurrent use.
type nonces struct {
	now func() time.Time

	mu sync.Mutex            // guards m
	m  map[string]nonceEntry // nonce -> who asked and until when
}

type nonceEntry struct {
	node    string
	expires time.Time
}

func newNonces(now func() time.Time) *nonces {
	return &nonces{now: now, m: make(map[string]nonceEntry)}
}

// issue returns a fresh nonce for node, or false if maxNonces unexpired ones are outstanding.
func (n *nonces) issue(node string) (string, bool) {
	var b [nonceBytes]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	nonce := base64.RawURLEncoding.EncodeToString(b[:])
	now := n.now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.m) >= maxNonces {
		for k, e := range n.m { // at most maxNonces entries, only when full
			if !now.Before(e.expires) {
				delete(n.m, k)
			}
		}
		if len(n.m) >= maxNonces {
			return "", false
		}
	}
	n.m[nonce] = nonceEntry{node: node, expires: now.Add(nonceTTL)}
	return nonce, true
}

// take consumes nonce: true if it was outstanding, unexpired and issued to node. A nonce is
// gone after its first take, whether the proof that carried it is right or not.
func (n *nonces) take(nonce, node string) bool {
	now := n.now()
	n.mu.Lock()
	e, ok := n.m[nonce]
	delete(n.m, nonce)
	n.mu.Unlock()
	return ok && e.node == node && now.Before(e.expires)
}

// authError is why a request was refused: the status, the JSON error code, the metric label.
type authError struct {
	status int
	code   string
	msg    string
}

var (
	errNoProof    = &authError{http.StatusUnauthorized, "no_proof", "a Fenec-Proof header is required"}
	errBadNonce   = &authError{http.StatusUnauthorized, "bad_nonce", "unknown, expired, reused or someone else's nonce"}
	errBadProof   = &authError{http.StatusUnauthorized, "bad_proof", "the proof does not match"}
	errNotMember  = &authError{http.StatusForbidden, "not_member", "not a current alive member"}
	errWrongSrc   = &authError{http.StatusForbidden, "wrong_source", "the request does not come from the member's address"}
	errNoncesFull = &authError{http.StatusServiceUnavailable, "busy", "too many outstanding challenges"}
)

// member checks that node is an alive member whose address is the request's source.
func (s *Sync) member(r *http.Request, node string) *authError {
	if node == "" || len(node) > validate.MaxNodeName {
		return errNotMember
	}
	addr, ok := s.cfg.MemberAddr(node)
	if !ok {
		return errNotMember
	}
	src, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || src.Addr().Unmap() != addr.Unmap() {
		return errWrongSrc
	}
	return nil
}

// caller is an authenticated request: who sent it, its nonce, and the auth key that proved
// it, which the answer is proven and sealed with.
type caller struct {
	node, nonce string
	authKey     []byte
}

// authenticate checks a request's Fenec-Proof and returns who sent it. Without a key only the
// node's membership and address are checked: the header is then "Fenec-Proof: <node>"
// (anything after the node is ignored).
func (s *Sync) authenticate(r *http.Request) (caller, *authError) {
	h := r.Header.Get(proofHeader)
	if h == "" || len(h) > maxProofHeader {
		return caller{}, errNoProof
	}
	f := strings.Fields(h)
	if len(f) == 0 {
		return caller{}, errNoProof
	}
	if !s.keys.Secure() {
		return caller{node: f[0], authKey: deriveAuthKey(nil)}, s.member(r, f[0])
	}
	if len(f) != 3 {
		return caller{}, errNoProof
	}
	node, nonce, mac := f[0], f[1], f[2]
	if !s.nonces.take(nonce, node) {
		return caller{}, errBadNonce
	}
	var authKey []byte
	for _, k := range s.keys.All() {
		if ak := deriveAuthKey(k); macEqual(mac, requestProof(ak, node, nonce, r.Method, r.URL.Path)) {
			authKey = ak
			break
		}
	}
	if authKey == nil {
		return caller{}, errBadProof
	}
	if aerr := s.member(r, node); aerr != nil {
		return caller{}, aerr
	}
	return caller{node: node, nonce: nonce, authKey: authKey}, nil
}

// signReply sets Fenec-Proof-Reply on a successful answer (secure mode only).
func (s *Sync) signReply(w http.ResponseWriter, r *http.Request, who caller) {
	if !s.keys.Secure() {
		return
	}
	w.Header().Set(proofReplyHeader, s.cfg.Node+" "+replyProof(who.authKey, who.nonce, who.node, r.Method, r.URL.Path, s.cfg.Node))
}

// checkReply verifies a server's Fenec-Proof-Reply under the exchange's authKey (secure mode
// only).
func (s *Sync) checkReply(resp *http.Response, peer Peer, nonce, method, path string, authKey []byte) error {
	if !s.keys.Secure() {
		return nil
	}
	f := strings.Fields(resp.Header.Get(proofReplyHeader))
	if len(f) != 2 || (peer.Name != "" && f[0] != peer.Name) ||
		!macEqual(f[1], replyProof(authKey, nonce, s.cfg.Node, method, path, f[0])) {
		return ErrBadReply
	}
	return nil
}
