package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// testPoller is a poller (poller.go) the behaviour tests run under, each in a subtest of its
// name (eachPoller): those built here are testPollers (pollers_linux_test.go, and
// pollers_other_test.go).
type testPoller struct {
	name    string
	newPoll func(*Server) (poller, sockets, error) // Server.newPoll
	// idleGoroutines is what an idle connection holds: none under epoll, its watcher on the
	// portable poller; idleHeap and idleStack bound the bytes it holds
	// (TestIdleConnectionMemory).
	idleGoroutines      int
	idleHeap, idleStack float64
}

// eachPoller runs test under each poller built here.
func eachPoller(t *testing.T, test func(*testing.T, testPoller)) {
	for _, pk := range testPollers {
		t.Run(pk.name, func(t *testing.T) { test(t, pk) })
	}
}

// start serves s with the poller on loopback (startLean).
func (pk testPoller) start(t *testing.T, s *Server) string {
	t.Helper()
	s.newPoll = pk.newPoll
	return startLean(t, s)
}

// portable is the portable poller as tests run it; byDeadline, as on Windows, its reads and
// writes "now" made under a deadline a moment away (net_windows.go).
var portable = testPoller{name: "portable", newPoll: newNetPoll, idleGoroutines: 1, idleHeap: 2048, idleStack: 4096}

var portableByDeadline = testPoller{name: "portable-by-deadline", idleGoroutines: 1, idleHeap: 2048, idleStack: 4096,
	newPoll: func(s *Server) (poller, sockets, error) {
		p, sk, err := newNetPoll(s)
		p.(*netPoll).byDeadline = true
		return p, sk, err
	}}

func startLean(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

func get(t *testing.T, c net.Conn, br *bufio.Reader, path string) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: e\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp
}

func okHandler(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }

// closedSoon fails unless the server closes the connection behind br, answering nothing,
// within 2 s (the tests' timeouts are 200 ms); what names the failure.
func closedSoon(t *testing.T, br *bufio.Reader, what string) {
	t.Helper()
	start := time.Now()
	if _, err := br.ReadByte(); err == nil {
		t.Fatal(what)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("closed after %v, want about 200ms", d)
	}
}

// An idle keep-alive connection holds no goroutine under epoll, and one (its watcher) on the
// portable poller: 100 connections, each answered once and left open, add (almost) no more.
func TestIdleConnectionsHoldNoGoroutine(t *testing.T) {
	eachPoller(t, testIdleConnectionsHoldNoGoroutine)
}

func testIdleConnectionsHoldNoGoroutine(t *testing.T, pk testPoller) {
	srvCfg, cliCfg := testTLS(t)
	for _, tc := range []struct {
		name string
		tls  *tls.Config
		dial func(t *testing.T, addr string) (net.Conn, *bufio.Reader)
	}{
		{"plain", nil, dial},
		{"tls", srvCfg, func(t *testing.T, addr string) (net.Conn, *bufio.Reader) { return dialTLS(t, addr, cliCfg) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := pk.start(t, &Server{Handler: http.HandlerFunc(okHandler), TLSConfig: tc.tls})
			before := runtime.NumGoroutine()
			const n = 100
			for range n {
				c, br := tc.dial(t, addr)
				resp := get(t, c, br, "/")
				io.Copy(io.Discard, resp.Body)
				if resp.StatusCode != 200 || resp.Close {
					t.Fatalf("answer %d, close %v", resp.StatusCode, resp.Close)
				}
			}
			// Each serving goroutine ends once it parked its connection.
			testutil.Eventually(t, 5*time.Second, "the serving goroutines to end", func() bool {
				return runtime.NumGoroutine()-before < 10+pk.idleGoroutines*n
			})
		})
	}
}

// A keep-alive connection carries request after request, parked between them.
func TestKeepAliveAfterParking(t *testing.T) { eachPoller(t, testKeepAliveAfterParking) }

func testKeepAliveAfterParking(t *testing.T, pk testPoller) {
	var served atomic.Int32
	addr := pk.start(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.WriteString(w, r.URL.Path)
	})})
	c, br := dial(t, addr)
	for i, p := range []string{"/a", "/b", "/c"} {
		if i > 0 {
			time.Sleep(20 * time.Millisecond) // parked meanwhile
		}
		resp := get(t, c, br, p)
		b, _ := io.ReadAll(resp.Body)
		if string(b) != p {
			t.Errorf("GET %s answered %q", p, b)
		}
	}
	if served.Load() != 3 {
		t.Errorf("served %d requests on one connection, want 3", served.Load())
	}
}

