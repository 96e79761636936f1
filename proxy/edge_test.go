package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/testutil"
)

// entryFor builds an entry whose only region "eu" has the given routers.
func entryFor(t *testing.T, routers ...string) (*httptest.Server, *Handler) {
	t.Helper()
	return entryWith(t, nil, routers...)
}

// entryWith is entryFor with edit applied to the Config (if non-nil).
func entryWith(t *testing.T, edit func(*Config), routers ...string) (*httptest.Server, *Handler) {
	t.Helper()
	table, err := homes.New(homes.Config{Regions: []string{"eu"}, Origin: "test"})
	if err != nil {
		t.Fatal(err)
	}
	reg := Region{Name: "eu"}
	for _, r := range routers {
		u, _ := url.Parse(r)
		reg.Routers = append(reg.Routers, u)
	}
	cfg := Config{Regions: []Region{reg}, Homes: table, AnswerTimeout: 2 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	srv.Client().Timeout = testRequestTimeout
	t.Cleanup(func() { srv.Close(); h.Close() })
	return srv, h
}

// waitIdle waits until the first router's connection is back in its pool
// (the client can have the answer a moment before the entry pools it).
func waitIdle(t *testing.T, h *Handler) {
	testutil.Eventually(t, 2*time.Second, "connection back in the pool", func() bool {
		return h.rt.Load().byID[0].routers[0].idleCount() == 1
	})
}

// Row: a proxy's 521, 523, 525, 526, 530 means the connection to the router
// was never made: the next router, whatever the request. Other unmarked 5xx
// may have reached it.
func TestRowProxyStatuses(t *testing.T) {
	for _, status := range []int{520, 521, 522, 523, 524, 525, 526, 530, 502} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var second atomic.Int32
			lb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(status) // no Fenec-Shard: a proxy in front of the router
			}))
			defer lb.Close()
			router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				second.Add(1)
				w.Header().Set("Fenec-Shard", "1")
				w.WriteHeader(201)
			}))
			defer router.Close()
			srv, _ := entryFor(t, lb.URL, router.URL)
			resp, err := srv.Client().Post(srv.URL+"/t/acme/items", "text/plain", strings.NewReader("x"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			neverMade := status == 521 || status == 523 || status == 525 || status == 526 || status == 530
			if neverMade && (resp.StatusCode != 201 || second.Load() != 1) {
				t.Errorf("%d: got %d, second router saw %d; want the write sent on", status, resp.StatusCode, second.Load())
			}
			if !neverMade && (resp.StatusCode != 502 || second.Load() != 0) {
				t.Errorf("%d: got %d, second router saw %d; want 502 may_have_run, not re-sent", status, resp.StatusCode, second.Load())
			}
		})
	}
}

// staleRouter answers the first request on each connection and then closes
// the connection without a word when the second request arrives, the way a
// router drops a keep-alive connection it had already given up on.
func staleRouter(t *testing.T) (addr string, requests *atomic.Int32) {
	t.Helper()
	requests = new(atomic.Int32)
	addr = testutil.ServeTCP(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for i := 0; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if i == 1 {
				return // the stale case: read, then closed without answer
			}
			requests.Add(1)
			req.Body.Close()
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nFenec-Shard: 1\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	return "http://" + addr, requests
}

// A retryable request that meets a stale keep-alive connection is repeated
// once to the same router on a fresh connection; a plain write is not.
func TestStaleKeepAlive(t *testing.T) {
	t.Run("GET repeated on a fresh connection", func(t *testing.T) {
		addr, n := staleRouter(t)
		srv, h := entryFor(t, addr)
		for i := 0; i < 2; i++ {
			if i == 1 {
				waitIdle(t, h)
			}
			resp, err := srv.Client().Get(srv.URL + "/t/acme/x")
			if err != nil {
				t.Fatal(err)
			}
			// Read to the end: a client that closes early makes the entry drop
			// the router connection instead of pooling it.
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("request %d: %d", i, resp.StatusCode)
			}
		}
		if n.Load() != 2 {
			t.Errorf("router answered %d, want 2", n.Load())
		}
	})
	t.Run("POST without key is may_have_run", func(t *testing.T) {
		addr, _ := staleRouter(t)
		srv, h := entryFor(t, addr)
		resp, err := srv.Client().Post(srv.URL+"/t/acme/x", "text/plain", strings.NewReader("a"))
		if err != nil {
			t.Fatalf("first POST: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		waitIdle(t, h)
		resp, err = srv.Client().Post(srv.URL+"/t/acme/x", "text/plain", strings.NewReader("b"))
		if err != nil {
			t.Fatalf("second POST: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 502 {
			t.Errorf("second POST on the stale connection: %d, want 502 may_have_run", resp.StatusCode)
		}
	})
}

// A router that closes an idle keep-alive connection (FIN) before the next
// request: the entry notices before it writes (the peek before reuse), so a
// plain write goes on a fresh connection instead of failing as may_have_run.
func TestClosedIdleConnectionNotUsedForWrites(t *testing.T) {
	closed := make(chan struct{}, 8)
	addr := testutil.ServeTCP(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err == nil {
			req.Body.Close()
			fmt.Fprintf(c, "HTTP/1.1 201 Created\r\nFenec-Shard: 1\r\nContent-Length: 0\r\n\r\n")
		}
		c.Close() // answered as keep-alive, then dropped
		closed <- struct{}{}
	})
	srv, h := entryFor(t, "http://"+addr)
	for i := 0; i < 2; i++ {
		if i == 1 {
			waitIdle(t, h)
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				t.Fatal("the router did not close its connection after answering")
			}
			rt := h.rt.Load().byID[0].routers[0]
			testutil.Eventually(t, 2*time.Second, "the router's FIN reaches the pooled connection", func() bool {
				rt.mu.Lock()
				defer rt.mu.Unlock()
				return len(rt.idle) == 1 && !rt.idle[0].alive()
			})
		}
		resp, err := srv.Client().Post(srv.URL+"/t/acme/items", "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("write %d: %d, want 201 on a fresh connection", i, resp.StatusCode)
		}
	}
}

// The idle pool of a router is bounded: a connection returned beyond
// MaxIdlePerRouter is closed and counted.
func TestIdlePoolBound(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:1")
	m := NewMetrics(nil)
	rt := newRouter(&regionState{name: "eu"}, "k", u, "", &Config{MaxIdlePerRouter: 2, IdleTimeout: time.Minute}, m.IdleConnsDropped)
	for i := 0; i < 3; i++ {
		a, b := net.Pipe()
		defer b.Close()
		rt.put(newConn(a, rt))
	}
	if n := rt.idleCount(); n != 2 {
		t.Errorf("idle = %d, want 2", n)
	}
	if got := promtest.ToFloat64(m.IdleConnsDropped); got != 1 {
		t.Errorf("dropped = %v, want 1", got)
	}
}

func TestEntryReady(t *testing.T) {
	table, _ := homes.New(homes.Config{Regions: []string{"eu"}, Origin: "test"})
	u, _ := url.Parse("http://127.0.0.1:1")
	var ready atomic.Bool
	h, err := New(Config{Regions: []Region{{Name: "eu", Routers: []*url.URL{u}}}, Homes: table, Ready: ready.Load})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{503, 200} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/_entry/ready", nil))
		if w.Code != want {
			t.Errorf("ready=%v: /_entry/ready = %d, want %d", ready.Load(), w.Code, want)
		}
		ready.Store(true)
	}
}
