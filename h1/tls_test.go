package h1

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// testTLS is a server config with a fresh certificate, and a client config that trusts it.
func testTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	certFile, keyFile := testutil.CertFiles(t)
	cert := testutil.WriteCert(t, certFile, keyFile, "h1-test")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2", "http/1.1"}}
	client = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}}
	return server, client
}

// dialTLS makes a TLS connection to addr with cfg, its handshake done.
func dialTLS(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	raw, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(raw, cfg)
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// HTTPS/1.1 is served by h1: request after request on one connection, parked between them,
// each handler given the connection's TLS state.
func TestTLSKeepAliveAfterParking(t *testing.T) { eachPoller(t, testTLSKeepAliveAfterParking) }

func testTLSKeepAliveAfterParking(t *testing.T, pk testPoller) {
	srvCfg, cliCfg := testTLS(t)
	addr := pk.start(t, &Server{TLSConfig: srvCfg, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || !r.TLS.HandshakeComplete || r.TLS.NegotiatedProtocol != "http/1.1" {
			t.Errorf("Request.TLS = %+v", r.TLS)
		}
		io.WriteString(w, r.URL.Path)
	})})
	c, br := dialTLS(t, addr, cliCfg)
	for i, p := range []string{"/a", "/b", "/c"} {
		if i > 0 {
			time.Sleep(20 * time.Millisecond) // parked meanwhile
		}
		resp := get(t, c, br, p)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != p {
			t.Errorf("GET %s answered %d %q", p, resp.StatusCode, b)
		}
	}
}

// batchConn holds what is written to it from its holdFrom-th write (counting from 1; 0:
// none) or once hold is set, until flush, which sends it in one write: records the client
// writes one by one reach the server in one segment.
type batchConn struct {
	net.Conn
	hold     bool
	holdFrom int
	writes   int
	buf      bytes.Buffer
}

func (b *batchConn) Write(p []byte) (int, error) {
	b.writes++
	if b.hold || b.holdFrom > 0 && b.writes >= b.holdFrom {
		return b.buf.Write(p)
	}
	return b.Conn.Write(p)
}

func (b *batchConn) flush() error {
	b.hold, b.holdFrom = false, 0
	_, err := b.Conn.Write(b.buf.Bytes())
	return err
}

// Two requests in two TLS records that arrive together: crypto/tls reads both records from
// the socket at once and hands on the first, so the second waits in the tls.Conn where epoll
// cannot see it. It is served all the same (tlsHolds), not left until the client gives up.
func TestTLSRecordsReadAhead(t *testing.T) { eachPoller(t, testTLSRecordsReadAhead) }

func testTLSRecordsReadAhead(t *testing.T, pk testPoller) {
	srvCfg, cliCfg := testTLS(t)
	addr := pk.start(t, &Server{TLSConfig: srvCfg, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Path)
	})})
	raw, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	bc := &batchConn{Conn: raw}
	c := tls.Client(bc, cliCfg)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	bc.hold = true
	io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: e\r\n\r\n") // a record each
	io.WriteString(c, "GET /2 HTTP/1.1\r\nHost: e\r\n\r\n")
	if err := bc.flush(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for _, want := range []string{"/1", "/2"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer to %s: %v", want, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != want {
			t.Errorf("answer %q, want %q", b, want)
		}
	}
}

// The first request sent in one segment with the client's Finished, which the handshake
// reads together with it, is served too.
func TestTLSRequestWithTheFinished(t *testing.T) { eachPoller(t, testTLSRequestWithTheFinished) }

func testTLSRequestWithTheFinished(t *testing.T, pk testPoller) {
	srvCfg, cliCfg := testTLS(t)
	addr := pk.start(t, &Server{TLSConfig: srvCfg, Handler: http.HandlerFunc(okHandler)})
	raw, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// A TLS 1.3 client writes its ClientHello, then its Finished, and waits for nothing
	// after it: everything from its second write is held for one segment.
	bc := &batchConn{Conn: raw, holdFrom: 2}
	cliCfg.MinVersion = tls.VersionTLS13
	c := tls.Client(bc, cliCfg)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: e\r\n\r\n")
	if bc.writes < 3 {
		t.Fatalf("%d writes: the Finished was not held", bc.writes)
	}
	if err := bc.flush(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Errorf("answer %d", resp.StatusCode)
	}
}

// A connection that negotiates h2 goes to Fallback as a *tls.Conn, its handshake done; what
// Fallback writes on it reaches the client.
func TestTLSH2GoesToFallback(t *testing.T) { eachPoller(t, testTLSH2GoesToFallback) }

func testTLSH2GoesToFallback(t *testing.T, pk testPoller) {
	srvCfg, cliCfg := testTLS(t)
	got := make(chan net.Conn, 1)
	addr := pk.start(t, &Server{TLSConfig: srvCfg, Handler: http.HandlerFunc(okHandler),
		Fallback: func(c net.Conn) { got <- c }})
	cliCfg.NextProtos = []string{"h2"}
	c, br := dialTLS(t, addr, cliCfg)
	var fc net.Conn
	select {
	case fc = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("Fallback was not given the connection")
	}
	defer fc.Close()
	tc, ok := fc.(*tls.Conn)
	if !ok {
		t.Fatalf("Fallback was given a %T, want *tls.Conn", fc)
	}
	if st := tc.ConnectionState(); !st.HandshakeComplete || st.NegotiatedProtocol != "h2" {
		t.Fatalf("state %+v", st)
	}
	if tc.RemoteAddr() == nil || tc.RemoteAddr().String() != c.LocalAddr().String() {
		t.Errorf("RemoteAddr %v, want %v", tc.RemoteAddr(), c.LocalAddr())
	}
	tc.SetDeadline(time.Now().Add(5 * time.Second))
	go io.WriteString(c, "ping")
	b := make([]byte, 4)
	if _, err := io.ReadFull(tc, b); err != nil || string(b) != "ping" {
		t.Fatalf("Fallback read %q, %v", b, err)
	}
	io.WriteString(tc, "pong")
	if _, err := io.ReadFull(br, b); err != nil || string(b) != "pong" {
		t.Fatalf("client read %q, %v", b, err)
	}
}