// The client leaving cancels its request's context while the handler runs (as net/http's
// background read does), within a second.
func TestClientLeavingCancelsTheRequest(t *testing.T) {
	eachPoller(t, testClientLeavingCancelsTheRequest)
}

func testClientLeavingCancelsTheRequest(t *testing.T, pk testPoller) {
	started, canceled := make(chan struct{}), make(chan time.Time, 1)
	addr := pk.start(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-r.Context().Done():
			canceled <- time.Now()
		case <-time.After(5 * time.Second):
		}
	})})
	c, _ := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: e\r\n\r\n")
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler did not start")
	}
	left := time.Now()
	c.Close()
	select {
	case at := <-canceled:
		if d := at.Sub(left); d > time.Second {
			t.Errorf("canceled %v after the client left, want within 1s", d)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the request was not canceled when the client left")
	}
}

// A POST body arriving while the handler runs (an event while busy) does not end the watch
// for the client leaving.
func TestClientLeavingAfterABodyCancels(t *testing.T) {
	eachPoller(t, testClientLeavingAfterABodyCancels)
}

func testClientLeavingAfterABodyCancels(t *testing.T, pk testPoller) {
	canceled := make(chan struct{})
	addr := pk.start(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The rest of the body waits in the socket until the poller has seen it (an event
		// while busy), and only then is read.
		time.Sleep(200 * time.Millisecond)
		io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
			close(canceled)
		case <-time.After(5 * time.Second):
		}
	})})
	c, _ := dial(t, addr)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 4\r\n\r\nab")
	time.Sleep(50 * time.Millisecond)
	io.WriteString(c, "cd") // comes while the handler runs, before it reads the body
	time.Sleep(300 * time.Millisecond)
	c.Close()
	select {
	case <-canceled:
	case <-time.After(3 * time.Second):
		t.Fatal("the request was not canceled when the client left after its body")
	}
}

// Flush sends what was written at once: a stream's first event reaches the client while the
// handler still runs.
func TestFlushStreams(t *testing.T) { eachPoller(t, testFlushStreams) }

func testFlushStreams(t *testing.T, pk testPoller) {
	release := make(chan struct{})
	addr := pk.start(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: one\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "event: two\n\n")
	})})
	defer close(release)
	c, br := dial(t, addr)
	resp := get(t, c, br, "/")
	if len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("a flushed answer of unknown length: Transfer-Encoding %v, want chunked", resp.TransferEncoding)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: one\n" {
		t.Fatalf("first event: %q %v", line, err)
	}
}

// A stream that gives its write buffer back while it waits (ReleaseWriteBuffer, as the proxy
// does when a stream pauses) holds none, writes on with one taken again, ends its chunked
// body, and the connection carries the next request. A writer still holding bytes is kept.
func TestReleaseWriteBuffer(t *testing.T) { eachPoller(t, testReleaseWriteBuffer) }

func testReleaseWriteBuffer(t *testing.T, pk testPoller) {
	released := make(chan bool, 2)
	addr := pk.start(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stream" {
			io.WriteString(w, "ok")
			return
		}
		rw := w.(*response)
		io.WriteString(w, "event: one\n\n")
		rw.ReleaseWriteBuffer() // bytes held (the head is not out yet): kept
		released <- rw.bw == nil
		w.(http.Flusher).Flush()
		rw.ReleaseWriteBuffer()
		released <- rw.bw == nil && rw.ss.bw == nil
		io.WriteString(w, "event: two\n\n")
	})})
	c, br := dial(t, addr)
	resp := get(t, c, br, "/stream")
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "event: one\n\nevent: two\n\n" {
		t.Fatalf("the stream's body: %q %v", body, err)
	}
	if first, second := <-released, <-released; first || !second {
		t.Errorf("released with bytes held: %v; released once flushed: %v (want false, true)", first, second)
	}
	resp = get(t, c, br, "/next")
	if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
		t.Errorf("the next request on the connection: %q", b)
	}
}

// The idle timeout closes a parked connection; the header timeout one that sends half a head.
func TestTimeouts(t *testing.T) { eachPoller(t, testTimeouts) }

