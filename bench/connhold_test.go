//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testDeadline bounds every test's wait: a test that does not finish within it fails,
// naming what it waited for.
const testDeadline = 15 * time.Second

// within runs f and fails the test if it does not return within testDeadline.
func within[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(testDeadline):
		t.Fatalf("%s did not finish within %v", what, testDeadline)
		panic("unreachable")
	}
}

// stopAfter is a stop channel closed once its count reaches n.
type stopAfter struct {
	n    int64
	seen atomic.Int64
	once sync.Once
	ch   chan struct{}
}

func newStopAfter(n int64) *stopAfter { return &stopAfter{n: n, ch: make(chan struct{})} }

func (s *stopAfter) hit() {
	if s.seen.Add(1) >= s.n {
		s.once.Do(func() { close(s.ch) })
	}
}

func loadOpts(addr string) holdOpts {
	return holdOpts{addr: addr, host: addr, path: "/t/acme/items/1", n: 4, timeout: 5 * time.Second,
		sources: 1, load: true, body: 32}
}

func lost(r *loadResult) (n int64) {
	for _, v := range r.LostBy {
		n += v
	}
	return n
}

func answered(r *loadResult) (n int64) {
	for _, v := range r.AnsweredBy {
		n += v
	}
	return n
}

// A server that answers every request: every request made is answered, none lost, and the
// server saw exactly the requests counted (each client finishes the one it is making).
func TestLoadCountsEveryAnswer(t *testing.T) {
	for _, close := range []bool{false, true} {
		t.Run(fmt.Sprintf("close=%v", close), func(t *testing.T) {
			stop := newStopAfter(200)
			var conns atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				stop.hit()
				io.WriteString(w, "ok")
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			o := loadOpts(srv.Listener.Addr().String())
			o.close = close
			r := within(t, "the load", func() *loadResult { return runLoad(o, stop.ch) })
			if lost(r) != 0 || r.Requests != answered(r) || r.AnsweredBy["200"] != r.Requests {
				t.Fatalf("want every request answered 200, got %+v", r)
			}
			if r.Requests != stop.seen.Load() {
				t.Fatalf("counted %d requests, the server saw %d", r.Requests, stop.seen.Load())
			}
			if close && r.Connections != r.Requests {
				t.Fatalf("-close: want a connection a request, got %d connections for %d requests", r.Connections, r.Requests)
			}
			if !close && r.Connections != int64(o.n) {
				t.Fatalf("keep-alive: want %d connections, got %d", o.n, r.Connections)
			}
		})
	}
}

// rawServer accepts connections and hands each to serve, until the test ends.
func rawServer(t *testing.T, serve func(c *net.TCPConn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); serve(c.(*net.TCPConn)) }()
		}
	}()
	return ln.Addr().String()
}

// readHead reads one request head from br.
func readHead(br *bufio.Reader) error {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		if line == "\r\n" {
			return nil
		}
	}
}

// Every way a written request can go unanswered is counted as lost, by its kind.
func TestLoadCountsLostByKind(t *testing.T) {
	cases := []struct {
		kind  string
		serve func(c *net.TCPConn, done <-chan struct{})
	}{
		{"eof", func(c *net.TCPConn, _ <-chan struct{}) {
			readHead(bufio.NewReader(c))
			c.Close()
		}},
		{"reset", func(c *net.TCPConn, _ <-chan struct{}) {
			readHead(bufio.NewReader(c))
			c.SetLinger(0) // close sends RST
			c.Close()
		}},
		{"partial", func(c *net.TCPConn, _ <-chan struct{}) {
			readHead(bufio.NewReader(c))
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
			c.Close()
		}},
		{"timeout", func(c *net.TCPConn, done <-chan struct{}) {
			readHead(bufio.NewReader(c))
			<-done // no answer until the test ends
			c.Close()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			stop := newStopAfter(10)
			done := make(chan struct{})
			defer close(done)
			addr := rawServer(t, func(c *net.TCPConn) { stop.hit(); tc.serve(c, done) })
			o := loadOpts(addr)
			o.n = 2
			if tc.kind == "timeout" {
				o.timeout = 200 * time.Millisecond
			}
			r := within(t, "the load", func() *loadResult { return runLoad(o, stop.ch) })
			if r.Requests == 0 || lost(r) != r.Requests || r.LostBy[tc.kind] != r.Requests || answered(r) != 0 {
				t.Fatalf("want every request lost as %s, got %+v", tc.kind, r)
			}
			if r.LostOnReused != 0 {
				t.Fatalf("want no loss on a reused connection (each was new), got %d", r.LostOnReused)
			}
			if len(r.Examples) == 0 || r.Examples[0].Kind != tc.kind {
				t.Fatalf("want examples of %s, got %+v", tc.kind, r.Examples)
			}
		})
	}
}

