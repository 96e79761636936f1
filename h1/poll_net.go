package h1

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/fenec/fenec-entry/internal/clock"
)

// netPoll is the portable poller and its sockets (poller.go), built on every system: a
// connection is the *net.TCPConn its listener gave, read and written through Go's netpoller
// with deadlines, and watched by one goroutine of its own (netSock.watch), which waits for it to
// be readable without reading it (syscall.RawConn.Read: its function returning false makes
// Go's netpoller wait) and tells dispatch what came: data, or the end of the stream (the client
// leaving). That goroutine is the price of the portable path: an idle connection holds it
// (its stack, a few KB: docs/DECISIONS.md, "Off Linux") where under epoll it holds none.
//
// What it reports follows epoll's edge-triggered registration (poll_linux.go), so that dispatch
// and the connection's states are the same code for both: data is told once, and told again
// only after the connection was read (a new edge); with evHangup data is not told, the end
// is. The end can only be seen when nothing unread is before it (a peek sees the bytes first),
// as net/http's background read does; epoll's EPOLLRDHUP sees it past them.
//
// A read that waits (transport.Read) and the watcher cannot wait at once (Go's netpoller
// lets one goroutine wait to read a connection): the reader moves the read deadline to the
// past, which ends the watcher's wait (a kick), waits for it to step aside, reads, and lets it
// watch again. A read that does not wait (ReadNow) and a peek (readable) are raw calls beside
// it where the system has non-blocking sockets (net_unix.go). On Windows (net_windows.go) the
// watcher waits with RawRead's zero-byte WSARecv and tells data from the end by FIONREAD, a
// read that does not wait is one under a deadline a millisecond away, and no peek is made.
type netPoll struct {
	srv      *Server
	dispatch func(c *conn, events uint32, last bool) (serve bool)
	// byDeadline: ReadNow, readable and writeNow go through the net.Conn under a deadline a
	// moment away, as on Windows, rather than by raw calls (a test's, on Unix).
	byDeadline bool

	mu     sync.Mutex     // guards closed, and wg's Add against close's Wait
	closed bool           // close was called: no connection is watched from now on
	wg     sync.WaitGroup // the watchers
}

// newNetPoll is the portable poller of s (Server.newPoll).
func newNetPoll(s *Server) (poller, sockets, error) {
	p := &netPoll{srv: s, dispatch: s.dispatch}
	return p, p, nil
}

// netSock is a connection's socket on the portable poller: its net.TCPConn, and the
// goroutine that watches it (watch), with what the two sides (the watcher and the goroutine
// serving the connection) tell each other.
type netSock struct {
	c  *conn
	p  *netPoll
	tc *net.TCPConn
	rc syscall.RawConn

	// The watcher's wait: lookFn is look (net_unix.go, net_windows.go) made once; seen is what
	// it saw; waited is Windows's (its first call returns false, RawRead then waits).
	lookFn func(uintptr) bool
	seen   int
	waited bool

	// The serving goroutine's: its session's deadlines (applied at the next read or write),
	// the write deadline set on tc, and what its raw calls keep (net_unix.go).
	rdl, wdl time.Time
	fdWDL    time.Time
	netRaw

	mu   sync.Mutex // guards the following; cond waits on it
	cond sync.Cond
	// events: what the watcher tells (evRead, evHangup: arm).
	events uint32
	// reading: the serving goroutine reads through tc (Read): the watcher stays out.
	reading bool
	// inWait: the watcher waits in rc.Read (or is about to); kicked: a reader (or remove)
	// moved the read deadline to the past to end that wait, and waits until the watcher
	// clears kicked.
	inWait, kicked bool
	// edge: the watcher saw data and waits for a read before it looks again.
	edge bool
	// done: the socket is closed or handed on: the watcher ends.
	done  bool
	fdRDL time.Time // the read deadline set on tc
}

const (
	seenNothing = iota
	seenData    // bytes to read
	seenEnd     // the end of the stream, or an error a read meets
)

