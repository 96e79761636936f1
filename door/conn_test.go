package door

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// A door connection keeps its connection's write-side close (net/http half-closes before it
// closes a connection whose client may still send), and after a refusal its Close lets the
// client read the answer: the write side first, what the client still sends read and dropped.
func TestConnCloseWriteAndLinger(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	raw, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := NewConn(raw)
	if _, ok := c.(interface{ CloseWrite() error }); !ok {
		t.Fatal("a door connection over TCP has no CloseWrite")
	}
	client.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(client, "GET / HTTP/1.1\r\n\r\nmore the client sends")
	buf := make([]byte, 4096)
	n, _ := c.Read(buf) // the stand-in of a request without Host
	if !c.(*Conn).rd.Refused() {
		t.Fatalf("read %q: not refused", buf[:n])
	}
	c.Write([]byte("answer"))
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	got, err := io.ReadAll(client) // the server's FIN comes before its close
	if err != nil || string(got) != "answer" {
		t.Fatalf("client read %q, %v", got, err)
	}
	client.Close()
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("Close lingered past the client's close")
	}
}

// The door's TLS listener: plain HTTP sent to it is answered 400 as net/http answers it; a
// client that never begins its handshake is closed after the handshake timeout; Close ends
// the handshakes still waiting and Accept.
func TestTLSListener(t *testing.T) {
	certFile, keyFile := testutil.CertFiles(t)
	testutil.WriteCert(t, certFile, keyFile, "door")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logged atomic.Int32
	ln := Listen(raw, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}},
		300*time.Millisecond, func(string, ...any) { logged.Add(1) })
	accepted := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		accepted <- err
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		return c
	}
	plain := dial()
	defer plain.Close()
	io.WriteString(plain, "GET / HTTP/1.1\r\nHost: e\r\n\r\n")
	got, _ := io.ReadAll(plain)
	if !strings.HasPrefix(string(got), "HTTP/1.0 400 Bad Request") {
		t.Errorf("plain HTTP to the TLS port read %q", got)
	}
	silent := dial()
	defer silent.Close()
	start := time.Now()
	if _, err := io.ReadAll(silent); err != nil || time.Since(start) > 3*time.Second {
		t.Errorf("a silent client: %v after %v, want closed after the handshake timeout", err, time.Since(start))
	}
	// crypto/tls closes a connection whose handshake context ends, so the client may see
	// the close before the failure is told.
	testutil.Eventually(t, 2*time.Second, "both handshake failures told", func() bool { return logged.Load() == 2 })
	waiting := dial()
	defer waiting.Close()
	ln.Close()
	select {
	case err := <-accepted:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Accept did not return after Close")
	}
	// Closed: at once (its handshake ended by Close, or reset with the listener if it was
	// not accepted yet), not at its read deadline.
	if _, err := io.ReadAll(waiting); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("a client in its handshake at Close was left open")
		}
	}
}