func testTimeouts(t *testing.T, pk testPoller) {
	addr := pk.start(t, &Server{Handler: http.HandlerFunc(okHandler), IdleTimeout: 200 * time.Millisecond,
		ReadHeaderTimeout: 200 * time.Millisecond})
	t.Run("idle", func(t *testing.T) {
		c, br := dial(t, addr)
		resp := get(t, c, br, "/")
		io.Copy(io.Discard, resp.Body)
		start := time.Now()
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("read a byte from an idle connection")
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("closed after %v idle, want about 200ms", d)
		}
	})
	t.Run("header", func(t *testing.T) {
		c, br := dial(t, addr)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost:")
		closedSoon(t, br, "an answer to half a head")
	})
	// The deadline is set only once a head's read has to wait (a head there whole costs
	// none): a next request's half head, one sent in drips, and one behind the CRLF allowed
	// after a POST body must each still meet it.
	for _, tc := range []struct{ name, first, half string }{
		{"header on a kept-alive connection", "GET / HTTP/1.1\r\nHost: e\r\n\r\n", "GET / HTTP/1.1\r\nHost:"},
		{"header after a POST's CRLF", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 0\r\n\r\n", "\r\n\r\nGET / HTTP/1.1\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, br := dial(t, addr)
			io.WriteString(c, tc.first)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			io.WriteString(c, tc.half)
			closedSoon(t, br, "an answer to half a head")
		})
	}
	t.Run("header in drips", func(t *testing.T) {
		c, br := dial(t, addr)
		io.WriteString(c, "GET / HTTP/1.1\r\n")
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
					if _, err := io.WriteString(c, "X-A: b\r\n"); err != nil {
						return
					}
				}
			}
		}()
		closedSoon(t, br, "an answer to a head that never ends")
	})
}

// Shutdown closes idle connections at once, lets a busy one finish with Connection: close,
// and returns when it is gone.
func TestShutdown(t *testing.T) { eachPoller(t, testShutdown) }

func testShutdown(t *testing.T, pk testPoller) {
	inHandler, release := make(chan struct{}), make(chan struct{})
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(inHandler)
			<-release
		}
		io.WriteString(w, "ok")
	})}
	addr := pk.start(t, s)
	idle, idleBr := dial(t, addr)
	resp := get(t, idle, idleBr, "/")
	io.Copy(io.Discard, resp.Body)
	busy, busyBr := dial(t, addr)
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: e\r\n\r\n")
	<-inHandler

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	if _, err := idleBr.ReadByte(); err == nil {
		t.Error("the idle connection was not closed")
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v while a request ran", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	resp, err := http.ReadResponse(busyBr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Close {
		t.Error("the busy connection's last answer lacks Connection: close")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return after the last request")
	}
}

// A connection that starts with the HTTP/2 preface goes to Fallback, its bytes intact.
func TestH2PrefaceGoesToFallback(t *testing.T) { eachPoller(t, testH2PrefaceGoesToFallback) }

func testH2PrefaceGoesToFallback(t *testing.T, pk testPoller) {
	got := make(chan string, 1)
	addr := pk.start(t, &Server{Handler: http.HandlerFunc(okHandler), Fallback: func(c net.Conn) {
		defer c.Close()
		b := make([]byte, len(h2Preface)+5)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.ReadFull(c, b)
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- string(b)
	}})
	c, _ := dial(t, addr)
	io.WriteString(c, h2Preface+"hello")
	select {
	case s := <-got:
		if s != h2Preface+"hello" {
			t.Errorf("Fallback read %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Fallback got no connection")
	}
}

// A handler that panics with http.ErrAbortHandler cuts the answer: the connection closes
// without the last chunk, so the client cannot take it for whole.
func TestAbortCutsTheAnswer(t *testing.T) { eachPoller(t, testAbortCutsTheAnswer) }

func testAbortCutsTheAnswer(t *testing.T, pk testPoller) {
	addr := pk.start(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 4000))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	})})
	c, br := dial(t, addr)
	resp := get(t, c, br, "/")
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("an aborted answer read to a clean end")
	}
}

// A second request arriving before the first is answered (pipelining) is answered after it.
func TestPipelined(t *testing.T) { eachPoller(t, testPipelined) }

func testPipelined(t *testing.T, pk testPoller) {
	addr := pk.start(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Path)
	})})
	c, br := dial(t, addr)
	io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: e\r\n\r\nGET /2 HTTP/1.1\r\nHost: e\r\n\r\n")
	for _, want := range []string{"/1", "/2"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != want {
			t.Errorf("answer %q, want %q", b, want)
		}
	}
}

