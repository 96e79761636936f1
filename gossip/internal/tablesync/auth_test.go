package tablesync

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/homes/record"
	"github.com/fenec/fenec-entry/internal/testutil"
)

// authClient makes the requests of these tests: a server that stops answering fails them.
var authClient = &http.Client{Timeout: 10 * time.Second}

// get makes a request to n with the given Fenec-Proof (none if empty).
func get(t *testing.T, n *syncNode, path, proof string) (*http.Response, StatusError) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, n.srv.URL+path, nil)
	if proof != "" {
		req.Header.Set(proofHeader, proof)
	}
	resp, err := authClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e StatusError
	if resp.StatusCode != http.StatusOK {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("refusal Content-Type %q", ct)
		}
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Errorf("refusal body: %v", err)
		}
	}
	io.Copy(io.Discard, resp.Body)
	return resp, e
}

func nonceFor(t *testing.T, n *syncNode, node string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, n.srv.URL+pathChallenge+"?node="+node, nil)
	resp, err := authClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c challengeBody
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 {
		t.Fatalf("challenge: %d %v", resp.StatusCode, err)
	}
	return c.Nonce
}

func proofFor(key []byte, node, nonce, path string) string {
	return node + " " + nonce + " " + requestProof(deriveAuthKey(key), node, nonce, http.MethodGet, path)
}

func TestSnapshotAuthRefusals(t *testing.T) {
	ms := newMembers("a", "b", "c")
	clock := testutil.NewClock(time.Now())
	a := newSyncNode(t, "a", ms, withNow(clock.Now))
	fill(a.table, 0, 10, ver(-time.Minute, 0, "a"))

	rows := []struct {
		name   string
		proof  func() string
		status int
		code   string
	}{
		{"good", func() string { return proofFor(testKey, "b", nonceFor(t, a, "b"), pathSnapshot) }, 200, ""},
		{"no proof", func() string { return "" }, 401, "no_proof"},
		{"node only", func() string { return "b" }, 401, "no_proof"},
		{"wrong key", func() string {
			return proofFor([]byte("another key, same length, 32 B.."), "b", nonceFor(t, a, "b"), pathSnapshot)
		}, 401, "bad_proof"},
		{"raw key as mac", func() string { return "b " + nonceFor(t, a, "b") + " " + string(testKey) }, 401, "bad_proof"},
		{"proof for another path", func() string { return proofFor(testKey, "b", nonceFor(t, a, "b"), pathDigest) }, 401, "bad_proof"},
		{"made-up nonce", func() string { return proofFor(testKey, "b", "AAAAAAAAAAAAAAAAAAAAAA", pathSnapshot) }, 401, "bad_nonce"},
		{"someone else's nonce", func() string { return proofFor(testKey, "b", nonceFor(t, a, "c"), pathSnapshot) }, 401, "bad_nonce"},
		{"expired nonce", func() string {
			n := nonceFor(t, a, "b")
			clock.Advance(nonceTTL + time.Second)
			return proofFor(testKey, "b", n, pathSnapshot)
		}, 401, "bad_nonce"},
		{"not a member", func() string { return proofFor(testKey, "x", "n", pathSnapshot) }, 401, "bad_nonce"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			resp, e := get(t, a, pathSnapshot, row.proof())
			if resp.StatusCode != row.status || e.Code != row.code {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, e.Code, row.status, row.code)
			}
			if row.status != 200 && resp.Header.Get(proofReplyHeader) != "" {
				t.Error("a refusal carries a reply proof")
			}
		})
	}

	t.Run("replayed nonce", func(t *testing.T) {
		p := proofFor(testKey, "b", nonceFor(t, a, "b"), pathSnapshot)
		if resp, _ := get(t, a, pathSnapshot, p); resp.StatusCode != 200 {
			t.Fatalf("first use: %d", resp.StatusCode)
		}
		if resp, e := get(t, a, pathSnapshot, p); resp.StatusCode != 401 || e.Code != "bad_nonce" {
			t.Errorf("replay: %d %q, want 401 bad_nonce", resp.StatusCode, e.Code)
		}
	})
	t.Run("challenge for a non-member", func(t *testing.T) {
		if resp, e := get(t, a, pathChallenge+"?node=x", ""); resp.StatusCode != 403 || e.Code != "not_member" {
			t.Errorf("got %d %q", resp.StatusCode, e.Code)
		}
	})
	t.Run("member at another address", func(t *testing.T) {
		ms.set("c", netip.MustParseAddr("10.0.0.9"))
		defer ms.set("c", loopback)
		if resp, e := get(t, a, pathChallenge+"?node=c", ""); resp.StatusCode != 403 || e.Code != "wrong_source" {
			t.Errorf("challenge: %d %q", resp.StatusCode, e.Code)
		}
		n := nonceFor(t, a, "b")
		// a proof for b, but b left the membership between challenge and request
		ms.mu.Lock()
		delete(ms.m, "b")
		ms.mu.Unlock()
		defer ms.set("b", loopback)
		if resp, e := get(t, a, pathSnapshot, proofFor(testKey, "b", n, pathSnapshot)); resp.StatusCode != 403 || e.Code != "not_member" {
			t.Errorf("snapshot: %d %q", resp.StatusCode, e.Code)
		}
	})
	if got := a.served("snapshot", "bad_nonce"); got < 4 {
		t.Errorf("bad_nonce counted %d times", got)
	}

	t.Run("client with the wrong key", func(t *testing.T) {
		b := newSyncNode(t, "b", ms, withKey([]byte("another key, same length, 32 B..")))
		_, _, err := b.sync.Fetch(context.Background(), a.peer())
		var se *StatusError
		if !errors.As(err, &se) || se.Status != 401 || se.Code != "bad_proof" {
			t.Errorf("Fetch: %v, want 401 bad_proof", err)
		}
	})
}

