package h1

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/fenec/fenec-entry/door"
)

// HTTPS is served as plain HTTP/1.x is, by the same connection's serve and the same request
// path: crypto/tls's Conn runs over the connection's own socket (tlsSock), and a TLS
// connection waiting for its next request is parked like any other. Two things make
// that work with a tls.Conn, which is written for a blocking net.Conn:
//
//   - "Nothing to read yet" reaches it as a temporary net.Error (errWouldBlock), which
//     crypto/tls gives back without keeping it (a permanent error it would return forever
//     after): a read of the connection can then be tried without waiting (ReadNow), as the
//     plain path's can.
//   - crypto/tls reads ahead: one read of the socket may bring the next request's records
//     too, and they wait in the tls.Conn where the poller cannot see them. So before a TLS
//     connection parks, it is read once without waiting (tlsHolds): only when that finds
//     nothing is everything the client sent still in the socket, and its next bytes wake it.
//
// The handshake is made on the connection's first wake, on the goroutine serving it, within
// ReadHeaderTimeout of the accept (as the door's handshakes for net/http are). A connection
// that negotiated h2 (ALPN) is handed to Fallback as the *tls.Conn it is.

// tlsState is what a TLS connection keeps between its requests.
type tlsState struct {
	tc    *tls.Conn
	sock  tlsSock
	state *tls.ConnectionState // after the handshake: each request's Request.TLS
}

func newTLSState(c *conn) *tlsState {
	t := &tlsState{sock: tlsSock{c: c}}
	t.tc = tls.Server(&t.sock, c.srv.TLSConfig)
	return t
}

// tlsSock is the net.Conn under a connection's tls.Conn: its socket read and written through
// the session's transport while the connection is served, and after a hand-off the net.Conn
// Fallback serves.
type tlsSock struct {
	c   *conn
	io  transport // the session's socket (session.sock), while c is served; nil while it is parked
	now bool      // a read returns errWouldBlock rather than wait (tlsIO.ReadNow)
	nc  net.Conn  // c's socket after the hand-off (handOff), once c is Fallback's
}

func (s *tlsSock) Read(p []byte) (int, error) {
	switch {
	case s.nc != nil:
		return s.nc.Read(p)
	case s.io == nil: // parked: no reader
		return 0, errWouldBlock
	case s.now:
		return s.io.ReadNow(p)
	}
	return s.io.Read(p)
}

// Write writes p. A parked connection has no session: what crypto/tls writes then is the
// close_notify alert of a connection being closed (the sweeper's, closeIdle's), written once
// without waiting, as a socket with room takes it.
func (s *tlsSock) Write(p []byte) (int, error) {
	switch {
	case s.nc != nil:
		return s.nc.Write(p)
	case s.io != nil:
		return s.io.Write(p)
	}
	return s.c.srv.sock.writeNow(s.c, p)
}

// Close closes the hand-off's net.Conn; c's own socket is c's to close (conn.close).
func (s *tlsSock) Close() error {
	if s.nc != nil {
		return s.nc.Close()
	}
	return nil
}

func (s *tlsSock) LocalAddr() net.Addr {
	if s.nc != nil {
		return s.nc.LocalAddr()
	}
	return nil
}

func (s *tlsSock) RemoteAddr() net.Addr {
	if s.nc != nil {
		return s.nc.RemoteAddr()
	}
	return remoteAddr(s.c.remote)
}

func (s *tlsSock) SetDeadline(t time.Time) error {
	s.SetReadDeadline(t)
	return s.SetWriteDeadline(t)
}

func (s *tlsSock) SetReadDeadline(t time.Time) error {
	if s.nc != nil {
		return s.nc.SetReadDeadline(t)
	}
	if s.io != nil {
		s.io.SetReadDeadline(t)
	}
	return nil
}

func (s *tlsSock) SetWriteDeadline(t time.Time) error {
	if s.nc != nil {
		return s.nc.SetWriteDeadline(t)
	}
	if s.io != nil {
		s.io.SetWriteDeadline(t)
	}
	return nil
}

// remoteAddr is the client's address (conn.remote) as a net.Addr, for crypto/tls's errors.
func remoteAddr(s string) net.Addr {
	a, err := net.ResolveTCPAddr("tcp", s)
	if err != nil {
		return nil
	}
	return a
}

// tlsIO is a TLS connection's transport for its session: the tls.Conn, whose socket is the
// session's (session.sock).
type tlsIO struct {
	t  *tlsState
	io transport
}

func (t *tlsIO) Read(p []byte) (int, error) { return t.t.tc.Read(p) }

// ReadNow reads what the tls.Conn holds or the socket has, without waiting: errWouldBlock
// when neither gives a byte of the stream.
func (t *tlsIO) ReadNow(p []byte) (int, error) {
	t.t.sock.now = true
	n, err := t.t.tc.Read(p)
	t.t.sock.now = false
	return n, err
}

func (t *tlsIO) Write(p []byte) (int, error)  { return t.t.tc.Write(p) }
func (t *tlsIO) SetReadDeadline(d time.Time)  { t.io.SetReadDeadline(d) }
func (t *tlsIO) SetWriteDeadline(d time.Time) { t.io.SetWriteDeadline(d) }

// handshake makes c's TLS handshake (c.tls is new, ss its session), by until (Unix ns; 0:
// none). ok: c serves HTTP/1.x; handedOff: it negotiated h2 and is Fallback's. Neither: it
// failed (told to HandshakeLog) and c is to be closed.
func (c *conn) handshake(ss *session, until int64) (ok, handedOff bool) {
	s := c.srv
	if until != 0 {
		d := time.Unix(0, until)
		ss.sock.SetReadDeadline(d)
		ss.sock.SetWriteDeadline(d)
	}
	t := c.tls
	if err := t.tc.Handshake(); err != nil {
		door.AnswerFailedHandshake(err)
		if s.HandshakeLog != nil {
			s.HandshakeLog("TLS handshake from %s: %v", c.remote, err)
		}
		return false, false
	}
	ss.sock.SetReadDeadline(time.Time{})
	ss.sock.SetWriteDeadline(time.Time{})
	st := t.tc.ConnectionState()
	t.state = &st
	if st.NegotiatedProtocol != "h2" {
		return true, false
	}
	if s.Fallback == nil {
		return false, false
	}
	putSession(ss) // the socket is the hand-off's from now on
	nc := c.handOff()
	if nc == nil {
		return false, true // closed
	}
	t.sock.nc = s.holdHanded(nc)
	s.Fallback(t.tc)
	return false, true
}

// tlsHolds reports, for a TLS connection about to park, whether its tls.Conn holds what the
// client sent (read ahead with the last request): read once without waiting, into br. False:
// nothing there, and the socket is empty, so the client's next bytes wake the connection.
func (ss *session) tlsHolds() bool {
	ss.lr.idleOK, ss.lr.got, ss.lr.headTimeout = true, 0, 0
	_, err := ss.br.Peek(1)
	ss.lr.idleOK = false
	return err != errNothingYet // data, or what the next read meets (the end, an error)
}