// Plain HTTP sent to the TLS listener is answered 400 in the clear, as net/http does, and the
// failed handshake is told to HandshakeLog.
func TestTLSPlainHTTPAnswered400(t *testing.T) { eachPoller(t, testTLSPlainHTTPAnswered400) }

func testTLSPlainHTTPAnswered400(t *testing.T, pk testPoller) {
	srvCfg, _ := testTLS(t)
	logged := make(chan string, 1)
	addr := pk.start(t, &Server{TLSConfig: srvCfg, Handler: http.HandlerFunc(okHandler),
		HandshakeLog: func(format string, args ...any) {
			select {
			case logged <- format:
			default:
			}
		}})
	c, br := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: e\r\n\r\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.0 400 Bad Request\r\n" {
		t.Fatalf("answer %q, %v", line, err)
	}
	select {
	case f := <-logged:
		if !strings.Contains(f, "TLS handshake") {
			t.Errorf("logged %q", f)
		}
	case <-time.After(2 * time.Second):
		t.Error("the failed handshake was not logged")
	}
}

// A handshake must end within ReadHeaderTimeout of the accept: a client that sends nothing, or
// half a ClientHello, is closed then.
func TestTLSHandshakeTimeout(t *testing.T) { eachPoller(t, testTLSHandshakeTimeout) }

func testTLSHandshakeTimeout(t *testing.T, pk testPoller) {
	srvCfg, _ := testTLS(t)
	addr := pk.start(t, &Server{TLSConfig: srvCfg, Handler: http.HandlerFunc(okHandler),
		ReadHeaderTimeout: 200 * time.Millisecond, IdleTimeout: time.Hour})
	t.Run("silent", func(t *testing.T) {
		_, br := dial(t, addr)
		closedSoon(t, br, "read a byte from a silent connection")
	})
	t.Run("half a ClientHello", func(t *testing.T) {
		c, br := dial(t, addr)
		c.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}) // a record header, then one byte of 512
		closedSoon(t, br, "read a byte from a stalled handshake")
	})
}

// recordConn notes the type of every TLS record it reads.
type recordConn struct {
	net.Conn
	mu    sync.Mutex
	buf   []byte
	types []byte
}

func (r *recordConn) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.mu.Lock()
	r.buf = append(r.buf, p[:n]...)
	for len(r.buf) >= 5 {
		l := 5 + (int(r.buf[3])<<8 | int(r.buf[4]))
		if len(r.buf) < l {
			break
		}
		r.types = append(r.types, r.buf[0])
		r.buf = r.buf[l:]
	}
	r.mu.Unlock()
	return n, err
}

// An idle TLS connection closed at the idle timeout gets a close_notify alert before the end
// of the stream (seen in the clear with TLS 1.2: record type 21), as nginx sends one.
func TestTLSIdleCloseSendsCloseNotify(t *testing.T) { eachPoller(t, testTLSIdleCloseSendsCloseNotify) }

func testTLSIdleCloseSendsCloseNotify(t *testing.T, pk testPoller) {
	srvCfg, cliCfg := testTLS(t)
	addr := pk.start(t, &Server{TLSConfig: srvCfg, Handler: http.HandlerFunc(okHandler),
		IdleTimeout: 100 * time.Millisecond})
	raw, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rc := &recordConn{Conn: raw}
	cliCfg.MaxVersion = tls.VersionTLS12
	c := tls.Client(rc, cliCfg)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	resp := get(t, c, br, "/")
	io.Copy(io.Discard, resp.Body)
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("read after the idle timeout: %v, want io.EOF", err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if n := len(rc.types); n == 0 || rc.types[n-1] != 21 {
		t.Errorf("records read %v: the last is not an alert (21)", rc.types)
	}
}

// A TLS connection made in the drain is answered: after its handshake it parks for its first
// request, as a new plain connection waits for its own, and is not closed there as a
// kept-alive one would be. Closing it left 70 of 85 HTTPS connections made in a SIGTERM drain
// with an empty reply, and 22-25 of about 1,020 HTTPS requests failed in each upgrade.
func TestTLSNewConnectionServedThroughTheDrain(t *testing.T) {
	eachPoller(t, testTLSNewConnectionServedThroughTheDrain)
}

func testTLSNewConnectionServedThroughTheDrain(t *testing.T, pk testPoller) {
	srvCfg, cliCfg := testTLS(t)
	s := &Server{TLSConfig: srvCfg, Handler: http.HandlerFunc(okHandler), ReadHeaderTimeout: 5 * time.Second}
	addr := pk.start(t, s)
	s.StopKeepAlives()
	for i := range 3 {
		c, br := dialTLS(t, addr, cliCfg)
		if i > 0 { // the request a moment after the handshake: the connection has parked
			time.Sleep(20 * time.Millisecond)
		}
		resp := get(t, c, br, "/")
		if body, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(body) != "ok" || !resp.Close {
			t.Errorf("connection %d in the drain: %d %q close=%v; want 200 ok with Connection: close", i, resp.StatusCode, body, resp.Close)
		}
	}
}
