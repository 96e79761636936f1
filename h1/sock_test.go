package h1

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// An answer bigger than the sockets' buffers, to a client that reads only after a pause:
// the serving goroutine's write meets a full socket and waits for the poller's EPOLLOUT.
func TestBigAnswerToASlowReader(t *testing.T) { eachPoller(t, testBigAnswerToASlowReader) }

func testBigAnswerToASlowReader(t *testing.T, pk testPoller) {
	const size = 16 << 20
	body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	addr := pk.start(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(body)
	})})
	c, br := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: e\r\n\r\n")
	time.Sleep(300 * time.Millisecond) // the server fills the socket and waits
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil || n != size || !bytes.Equal(h.Sum(nil), sha256Of(body)) {
		t.Fatalf("read %d bytes (%v), want %d, the same", n, err, size)
	}
	// The connection is kept and serves the next request.
	resp = get(t, c, br, "/")
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("next answer %d", resp.StatusCode)
	}
}

func sha256Of(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

// A body that comes in pieces while the handler is busy: its second event switches the
// registration to the client leaving only; the handler's read that then waits must switch
// it back (wantData), or it would wait for ever.
func TestBodyReadWaitsAfterTheHangupSwitch(t *testing.T) {
	eachPoller(t, testBodyReadWaitsAfterTheHangupSwitch)
}

func testBodyReadWaitsAfterTheHangupSwitch(t *testing.T, pk testPoller) {
	got := make(chan string, 1)
	addr := pk.start(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond) // the pieces come meanwhile, nobody reading
		b, err := io.ReadAll(r.Body)
		got <- fmt.Sprintf("%q %v", b, err)
		io.WriteString(w, "ok")
	})})
	c, br := dial(t, addr)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 4\r\n\r\na")
	for _, p := range []string{"b", "c"} {
		time.Sleep(50 * time.Millisecond)
		io.WriteString(c, p)
	}
	time.Sleep(500 * time.Millisecond) // the handler has read "abc" and waits
	io.WriteString(c, "d")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if g := <-got; g != `"abcd" <nil>` {
		t.Fatalf("the handler read %s", g)
	}
}

// Close wakes a busy connection's goroutine waiting to read (a body that never comes).
func TestCloseWakesAWaitingRead(t *testing.T) { eachPoller(t, testCloseWakesAWaitingRead) }

func testCloseWakesAWaitingRead(t *testing.T, pk testPoller) {
	read := make(chan error, 1)
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		read <- err
	})}
	addr := pk.start(t, s)
	c, _ := dial(t, addr)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 10\r\n\r\nabc")
	time.Sleep(200 * time.Millisecond)
	s.Close()
	select {
	case err := <-read:
		if err == nil {
			t.Fatal("the body's read ended without an error")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the body's read still waits 2 s after Close")
	}
}

// A TCP connection from a listener that is not a net.TCPListener is served the same way: its
// socket is taken as a file descriptor, and it parks between requests.
func TestWrappedListener(t *testing.T) { eachPoller(t, testWrappedListener) }

func testWrappedListener(t *testing.T, pk testPoller) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: http.HandlerFunc(okHandler), newPoll: pk.newPoll}
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(wrapped{ln}) }()
	defer func() {
		s.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Close")
		}
	}()
	c, br := dial(t, ln.Addr().String())
	for i := range 3 {
		resp := get(t, c, br, "/")
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "ok" {
			t.Fatalf("request %d: %q", i, b)
		}
		time.Sleep(20 * time.Millisecond) // parked between them
	}
}

// The request's RemoteAddr is the client's address as net.TCPAddr writes it, on IPv4 and
// IPv6.
func TestRemoteAddr(t *testing.T) { eachPoller(t, testRemoteAddr) }

func testRemoteAddr(t *testing.T, pk testPoller) {
	for _, network := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", network)
		if err != nil {
			t.Logf("%s: %v (no such stack here)", network, err)
			continue
		}
		s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.RemoteAddr) }),
			newPoll: pk.newPoll}
		go s.Serve(ln)
		c, br := dial(t, ln.Addr().String())
		resp := get(t, c, br, "/")
		b, _ := io.ReadAll(resp.Body)
		if string(b) != c.LocalAddr().String() {
			t.Errorf("%s: RemoteAddr %q, want %q", network, b, c.LocalAddr())
		}
		s.Close()
	}
}

// wrapped is a listener that is not a *net.TCPListener (as a limit or metrics wrapper).
type wrapped struct{ net.Listener }