// A connection that never sends a request is closed after the header timeout, as net/http
// does, not kept for the idle timeout.
func TestSilentConnectionClosedAfterHeaderTimeout(t *testing.T) {
	eachPoller(t, testSilentConnectionClosedAfterHeaderTimeout)
}

func testSilentConnectionClosedAfterHeaderTimeout(t *testing.T, pk testPoller) {
	addr := pk.start(t, &Server{Handler: http.HandlerFunc(okHandler), IdleTimeout: time.Hour,
		ReadHeaderTimeout: 200 * time.Millisecond})
	_, br := dial(t, addr)
	closedSoon(t, br, "read a byte from a silent connection")
}

// net/http's tolerance of a CRLF an old client sends after a POST body holds when the next
// request comes after the connection parked, not only when it is pipelined: "first request"
// is the connection's, not the wake's.
func TestCRLFAfterPostAcrossPark(t *testing.T) { eachPoller(t, testCRLFAfterPostAcrossPark) }

func testCRLFAfterPostAcrossPark(t *testing.T, pk testPoller) {
	addr := pk.start(t, &Server{Handler: http.HandlerFunc(okHandler), ReadHeaderTimeout: 2 * time.Second})
	c, br := dial(t, addr)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 0\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	time.Sleep(20 * time.Millisecond) // parked
	io.WriteString(c, "\r\nGET / HTTP/1.1\r\nHost: e\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET after a POST's CRLF, parked between: %d, want 200", resp.StatusCode)
	}
}

// The sweeper looks a quarter of the shorter timeout apart, within 10 ms and 1 s.
func TestSweepPeriod(t *testing.T) {
	for _, tc := range []struct {
		idle, header, want time.Duration
	}{
		{0, 0, time.Second},
		{2 * time.Minute, 10 * time.Second, time.Second},
		{2 * time.Second, 0, 500 * time.Millisecond},
		{time.Minute, 200 * time.Millisecond, 50 * time.Millisecond},
		{time.Millisecond, 0, 10 * time.Millisecond},
	} {
		s := &Server{IdleTimeout: tc.idle, ReadHeaderTimeout: tc.header}
		if got := s.sweepPeriod(); got != tc.want {
			t.Errorf("idle %v, header %v: period %v, want %v", tc.idle, tc.header, got, tc.want)
		}
	}
}

// A client that sends its request and closes its side in one go gets the answer and the
// connection's end at once (net/http reads on to the end too). Edge-triggered, the event
// that carried the request was the only one to say the client had finished.
func TestRequestWithHalfCloseEndsAtOnce(t *testing.T) {
	eachPoller(t, testRequestWithHalfCloseEndsAtOnce)
}

func testRequestWithHalfCloseEndsAtOnce(t *testing.T, pk testPoller) {
	addr := pk.start(t, &Server{Handler: http.HandlerFunc(okHandler), IdleTimeout: time.Minute})
	for _, raw := range []string{
		"GET / HTTP/1.1\r\nHost: e\r\n\r\n",
		"GET /a HTTP/1.1\r\nHost: e\r\n\r\nGET /b HTTP/1.1\r\nHost: e\r\n\r\n",
	} {
		c, br := dial(t, addr)
		io.WriteString(c, raw)
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n := 0
		for {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("%q: after %d answers: %v, want the connection closed at once", raw, n, err)
				}
				break
			}
			io.Copy(io.Discard, resp.Body)
			n++
		}
		if want := strings.Count(raw, "GET"); n != want {
			t.Errorf("%q: %d answers, want %d", raw, n, want)
		}
	}
}

// A reused response starts as a new one: every field but the hold's bytes is reset, so a
// field added later and forgotten in reset fails here.
func TestResponseResetClearsEveryField(t *testing.T) {
	w := &response{header: http.Header{}}
	v := reflect.ValueOf(w).Elem()
	for i := range v.NumField() {
		f := reflect.NewAt(v.Field(i).Type(), unsafe.Pointer(v.Field(i).UnsafeAddr())).Elem() // unexported
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(7)
		case reflect.Ptr:
			if f.IsNil() {
				f.Set(reflect.New(f.Type().Elem()))
			}
		}
	}
	w.header.Set("X-Old", "1")
	w.pending = []byte("old")
	w.pendingBuf[0] = 'x'
	req := httptestRequest()
	ss := &session{bw: bufio.NewWriter(io.Discard)}
	w.reset(nil, ss, req)
	want := response{header: http.Header{}, req: req, ss: ss, bw: ss.bw, contentLen: -1}
	want.pending = w.pendingBuf[:0]
	want.pendingBuf = w.pendingBuf // the hold's bytes are not cleared: pending says how many count
	if !reflect.DeepEqual(*w, want) {
		t.Errorf("after reset:\n%+v\nwant\n%+v", *w, want)
	}
}

