package h1

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// BenchmarkRequest is one keep-alive request through h1 on loopback, to a handler that
// answers "ok": the server's own cost per request (the client side reads raw bytes and
// allocates nothing, so allocs/op are the server's). Each request parks the connection.
func BenchmarkRequest(b *testing.B) { benchmarkRequest(b, nil) }

// BenchmarkRequestPortable is BenchmarkRequest on the portable poller (the default off Linux).
func BenchmarkRequestPortable(b *testing.B) { benchmarkRequest(b, newNetPoll) }

func benchmarkRequest(b *testing.B, newPoll func(*Server) (poller, sockets, error)) {
	roundTrip, done := keepAliveClient(b, newPoll)
	defer done()
	roundTrip() // the connection and the worker exist before the timing starts
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		roundTrip()
	}
}

// keepAliveClient serves okHandler with h1 on loopback, with the poller newPoll makes (nil:
// the default), and returns a function making one keep-alive request on one connection,
// reading raw bytes (it allocates nothing itself).
func keepAliveClient(b testing.TB, newPoll func(*Server) (poller, sockets, error)) (roundTrip, done func()) {
	s := &Server{Handler: http.HandlerFunc(okHandler), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute,
		newPoll: newPoll}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go s.Serve(ln)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		s.Close()
		b.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	req := []byte("GET /t/acme/items/1 HTTP/1.1\r\nHost: e\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
	buf := make([]byte, 4096)
	end := []byte("\r\n\r\nok")
	roundTrip = func() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			m, err := c.Read(buf[n:])
			if err != nil && err != io.EOF {
				b.Fatal(err)
			}
			n += m
			if bytes.HasSuffix(buf[:n], end) {
				return
			}
			if err == io.EOF || n == len(buf) {
				b.Fatalf("unexpected answer %q", buf[:n])
			}
		}
	}
	return roundTrip, func() { c.Close(); s.Close() }
}