// A dial that nothing answers is refused, not a request and not lost.
func TestLoadRefusedIsNotARequest(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	stop := make(chan struct{})
	time.AfterFunc(300*time.Millisecond, func() { close(stop) }) // the length of the run, not a synchronisation
	o := loadOpts(addr)
	r := within(t, "the load", func() *loadResult { return runLoad(o, stop) })
	if r.Requests != 0 || lost(r) != 0 || r.DialFailed["refused"] == 0 {
		t.Fatalf("want refused dials and no request, got %+v", r)
	}
}

// closedByPeer sees a kept-alive connection the server has closed while it was idle, and
// leaves alone one that is still open, plain and over TLS.
func TestClosedByPeer(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			closeIt := make(chan struct{})
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "ok")
			}))
			var mu sync.Mutex
			var serverConns []net.Conn
			srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
				if s == http.StateNew {
					mu.Lock()
					serverConns = append(serverConns, c)
					mu.Unlock()
				}
			}
			if useTLS {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			o := loadOpts(srv.Listener.Addr().String())
			o.tls = useTLS
			tl := newResult()
			lc, err := dial(o, 0, tl)
			if err != nil {
				t.Fatal(err)
			}
			defer lc.c.Close()
			if !lc.do(o, 0, nil, tl) {
				t.Fatalf("first request: want the connection kept, tally %+v", tl)
			}
			if lc.closedByPeer() {
				t.Fatal("an open idle connection was taken for closed")
			}
			go func() {
				<-closeIt
				mu.Lock()
				defer mu.Unlock()
				for _, c := range serverConns {
					c.Close()
				}
			}()
			close(closeIt)
			if err := waitFor(testDeadline, "the server's close seen", lc.closedByPeer); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The slow mode writes a request a byte at a time (the server sees the head take at least
// a pause a byte) and every second one is a POST whose body arrives whole; -per-conn closes
// a connection after that many requests.
func TestLoadSlow(t *testing.T) {
	const pause = 2 * time.Millisecond
	stop := newStopAfter(8)
	var mu sync.Mutex
	var methods []string
	var bad []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		methods = append(methods, r.Method)
		if r.Method == http.MethodPost && string(body) != strings.Repeat("x", 32) {
			bad = append(bad, fmt.Sprintf("POST body %q", body))
		}
		mu.Unlock()
		stop.hit()
		io.WriteString(w, "ok")
	}))
	srv.Start()
	defer srv.Close()
	o := loadOpts(srv.Listener.Addr().String())
	o.n, o.slow, o.byteMin, o.byteMax, o.perConn = 2, true, pause, pause, 2
	t0 := time.Now()
	r := within(t, "the slow load", func() *loadResult { return runLoad(o, stop.ch) })
	if lost(r) != 0 || r.Requests != answered(r) || r.Requests != stop.seen.Load() {
		t.Fatalf("want every slow request answered, got %+v (server saw %d)", r, stop.seen.Load())
	}
	if len(bad) > 0 {
		t.Fatalf("bodies: %v", bad)
	}
	get, post := 0, 0
	for _, m := range methods {
		switch m {
		case http.MethodGet:
			get++
		case http.MethodPost:
			post++
		}
	}
	if get == 0 || post == 0 || get+post != len(methods) {
		t.Fatalf("want GETs and POSTs, got %v", methods)
	}
	if r.Connections < r.Requests/2 {
		t.Fatalf("-per-conn 2: want a connection every 2 requests, got %d for %d", r.Connections, r.Requests)
	}
	// Each client wrote at least its first head, ~60 bytes, a pause a byte.
	head := len(requestBytes(o, 0))
	if min := time.Duration(head-1) * pause; time.Since(t0) < min {
		t.Fatalf("a %d-byte head a byte every %v took %v, less than %v", head, pause, time.Since(t0), min)
	}
}

