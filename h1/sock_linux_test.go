//go:build linux

package h1

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// An answer bigger than the sockets' buffers, to a client that reads only after a pause:
// the serving goroutine's write meets a full socket and waits for the poller's EPOLLOUT.
func TestBigAnswerToASlowReader(t *testing.T) {
	const size = 16 << 20
	body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	addr := startLean(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
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
	got := make(chan string, 1)
	addr := startLean(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
func TestCloseWakesAWaitingRead(t *testing.T) {
	read := make(chan error, 1)
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		read <- err
	})}
	addr := startLean(t, s)
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

// An idle connection holds its conn and address, not a net.TCPConn, its two addresses and a
// runtime poll descriptor: about 150 bytes of heap, where a net.TCPConn alone is about 500.
// The clients are raw sockets, so that only the server's heap is measured.
func TestIdleConnectionHeapCost(t *testing.T) {
	addr := startLean(t, &Server{Handler: http.HandlerFunc(okHandler)})
	ta, _ := net.ResolveTCPAddr("tcp", addr)
	sa := &unix.SockaddrInet4{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To4())
	const n = 1000
	fds := make([]int, 0, n+1) // made before the heap is measured
	t.Cleanup(func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	})
	open := func() {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5})
		// Blocking calls in a Go program meet EINTR (the runtime's preemption signals).
		for err := unix.Connect(fd, sa); err != nil && err != unix.EISCONN; err = unix.Connect(fd, sa) {
			if err != unix.EINTR && err != unix.EALREADY {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
		if _, err := retryEINTR(func() (int, error) { return unix.Write(fd, []byte("GET / HTTP/1.1\r\nHost: e\r\n\r\n")) }); err != nil {
			t.Fatal(err)
		}
		var b [512]byte
		if n, err := retryEINTR(func() (int, error) { return unix.Read(fd, b[:]) }); err != nil || !bytes.Contains(b[:n], []byte(" 200 ")) {
			t.Fatalf("answer %q, %v", b[:max(n, 0)], err)
		}
	}
	open() // the first request's pools and workers
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	for range n {
		open()
	}
	time.Sleep(100 * time.Millisecond) // the last ones parked
	per := (float64(heap()) - float64(before)) / n
	t.Logf("%.0f bytes of heap per idle connection", per)
	if per > 400 {
		t.Errorf("%.0f bytes of heap per idle connection, want at most 400", per)
	}
}

func retryEINTR(f func() (int, error)) (int, error) {
	for {
		if n, err := f(); err != unix.EINTR {
			return n, err
		}
	}
}

// h1's accepts get what net's accept sets on each connection (by the listener's options,
// which Linux gives the sockets it accepts): TCP_NODELAY and keep-alive probes.
func TestAcceptedSocketsGetNetsOptions(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(okHandler)}
	addr := startLean(t, s)
	c, br := dial(t, addr)
	resp := get(t, c, br, "/")
	io.Copy(io.Discard, resp.Body)
	conns := s.snapshot()
	if len(conns) != 1 {
		t.Fatalf("%d connections", len(conns))
	}
	fd := conns[0].fd
	for _, o := range []struct {
		name       string
		level, opt int
		want       int
	}{
		{"TCP_NODELAY", unix.IPPROTO_TCP, unix.TCP_NODELAY, 1},
		{"SO_KEEPALIVE", unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
		{"TCP_KEEPIDLE", unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, 15},
		{"TCP_KEEPINTVL", unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, 15},
		{"TCP_KEEPCNT", unix.IPPROTO_TCP, unix.TCP_KEEPCNT, 9},
	} {
		if v, err := unix.GetsockoptInt(fd, o.level, o.opt); err != nil || v != o.want {
			t.Errorf("%s = %d (%v), want %d", o.name, v, err, o.want)
		}
	}
}

// The request's RemoteAddr is the client's address as net.TCPAddr writes it, an IPv4
// client of a dual-stack listener included.
func TestRemoteAddr(t *testing.T) {
	for _, tc := range []struct {
		name string
		sa   unix.Sockaddr
		want string
	}{
		{"v4", &unix.SockaddrInet4{Addr: [4]byte{192, 0, 2, 7}, Port: 5000}, "192.0.2.7:5000"},
		{"v6", &unix.SockaddrInet6{Addr: [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}, Port: 443}, "[2001:db8::1]:443"},
		{"v4 on a dual-stack listener", &unix.SockaddrInet6{Addr: [16]byte{10: 0xff, 11: 0xff, 12: 192, 13: 0, 14: 2, 15: 7}, Port: 80}, "192.0.2.7:80"},
		{"v6 link-local, an unknown zone", &unix.SockaddrInet6{Addr: [16]byte{0: 0xfe, 1: 0x80, 15: 1}, Port: 80, ZoneId: 99999}, "[fe80::1%99999]:80"},
	} {
		if got := remoteString(tc.sa); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	for _, network := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", network)
		if err != nil {
			t.Logf("%s: %v (no such stack here)", network, err)
			continue
		}
		s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.RemoteAddr) })}
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

// A TCP connection from a listener that is not a net.TCPListener is served the same way: its
// socket is taken as a file descriptor, and it parks between requests.
func TestWrappedListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: http.HandlerFunc(okHandler)}
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
