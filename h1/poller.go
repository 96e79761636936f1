package h1

import (
	"errors"
	"net"
)

// The server's connections are watched by a poller, and their sockets handled by its sockets,
// two small interfaces with one implementation each per kind of socket:
//
//   - epoll over bare file descriptors (poll_linux.go, sock_linux.go): Linux's, and its
//     default. An idle connection holds no goroutine and no runtime poll descriptor.
//   - Go's netpoller over net.Conns (poll_net.go): built everywhere, the default elsewhere. A
//     connection it watches holds one goroutine, waiting for its socket to be readable.
//
// Everything else (the accept loop, dispatch's state machine, sessions, TLS, the bound on
// connections) is the same code for both. A test chooses the poller (Server.newPoll).

// poller watches the server's connections: an idle one for its next request, a busy one for the
// client leaving (or more bytes: a body, a pipelined request), and tells dispatch of each event
// with the bits below.
type poller interface {
	// add watches c, new and idle, for events (evRead).
	add(c *conn, events uint32) error
	// arm changes what c is watched for: evRead (a request, or the client leaving) or evHangup
	// (busy, and data came twice: the client leaving only). errClosed once c is released.
	arm(c *conn, events uint32) error
	// remove stops watching c for good, before its socket is handed on (sockets.netConn).
	remove(c *conn)
	// release forgets c, whose socket is being closed.
	release(c *conn)
	// run holds the poller's role (Server.poll1) until it hands it on with a woken connection to
	// serve, which it returns; nil once the poller is closed, or has no role to hold (err: it
	// failed, and wakes no connection again).
	run() (*conn, error)
	// close ends run; its watching ends with the connections' sockets.
	close() error
	// checkProcs notes whether GOMAXPROCS is 1 (no leader/follower then).
	checkProcs()
	// leaderServed is how many connections run returned (Server.LeaderServed).
	leaderServed() int64
}

// sockets is what the server does with its connections' sockets, other than a session's reads
// and writes (transport): take them from a listener, look, half-close, close, and hand one on.
type sockets interface {
	// listen makes of ln what the accept loop takes connections from.
	listen(ln net.Listener) (listener, error)
	// fromConn makes tc, from a listener whose connections are net.Conns, a connection of the
	// server's, not yet accepted (Server.accept).
	fromConn(tc *net.TCPConn) (*conn, error)
	// transport is c's socket as session ss reads and writes it (ss.sock), from now until ss
	// is put back (putSession).
	transport(c *conn, ss *session) transport
	// readable reports whether a read of c would not wait: data, the end, or an error. It does
	// not wait, and reads nothing.
	readable(c *conn) bool
	// writeNow writes p to c without waiting for room (a parked TLS connection's
	// close_notify, as it is closed).
	writeNow(c *conn, p []byte) (int, error)
	// shutWrite closes c's side of the stream, its socket still open.
	shutWrite(c *conn)
	// kill makes c's reads and writes fail from now on, at once for one waiting (Close); c.mu
	// held, c's socket not closed yet.
	kill(c *conn)
	// closeSocket closes c's socket; by c's owner, once.
	closeSocket(c *conn)
	// netConn gives c's socket, removed from the poller, as a net.TCPConn of its own; c's
	// socket is closed, or given, either way no longer c's.
	netConn(c *conn) (*net.TCPConn, error)
}

// listener is what the accept loop takes connections from (sockets.listen).
type listener interface {
	// accept waits for a connection and hands it to the server (Server.accept, or Fallback),
	// once there is room for it (Server.waitRoom); the error is accept's.
	accept() error
	// takeQueued serves the connections waiting in the listen backlog, without waiting for
	// more, before Shutdown closes the listener (which would reset them).
	takeQueued()
	// close closes what the listener holds of its own, not the net.Listener it was made of.
	close()
}

// What a poller reports to dispatch, and is armed with: epoll's bits (poll_linux.go checks the
// values), which the portable poller uses as they are.
const (
	evIn    = 0x1        // EPOLLIN: data, or the end of the stream
	evOut   = 0x4        // EPOLLOUT: room to write
	evErr   = 0x8        // EPOLLERR
	evHup   = 0x10       // EPOLLHUP
	evRDHup = 0x2000     // EPOLLRDHUP: the client closed its side
	evET    = 0x80000000 // EPOLLET: edge-triggered
)

// Both registrations also wait for room to write (EPOLLOUT), for a goroutine whose write met a
// full socket: edge-triggered, that event comes only after such a write (the kernel signals
// room only to a socket that ran out of it), and rides along with the others.
const (
	evRead    = evIn | evOut | evRDHup | evET // a request, or the client leaving
	evHangup  = evOut | evRDHup | evET        // busy, data came: only the client leaving
	evGoneSet = evRDHup | evHup | evErr
)

var errClosed = errors.New("h1: connection closed")

// errWouldBlock is ReadNow's when the socket has nothing to read yet: a temporary net.Error,
// which crypto/tls gives back without keeping it (tls.go).
var errWouldBlock error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "h1: nothing to read yet" }
func (wouldBlock) Timeout() bool   { return false }
func (wouldBlock) Temporary() bool { return true }

// opError shapes err as net.Conn's errors are (isCommonNetReadError knows them).
func opError(op string, err error) error { return &net.OpError{Op: op, Net: "tcp", Err: err} }