// A peer that does not hold the key (or a server that is not the peer named) cannot feed us
// homes: the client refuses its answer before reading it.
func TestSnapshotClientRefusesUnprovenReply(t *testing.T) {
	ms := newMembers("a", "b")
	a := newSyncNode(t, "a", ms)
	fill(a.table, 0, 10, ver(-time.Minute, 0, "a"))
	b := newSyncNode(t, "b", ms)

	rows := []struct {
		name  string
		reply func(h http.Header)
	}{
		{"no reply proof", func(h http.Header) { h.Del(proofReplyHeader) }},
		{"garbage", func(h http.Header) { h.Set(proofReplyHeader, "a xyz") }},
		{"another server's name", func(h http.Header) {
			h.Set(proofReplyHeader, "z "+strings.Fields(h.Get(proofReplyHeader))[1])
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			a.wrap(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
				rec := httptest.NewRecorder()
				next.ServeHTTP(rec, r)
				for k, v := range rec.Header() {
					w.Header()[k] = v
				}
				if r.URL.Path == pathSnapshot {
					row.reply(w.Header())
				}
				w.WriteHeader(rec.Code)
				w.Write(rec.Body.Bytes())
			})
			_, _, err := b.sync.Fetch(context.Background(), a.peer())
			if !errors.Is(err, ErrBadReply) || b.table.Len() != 0 {
				t.Errorf("Fetch: %v with %d homes, want ErrBadReply and none", err, b.table.Len())
			}
		})
	}

	// An impostor without the key that replays a real reply header still cannot seal a body.
	t.Run("impostor stream", func(t *testing.T) {
		a.wrap(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if r.URL.Path != pathSnapshot {
				next.ServeHTTP(w, r)
				return
			}
			real := httptest.NewRecorder()
			next.ServeHTTP(real, r) // the real a proves the key; the impostor sends its own body
			w.Header().Set(proofReplyHeader, real.Header().Get(proofReplyHeader))
			w.WriteHeader(200)
			nonce := strings.Fields(r.Header.Get(proofHeader))[1]
			sw := record.NewWriter(w, record.NewMAC(deriveAuthKey([]byte("not the key")), nonce, pathSnapshot), record.Version, nil)
			sw.Header("a", 1, 0)
			sw.Home(homes.Home{Tenant: "evil", Region: "eu", Version: ver(0, 0, "a")})
			sw.Trailer()
		})
		_, _, err := b.sync.Fetch(context.Background(), a.peer())
		if !errors.Is(err, ErrBadSeal) {
			t.Errorf("Fetch: %v, want ErrBadSeal", err)
		}
		if _, _, ok := b.table.Get("evil"); ok {
			t.Error("the impostor's home was applied")
		}
	})
}

func TestSnapshotInsecure(t *testing.T) {
	ms := newMembers("a", "b")
	a := newSyncNode(t, "a", ms, withKey(nil))
	fill(a.table, 0, 100, ver(-time.Minute, 0, "a"))
	b := newSyncNode(t, "b", ms, withKey(nil))
	if applied, _, err := b.sync.Fetch(context.Background(), a.peer()); err != nil || applied != 100 {
		t.Fatalf("Fetch: %d, %v", applied, err)
	}
	if resp, e := get(t, a, pathSnapshot, ""); resp.StatusCode != 401 || e.Code != "no_proof" {
		t.Errorf("no header: %d %q", resp.StatusCode, e.Code)
	}
	if resp, e := get(t, a, pathSnapshot, "x"); resp.StatusCode != 403 || e.Code != "not_member" {
		t.Errorf("non-member: %d %q", resp.StatusCode, e.Code)
	}
	ms.set("b", netip.MustParseAddr("10.0.0.2"))
	if _, _, err := b.sync.Fetch(context.Background(), a.peer()); err == nil {
		t.Error("Fetch from a member's name at another address succeeded")
	}
}

func TestSnapshotNonceBound(t *testing.T) {
	ms := newMembers("a", "b")
	clock := testutil.NewClock(time.Now())
	a := newSyncNode(t, "a", ms, withNow(clock.Now))
	for range maxNonces {
		if _, ok := a.sync.nonces.issue("b"); !ok {
			t.Fatal("refused below the bound")
		}
	}
	if resp, e := get(t, a, pathChallenge+"?node=b", ""); resp.StatusCode != 503 || e.Code != "busy" {
		t.Errorf("at the bound: %d %q, want 503 busy", resp.StatusCode, e.Code)
	}
	if n := promtest.ToFloat64(a.sync.m.noncesFull); n != 1 {
		t.Errorf("nonces_full = %v", n)
	}
	clock.Advance(nonceTTL)
	nonceFor(t, a, "b") // expired ones are swept
}