// fromConn makes tc a connection of the server's (not yet accepted). Its socket options are
// net's accept's (TCP_NODELAY, keep-alive).
func (p *netPoll) fromConn(tc *net.TCPConn) (*conn, error) {
	rc, err := tc.SyscallConn()
	if err != nil {
		tc.Close()
		return nil, err
	}
	c := &conn{srv: p.srv, remote: tc.RemoteAddr().String()}
	w := &netSock{c: c, p: p, tc: tc, rc: rc}
	w.cond.L = &w.mu
	w.lookFn = w.look
	w.initRaw()
	c.ns = w
	return c, nil
}

// listen takes connections by ln's Accept.
func (p *netPoll) listen(ln net.Listener) (listener, error) {
	return newConnListener(p.srv, ln), nil
}

// add starts c's watcher.
func (p *netPoll) add(c *conn, events uint32) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errClosed
	}
	p.wg.Add(1)
	p.mu.Unlock()
	c.ns.events = events // before the watcher runs
	go c.ns.watch()
	return nil
}

func (p *netPoll) arm(c *conn, events uint32) error {
	w := c.ns
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return errClosed
	}
	w.events = events
	return nil
}

// remove ends c's watching before its socket is handed on: once it returns, the watcher
// touches the socket no more.
func (p *netPoll) remove(c *conn) {
	w := c.ns
	w.mu.Lock()
	w.done = true
	w.kickLocked()
	w.mu.Unlock()
	w.cond.Broadcast()
}

// release: closing the socket (closeSocket) ends the watcher.
func (p *netPoll) release(*conn) {}

// run has no role to hold: the watchers dispatch. It returns at once.
func (p *netPoll) run() (*conn, error) { return nil, nil }

// close waits for the watchers, which end with their sockets (closed or handed on, by then).
func (p *netPoll) close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// checkProcs: no leader/follower here (a woken connection always goes to a worker: the
// watcher's own goroutine, kept small, serves none).
func (p *netPoll) checkProcs()         {}
func (p *netPoll) leaderServed() int64 { return 0 }

// transport: the netSock is the session's transport, its deadlines none at first.
func (p *netPoll) transport(c *conn, _ *session) transport {
	c.ns.rdl, c.ns.wdl = time.Time{}, time.Time{}
	return c.ns
}

func (p *netPoll) readable(c *conn) bool                   { return c.ns.readable() }
func (p *netPoll) writeNow(c *conn, b []byte) (int, error) { return c.ns.writeNow(b) }

func (p *netPoll) shutWrite(c *conn) { c.ns.tc.CloseWrite() }

// kill closes the socket: Go's net.Conn fails its waiting reads and writes at once, and
// closes the descriptor only once none is under way.
func (p *netPoll) kill(c *conn) { c.ns.close() }

func (p *netPoll) closeSocket(c *conn) { c.ns.close() }

// netConn gives the connection's own net.TCPConn, its deadlines cleared (remove has ended the
// watching).
func (p *netPoll) netConn(c *conn) (*net.TCPConn, error) {
	tc := c.ns.tc
	if err := tc.SetDeadline(time.Time{}); err != nil {
		tc.Close()
		return nil, err
	}
	return tc, nil
}

func (w *netSock) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
	w.cond.Broadcast()
	w.tc.Close()
}

// kickLocked ends the watcher's wait in rc.Read, if it waits, and waits until it has left it;
// with w.mu held.
func (w *netSock) kickLocked() {
	if !w.inWait {
		return
	}
	w.kicked = true
	w.tc.SetReadDeadline(aLongTimeAgo)
	w.fdRDL = aLongTimeAgo
	for w.kicked {
		w.cond.Wait()
	}
}

