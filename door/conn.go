package door

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/fenec/fenec-entry/internal/clock"
)

// Conn is a client connection read through a Reader, for a server (net/http's) that parses
// what it reads: the server sees only requests the door let in, and the stand-ins of those it
// refused. After a refusal, Close lets the client read its answer first (lingering).
type Conn struct {
	net.Conn
	rd Reader
}

// NewConn returns c read through the door. A *tls.Conn keeps its ConnectionState, which
// net/http reads for Request.TLS.
func NewConn(c net.Conn) net.Conn {
	dc := &Conn{Conn: c}
	dc.rd.Reset(c, true)
	if tc, ok := c.(*tls.Conn); ok {
		return &tlsConn{Conn: dc, tc: tc}
	}
	return dc
}

func (c *Conn) Read(p []byte) (int, error) { return c.rd.Read(p) }

// CloseWrite shuts the connection's write side when it has one (a TCP or TLS connection), as
// net/http does before it closes one whose client may still be sending.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close closes the connection. After a refusal, the client may still be sending what was
// refused, and closing with unread data sends a reset that can reach the client before the
// answer: so the write side is closed first, and what comes is read and dropped for up to
// lingerTime (net/http's rstAvoidanceDelay) or lingerBytes.
func (c *Conn) Close() error {
	if c.rd.Refused() {
		linger(c.Conn)
	}
	return c.Conn.Close()
}

const (
	lingerTime  = 500 * time.Millisecond
	lingerBytes = 256 << 10
)

func linger(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite() // the FIN after the answer
	}
	c.SetReadDeadline(clock.System.Now().Add(lingerTime))
	io.Copy(io.Discard, io.LimitReader(c, lingerBytes))
}

type tlsConn struct {
	*Conn
	tc *tls.Conn
}

func (c *tlsConn) ConnectionState() tls.ConnectionState { return c.tc.ConnectionState() }

// Listen returns ln with every connection it accepts read through the door (NewConn).
//
// With tlsConfig, it also terminates TLS, each handshake in a goroutine of its own that
// handshakeTimeout bounds (0: none), so that a slow client holds up no other: a connection
// that negotiated h2 (ALPN) is handed on as the *tls.Conn it is (HTTP/2 frames its own
// requests, and net/http serves it as HTTP/2 only when it sees one), any other through the
// door. tlsConfig should offer "h2" and "http/1.1" (NextProtos). A failed handshake is told
// to logf, if set; one that was plain HTTP is answered 400, as net/http does.
func Listen(ln net.Listener, tlsConfig *tls.Config, handshakeTimeout time.Duration, logf func(format string, args ...any)) net.Listener {
	if tlsConfig == nil {
		return &listener{Listener: ln}
	}
	l := &tlsListener{Listener: ln, cfg: tlsConfig, timeout: handshakeTimeout, logf: logf,
		ready: make(chan net.Conn), errs: make(chan error), done: make(chan struct{}),
		pending: map[net.Conn]struct{}{}}
	l.wg.Go(l.acceptLoop)
	return l
}

type listener struct{ net.Listener }

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return NewConn(c), nil
}

type tlsListener struct {
	net.Listener
	cfg     *tls.Config
	timeout time.Duration
	logf    func(string, ...any)
	ready   chan net.Conn // handshaken connections
	errs    chan error    // the listener's errors, for Accept
	done    chan struct{} // closed by Close
	once    sync.Once
	wg      sync.WaitGroup

	mu      sync.Mutex // guards pending
	pending map[net.Conn]struct{}
}

func (l *tlsListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close closes the listener and every connection still in its handshake, and waits for
// their goroutines.
func (l *tlsListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.Listener.Close()
		l.mu.Lock()
		for c := range l.pending {
			c.Close()
		}
		l.mu.Unlock()
		l.wg.Wait()
	})
	return err
}

func (l *tlsListener) acceptLoop() {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case l.errs <- err:
			case <-l.done:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// As net/http's Serve after a temporary error: a pause, doubling to 1 s.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(delay):
			case <-l.done:
				return
			}
			continue
		}
		delay = 0
		l.mu.Lock()
		select {
		case <-l.done:
			l.mu.Unlock()
			c.Close()
			return
		default:
		}
		l.pending[c] = struct{}{}
		l.mu.Unlock()
		l.wg.Go(func() { l.handshake(c) })
	}
}

func (l *tlsListener) handshake(c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok { // handshaken by a server before this one (h1's, for h2)
		l.mu.Lock()
		delete(l.pending, c)
		l.mu.Unlock()
		l.deliver(doorOrH2(tc))
		return
	}
	tc := tls.Server(c, l.cfg)
	ctx := context.Background()
	if l.timeout > 0 {
		c.SetDeadline(clock.System.Now().Add(l.timeout))
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	err := tc.HandshakeContext(ctx)
	l.mu.Lock()
	delete(l.pending, c)
	l.mu.Unlock()
	if err != nil {
		AnswerFailedHandshake(err)
		if l.logf != nil {
			l.logf("TLS handshake from %s: %v", c.RemoteAddr(), err)
		}
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	l.deliver(doorOrH2(tc))
}

// doorOrH2 is tc as the server is to read it: through the door, or as it is if it negotiated
// h2 (HTTP/2 frames its own requests).
func doorOrH2(tc *tls.Conn) net.Conn {
	if tc.ConnectionState().NegotiatedProtocol == "h2" {
		return tc
	}
	return NewConn(tc)
}

// deliver gives c to the next Accept, or closes it once the listener is closed.
func (l *tlsListener) deliver(c net.Conn) {
	select {
	case l.ready <- c:
	case <-l.done:
		c.Close()
	}
}

// AnswerFailedHandshake answers a TLS handshake that failed with err as net/http does: one
// that was plain HTTP (a method's first bytes where a TLS record should start) is told 400
// in the clear. Any other is not answered.
func AnswerFailedHandshake(err error) {
	var re tls.RecordHeaderError
	if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
		io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
	}
}

// looksLikeHTTP is net/http's tlsRecordHeaderLooksLikeHTTP: a method's first bytes.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}