func httptestRequest() *http.Request {
	r, _ := http.NewRequest("GET", "http://e/", nil)
	return r
}

// A head whose first bytes came alone (the read before it waited, so the header deadline was
// set) and whose rest was plain: the deadline is lifted with the head read, and the
// connection carries a next request long after it would have passed.
func TestHeaderDeadlineLiftedAfterAPlainHead(t *testing.T) {
	eachPoller(t, testHeaderDeadlineLiftedAfterAPlainHead)
}

func testHeaderDeadlineLiftedAfterAPlainHead(t *testing.T, pk testPoller) {
	addr := pk.start(t, &Server{Handler: http.HandlerFunc(okHandler), ReadHeaderTimeout: 200 * time.Millisecond})
	c, br := dial(t, addr)
	resp := get(t, c, br, "/") // the first request: served, the connection parked
	io.Copy(io.Discard, resp.Body)
	io.WriteString(c, "GE")
	time.Sleep(50 * time.Millisecond) // the server's read waits: the header deadline is set
	io.WriteString(c, "T / HTTP/1.1\r\nHost: e\r\n\r\n")
	resp, err := http.ReadResponse(br, nil) // the head was whole and plain once the rest came
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	time.Sleep(400 * time.Millisecond) // past that deadline
	resp = get(t, c, br, "/")
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(b) != "ok" {
		t.Errorf("after the pause: %d %q", resp.StatusCode, b)
	}
}

// Close right after Serve started returns: the sweeper, not yet running when Close came, is
// stopped all the same (it read its stop channel late, found it gone, and waited forever).
func TestCloseRightAfterServe(t *testing.T) { eachPoller(t, testCloseRightAfterServe) }

func testCloseRightAfterServe(t *testing.T, pk testPoller) {
	for range 200 {
		s := &Server{Handler: http.HandlerFunc(okHandler), IdleTimeout: time.Minute, newPoll: pk.newPoll}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan struct{})
		go func() { defer close(served); s.Serve(ln) }()
		for s.IdleWorkers() == 0 && !serving(s) {
			runtime.Gosched()
		}
		closed := make(chan struct{})
		go func() { defer close(closed); s.Close() }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("Close right after Serve did not return")
		}
		<-served
	}
}

// serving reports whether Serve has made its poller (and started the sweeper's goroutine).
func serving(s *Server) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.poll != nil
}

// A parked connection woken with nothing to read (the poller can deliver an event whose data
// the serving goroutine read already) parks again: its next request, long after the header
// timeout, is answered. It was closed instead: the wake read under the header deadline, which
// started before the request did, and a goroutine waited for it meanwhile.
func TestWakeWithNothingToReadParksAgain(t *testing.T) {
	eachPoller(t, testWakeWithNothingToReadParksAgain)
}

// parkedConn dials addr, has one request answered, and returns the connection, its reader and
// the server's side of it once parked.
func parkedConn(t *testing.T, s *Server, addr string) (net.Conn, *bufio.Reader, *conn) {
	t.Helper()
	c, br := dial(t, addr)
	resp := get(t, c, br, "/")
	io.Copy(io.Discard, resp.Body)
	var parked *conn
	testutil.Eventually(t, 2*time.Second, "the connection parked", func() bool {
		for _, cn := range s.snapshot() {
			if cn.state.Load() == stateIdle {
				parked = cn
				return true
			}
		}
		return false
	})
	return c, br, parked
}