// watch is the connection's watcher: until the socket is closed or handed on, or the client
// has left, it waits for the socket to be readable and tells dispatch (edge-triggered, as
// epoll: see netPoll).
func (w *netSock) watch() {
	defer w.p.wg.Done()
	for {
		w.mu.Lock()
		for !w.done && (w.reading || w.edge) {
			w.cond.Wait()
		}
		if w.done {
			w.mu.Unlock()
			return
		}
		w.inWait = true
		if !w.fdRDL.IsZero() { // a reader's: the watcher waits without one
			w.tc.SetReadDeadline(time.Time{})
			w.fdRDL = time.Time{}
		}
		w.mu.Unlock()

		w.seen, w.waited = seenNothing, false
		err := w.rc.Read(w.lookFn)
		seen := w.seen

		w.mu.Lock()
		w.inWait = false
		if w.kicked {
			w.kicked = false
			w.mu.Unlock()
			w.cond.Broadcast()
			continue
		}
		switch {
		case w.done || errors.Is(err, net.ErrClosed):
			w.mu.Unlock()
			return
		case errors.Is(err, os.ErrDeadlineExceeded): // no kick's: look again
			w.mu.Unlock()
			continue
		case err != nil: // Windows: a reset meets the zero-byte read
			seen = seenEnd
		}
		w.edge = true
		tell := seen == seenEnd || w.events&evIn != 0
		w.mu.Unlock()
		switch {
		case seen == seenEnd:
			// The client left (or the socket failed): nothing more can come, and no other
			// event is told.
			w.p.dispatch(w.c, evIn|evRDHup, false)
			return
		case tell:
			w.p.dispatch(w.c, evIn, false)
		}
	}
}

// Read reads into p as net.Conn's Read does, waiting for data, the end (io.EOF) or the read
// deadline. The watcher steps aside while it waits (a kick).
func (w *netSock) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if nonBlocking && !w.p.byDeadline {
		// What is there is read beside the watcher, without a kick.
		if n, err := w.readNow(p); err != errWouldBlock {
			return n, err
		}
	}
	w.mu.Lock()
	w.reading = true
	w.kickLocked()
	if !w.fdRDL.Equal(w.rdl) {
		w.tc.SetReadDeadline(w.rdl)
		w.fdRDL = w.rdl
	}
	w.mu.Unlock()
	n, err := w.tc.Read(p)
	w.readDone(false)
	return n, err
}

// ReadNow is Read without the wait: errWouldBlock when nothing can be read at once.
func (w *netSock) ReadNow(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return w.readNow(p)
}

// readDone ends a read, or a look that found the socket empty: what the watcher saw is
// gone, and it looks again (a new edge). beside: the read did not stop the watcher (a raw
// one, made beside its wait).
func (w *netSock) readDone(beside bool) {
	w.mu.Lock()
	if !beside {
		w.reading = false
	}
	w.edge = false
	w.mu.Unlock()
	w.cond.Broadcast()
}

// readByDeadline is ReadNow by a read under a deadline a moment away (Windows has no
// non-blocking read of a socket Go's netpoller holds): what the socket has is read at once,
// and when it has nothing the read gives up after nowWait.
func (w *netSock) readByDeadline(p []byte) (int, error) {
	w.mu.Lock()
	w.reading = true
	w.kickLocked()
	w.fdRDL = clock.System.Now().Add(nowWait)
	w.tc.SetReadDeadline(w.fdRDL)
	w.mu.Unlock()
	n, err := w.tc.Read(p)
	w.readDone(false)
	if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, errWouldBlock
	}
	return n, err
}

// writeByDeadline is writeNow by a write under a deadline a moment away.
func (w *netSock) writeByDeadline(p []byte) (int, error) {
	w.fdWDL = clock.System.Now().Add(nowWait)
	w.tc.SetWriteDeadline(w.fdWDL)
	return w.tc.Write(p)
}

// nowWait is how long a read or write "now" waits where it cannot be made without waiting
// (readByDeadline, writeByDeadline).
const nowWait = time.Millisecond

// Write writes all of p as net.Conn's Write does, waiting for room until the write deadline.
func (w *netSock) Write(p []byte) (int, error) {
	if !w.fdWDL.Equal(w.wdl) {
		w.tc.SetWriteDeadline(w.wdl)
		w.fdWDL = w.wdl
	}
	return w.tc.Write(p)
}

// SetReadDeadline and SetWriteDeadline are net.Conn's, for the request being served.
func (w *netSock) SetReadDeadline(t time.Time)  { w.rdl = t }
func (w *netSock) SetWriteDeadline(t time.Time) { w.wdl = t }
