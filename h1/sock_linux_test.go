package h1

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// What an idle connection holds, measured: heap, and stacks. Under epoll its conn and address,
// not a net.TCPConn, its two addresses and a runtime poll descriptor: about 150 bytes of heap,
// where a net.TCPConn alone is about 500, and no goroutine. On the portable poller the
// net.TCPConn, its watcher's state and the watcher's goroutine (docs/DECISIONS.md, "Off
// Linux"). The clients are raw sockets, so that only the server's memory is measured.
func TestIdleConnectionMemory(t *testing.T) { eachPoller(t, testIdleConnectionMemory) }

func testIdleConnectionMemory(t *testing.T, pk testPoller) {
	addr := pk.start(t, &Server{Handler: http.HandlerFunc(okHandler)})
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
	mem := func() (heap, stack uint64) {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc, ms.StackInuse
	}
	heap0, stack0 := mem()
	for range n {
		open()
	}
	time.Sleep(100 * time.Millisecond) // the last ones parked
	heap1, stack1 := mem()
	heap, stack := (float64(heap1)-float64(heap0))/n, (float64(stack1)-float64(stack0))/n
	t.Logf("per idle connection: %.0f bytes of heap, %.0f of stack", heap, stack)
	if heap > pk.idleHeap || stack > pk.idleStack {
		t.Errorf("per idle connection: %.0f bytes of heap, %.0f of stack; want at most %.0f and %.0f",
			heap, stack, pk.idleHeap, pk.idleStack)
	}
}

func retryEINTR(f func() (int, error)) (int, error) {
	for {
		if n, err := f(); err != unix.EINTR {
			return n, err
		}
	}
}

// onSocket runs f on c's socket, under either poller.
func onSocket(t *testing.T, c *conn, f func(fd int)) {
	t.Helper()
	if c.ns == nil {
		f(c.fd)
		return
	}
	if err := c.ns.rc.Control(func(fd uintptr) { f(int(fd)) }); err != nil {
		t.Fatal(err)
	}
}

// h1's accepts get what net's accept sets on each connection (by the listener's options,
// which Linux gives the sockets it accepts): TCP_NODELAY and keep-alive probes.
func TestAcceptedSocketsGetNetsOptions(t *testing.T) {
	eachPoller(t, testAcceptedSocketsGetNetsOptions)
}

func testAcceptedSocketsGetNetsOptions(t *testing.T, pk testPoller) {
	s := &Server{Handler: http.HandlerFunc(okHandler)}
	addr := pk.start(t, s)
	c, br := dial(t, addr)
	resp := get(t, c, br, "/")
	io.Copy(io.Discard, resp.Body)
	conns := s.snapshot()
	if len(conns) != 1 {
		t.Fatalf("%d connections", len(conns))
	}
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
		var v int
		var err error
		onSocket(t, conns[0], func(fd int) { v, err = unix.GetsockoptInt(fd, o.level, o.opt) })
		if err != nil || v != o.want {
			t.Errorf("%s = %d (%v), want %d", o.name, v, err, o.want)
		}
	}
}

// epoll's accepts give the client's address as net.TCPAddr writes it (an IPv4 client of a
// dual-stack listener as a.b.c.d), as net's accept does (TestRemoteAddr).
func TestRemoteString(t *testing.T) {
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
}