func openWithin(t *testing.T, o holdOpts) (*loadResult, []*loadConn) {
	t.Helper()
	type opened struct {
		r     *loadResult
		conns []*loadConn
	}
	got := within(t, "openAll", func() opened { r, c := openAll(o); return opened{r, c} })
	return got.r, got.conns
}

// Holding names why a connection could not be held: an answer not 200 by its status, a dial
// that nothing answered as refused.
func TestHoldFailKinds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer srv.Close()
	o := holdOpts{addr: srv.Listener.Addr().String(), path: "/", n: 5, parallel: 2, timeout: 5 * time.Second, sources: 1}
	o.host = o.addr
	if r, conns := openWithin(t, o); len(conns) != 0 || r.Held != 0 || r.AnsweredBy["502"] != 5 {
		t.Fatalf("want 5 answered 502 and none held, got %d held, %+v", len(conns), r)
	}
	srv.Close()
	if r, _ := openWithin(t, o); r.DialFailed["refused"] != 5 || r.Requests != 0 {
		t.Fatalf("want 5 refused and no request, got %+v", r)
	}
}

// Holding: n connections opened, each answered 200, held, and a held connection's close by
// the server is seen.
func TestHoldOpens(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	o := holdOpts{addr: srv.Listener.Addr().String(), path: "/", n: 20, parallel: 4, timeout: 5 * time.Second, sources: 1}
	o.host = o.addr
	r, conns := openWithin(t, o)
	defer closeAll(conns)
	if len(conns) != 20 || r.Held != 20 || r.AnsweredBy["200"] != 20 || len(r.DialFailed)+len(r.LostBy) != 0 {
		t.Fatalf("want 20 held and no failure, got %d held, %+v", len(conns), r)
	}
}

// A held event stream stays open after its first event: what the server sends next is read.
func TestHoldStream(t *testing.T) {
	next := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: open\ndata: x\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-next:
			io.WriteString(w, ": keep-alive\n")
			w.(http.Flusher).Flush()
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	o := holdOpts{addr: srv.Listener.Addr().String(), path: "/", n: 1, parallel: 1, timeout: 5 * time.Second, sources: 1, stream: true}
	o.host = o.addr
	r, conns := openWithin(t, o)
	defer closeAll(conns)
	if len(conns) != 1 || r.Held != 1 {
		t.Fatalf("want the stream held, got %+v", r)
	}
	close(next)
	conns[0].c.SetReadDeadline(time.Now().Add(testDeadline))
	if line, err := conns[0].br.ReadString('\n'); err != nil || line != ": keep-alive\n" {
		t.Fatalf("the held stream: read %q, %v; want the next comment", line, err)
	}
}

// A TLS handshake that the server ends is a lost request of its own kind: the connection was
// accepted and its request was ready.
func TestLoadHandshakeLost(t *testing.T) {
	stop := newStopAfter(6)
	addr := rawServer(t, func(c *net.TCPConn) {
		stop.hit()
		c.Read(make([]byte, 1)) // the ClientHello begins
		c.Close()
	})
	o := loadOpts(addr)
	o.n, o.tls = 2, true
	r := within(t, "the load", func() *loadResult { return runLoad(o, stop.ch) })
	if r.Requests == 0 || lost(r) != r.Requests || r.LostBy["handshake_eof"]+r.LostBy["handshake_reset"] != r.Requests {
		t.Fatalf("want every request lost in its handshake, got %+v", r)
	}
}