func testWakeWithNothingToReadParksAgain(t *testing.T, pk testPoller) {
	s := &Server{Handler: http.HandlerFunc(okHandler), ReadHeaderTimeout: 100 * time.Millisecond}
	addr := pk.start(t, s)
	c, br, parked := parkedConn(t, s, addr)
	if s.dispatch(parked, evIn, false) {
		t.Fatal("dispatch asked its caller to serve a connection it was not told is the batch's last")
	}
	testutil.Eventually(t, 2*time.Second, "the woken connection parked again", func() bool {
		return parked.state.Load() == stateIdle
	})
	time.Sleep(300 * time.Millisecond) // past the header timeout
	resp := get(t, c, br, "/")
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(b) != "ok" {
		t.Errorf("after the empty wake: %d %q", resp.StatusCode, b)
	}
}

// Through the drain (StopKeepAlives, then Shutdown at its end), every connection is answered
// before it is closed: a kept-alive one idle when the drain began, whose client sends its next
// request then, and a new one that has sent nothing yet. Closing the kept-alive one at once
// lost its client's next request at every upgrade (a keep-alive client at 20 requests a second
// lost 1 GET in 400, 25-30 ms after the hand-over). Shutdown then closes the kept-alive ones
// still idle.
func TestDrainAnswersEveryConnection(t *testing.T) { eachPoller(t, testDrainAnswersEveryConnection) }

func testDrainAnswersEveryConnection(t *testing.T, pk testPoller) {
	s := &Server{Handler: http.HandlerFunc(okHandler), ReadHeaderTimeout: 5 * time.Second}
	addr := pk.start(t, s)
	kept, keptBr := dial(t, addr)
	resp := get(t, kept, keptBr, "/")
	io.Copy(io.Discard, resp.Body)
	quiet, quietBr := dial(t, addr) // kept alive, sends nothing more
	resp = get(t, quiet, quietBr, "/")
	io.Copy(io.Discard, resp.Body)
	fresh, freshBr := dial(t, addr)
	testutil.Eventually(t, 2*time.Second, "three connections accepted", func() bool { return len(s.snapshot()) == 3 })
	testutil.Eventually(t, 2*time.Second, "both kept-alive connections idle", func() bool {
		idle := 0
		for _, c := range s.snapshot() {
			if c.served.Load() && c.state.Load() == stateIdle {
				idle++
			}
		}
		return idle == 2
	})

	s.StopKeepAlives()
	resp = get(t, kept, keptBr, "/")
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(body) != "ok" || !resp.Close {
		t.Errorf("the kept-alive connection's next request in the drain: %d %q close=%v; want 200 ok with Connection: close",
			resp.StatusCode, body, resp.Close)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	closedSoon(t, quietBr, "Shutdown did not close the kept-alive connection idle through the drain")
	resp = get(t, fresh, freshBr, "/")
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(body) != "ok" || !resp.Close {
		t.Errorf("the new connection's request through the drain: %d %q close=%v; want 200 ok with Connection: close",
			resp.StatusCode, body, resp.Close)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return after the new connection's request")
	}
}

// A connection accepted while Shutdown closes the listener (the accept loop had it already)
// is served, its answer closing it: in an upgrade in place the listening socket lives on in
// the new process, so its client saw no refusal and has no answer to retry on. Closing it
// failed 1 request of 57,488 in TestUpgradeInPlace.
func TestConnectionAcceptedDuringShutdownIsServed(t *testing.T) {
	eachPoller(t, testConnectionAcceptedDuringShutdownIsServed)
}

func testConnectionAcceptedDuringShutdownIsServed(t *testing.T, pk testPoller) {
	inHandler, release := make(chan struct{}), make(chan struct{})
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(inHandler)
			<-release
		}
		io.WriteString(w, "ok")
	}), ReadHeaderTimeout: 5 * time.Second}
	addr := pk.start(t, s)
	busy, busyBr := dial(t, addr)
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: e\r\n\r\n")
	<-inHandler
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	testutil.Eventually(t, 2*time.Second, "Shutdown under way", func() bool { return s.down.Load() })

	// A connection as the accept loop would hand it over just then.
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	client, clientBr := dial(t, other.Addr().String())
	nc, err := other.Accept()
	if err != nil {
		t.Fatal(err)
	}
	s.acceptConn(nc)
	resp := get(t, client, clientBr, "/")
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(body) != "ok" || !resp.Close {
		t.Errorf("accepted during Shutdown: %d %q close=%v; want 200 ok with Connection: close", resp.StatusCode, body, resp.Close)
	}
	close(release)
	if resp, err := http.ReadResponse(busyBr, nil); err != nil || !resp.Close {
		t.Fatalf("the busy request: %v", err)
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
