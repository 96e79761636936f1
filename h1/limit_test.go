package h1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// stillOpen fails if the server closed the connection behind br (it must stay open, idle).
func stillOpen(t *testing.T, c net.Conn, br *bufio.Reader, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err := br.ReadByte()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("%s: read %v, want it open and silent", what, err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
}

// keptAlive opens a connection, gets one answer on it and leaves it idle.
func keptAlive(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, br := dial(t, addr)
	resp := get(t, c, br, "/")
	io.Copy(io.Discard, resp.Body)
	return c, br
}

func wantOK(t *testing.T, resp *http.Response, what string) {
	t.Helper()
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("%s: %d %q, want 200 ok", what, resp.StatusCode, body)
	}
}

// At MaxConns, a new connection is served: the kept-alive connection idle longest is closed
// to make room (one at a time under a bound this small), and the others stay open.
func TestMaxConnsShedsTheLongestIdle(t *testing.T) { eachPoller(t, testMaxConnsShedsTheLongestIdle) }

func testMaxConnsShedsTheLongestIdle(t *testing.T, pk testPoller) {
	s := &Server{Handler: http.HandlerFunc(okHandler), IdleTimeout: time.Minute, MaxConns: 3}
	addr := pk.start(t, s)
	var kept []net.Conn
	var brs []*bufio.Reader
	for range 3 {
		c, br := keptAlive(t, addr)
		kept, brs = append(kept, c), append(brs, br)
		time.Sleep(5 * time.Millisecond) // parked one after the other
	}
	testutil.Eventually(t, 2*time.Second, "three held", func() bool { return s.Held() == 3 })

	c, br := dial(t, addr)
	wantOK(t, get(t, c, br, "/"), "the new connection at the bound")
	closedSoon(t, brs[0], "the connection idle longest was not closed")
	stillOpen(t, kept[1], brs[1], "the second connection")
	stillOpen(t, kept[2], brs[2], "the newest connection")
	if got := s.Shed(); got != 1 {
		t.Errorf("Shed() = %d, want 1", got)
	}
	testutil.Eventually(t, 2*time.Second, "three held after the shed", func() bool { return s.Held() == 3 })
}

// At MaxConns with no connection idle, a new connection waits (in the listen backlog) and is
// served as soon as one of the busy ones closes; none is closed under a request.
func TestMaxConnsWaitsWhileNoneIsIdle(t *testing.T) { eachPoller(t, testMaxConnsWaitsWhileNoneIsIdle) }

func testMaxConnsWaitsWhileNoneIsIdle(t *testing.T, pk testPoller) {
	release := make(chan struct{})
	var mu sync.Mutex
	entered := 0
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		entered++
		mu.Unlock()
		if r.URL.Path == "/slow" {
			<-release
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, "ok")
	}), IdleTimeout: time.Minute, MaxConns: 2}
	addr := pk.start(t, s)
	var busy []*bufio.Reader
	for range 2 {
		c, br := dial(t, addr)
		io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: e\r\n\r\n")
		busy = append(busy, br)
	}
	testutil.Eventually(t, 2*time.Second, "both busy", func() bool { mu.Lock(); defer mu.Unlock(); return entered == 2 })
	c, br := dial(t, addr) // the kernel's backlog takes it
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: e\r\n\r\n")
	time.Sleep(150 * time.Millisecond) // three of waitRoom's looks
	mu.Lock()
	if entered != 2 {
		t.Errorf("%d requests served at a bound of 2 with both busy", entered)
	}
	mu.Unlock()
	close(release)
	for i, br := range busy {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("busy request %d: %v", i, err)
		}
		wantOK(t, resp, "a busy request")
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the waiting connection: %v", err)
	}
	wantOK(t, resp, "the connection that waited")
	if s.Shed() != 0 {
		t.Errorf("Shed() = %d with no idle connection", s.Shed())
	}
}

// What a shed costs at a bound of 20,000 idle connections: one scan for the 32 idle longest.
func BenchmarkLongestIdle(b *testing.B) {
	s := &Server{conns: map[*conn]struct{}{}}
	for i := range 20000 {
		c := &conn{srv: s}
		c.served.Store(true)
		c.idleUntil.Store(int64(i * 7919 % 20000)) // parked in no particular order
		s.conns[c] = struct{}{}
	}
	b.ResetTimer()
	for b.Loop() {
		if got := s.longestIdle(ShedBatch); len(got) != ShedBatch || got[0].idleUntil.Load() != 0 {
			b.Fatalf("%d picked, the first idle until %d", len(got), got[0].idleUntil.Load())
		}
	}
}

// Shutdown serves the connections waiting in the listen backlog before it closes the listener,
// which would reset them with their requests written (a SIGTERM drain under a storm of new
// connections lost a few so). Here the accept loop is held at MaxConns by a busy connection,
// so that a connection waits in the backlog when Shutdown comes.
func TestShutdownServesTheBacklog(t *testing.T) { eachPoller(t, testShutdownServesTheBacklog) }

func testShutdownServesTheBacklog(t *testing.T, pk testPoller) {
	release := make(chan struct{})
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		io.WriteString(w, "ok")
	}), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute, MaxConns: 1}
	addr := pk.start(t, s)
	busy, busyBr := dial(t, addr)
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: e\r\n\r\n")
	testutil.Eventually(t, 2*time.Second, "the busy connection held", func() bool { return s.Held() == 1 })
	inHand, inHandBr := dial(t, addr) // accepted, waiting for room
	io.WriteString(inHand, "GET / HTTP/1.1\r\nHost: e\r\n\r\n")
	testutil.Eventually(t, 2*time.Second, "the accept loop waiting for room", s.starved.Load)
	queued, queuedBr := dial(t, addr) // in the backlog
	io.WriteString(queued, "GET / HTTP/1.1\r\nHost: e\r\n\r\n")
	time.Sleep(20 * time.Millisecond)

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	for _, c := range []struct {
		what string
		br   *bufio.Reader
	}{{"the connection in the backlog", queuedBr}, {"the connection accepted at the bound", inHandBr}} {
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		wantOK(t, resp, c.what)
		if !resp.Close {
			t.Errorf("%s: answered without Connection: close", c.what)
		}
	}
	close(release)
	if resp, err := http.ReadResponse(busyBr, nil); err != nil {
		t.Fatalf("the busy connection: %v", err)
	} else {
		wantOK(t, resp, "the busy connection")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return")
	}
}
