package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenec/fenec-entry/door"
	"github.com/fenec/fenec-entry/internal/clock"
	"github.com/fenec/fenec-entry/internal/httpsyntax"
)

// Server serves HTTP/1.x on TCP connections, plain or (with TLSConfig) over TLS, with an
// http.Handler. A connection waiting for its next request holds no buffer of the server's:
// it is parked with the poller and picked up when the client sends (on Linux, in an epoll
// instance, holding no goroutine either; elsewhere watched by one goroutine: poller.go).
// Connections that are not HTTP/1.x (an HTTP/2 preface, or h2 negotiated over TLS) or not
// TCP are handed to Fallback.
//
// Unlike net/http's, the Request a handler is given is not its to keep: once the handler has
// returned, h1 reads the connection's next request into the same header map, URL and values
// (readPlainInto). A handler that hands the Request, its Header or its URL to something that
// outlives it must copy them (the proxy keeps none).
type Server struct {
	Handler           http.Handler
	ReadHeaderTimeout time.Duration // from the first byte of a request to the end of its head; 0: none
	IdleTimeout       time.Duration // an idle connection is closed after this; 0: never
	// Fallback serves a connection this server does not: one that starts with the HTTP/2
	// preface (its first bytes replayed by the net.Conn given), or that is not a TCP
	// connection. Nil: such connections are closed.
	Fallback func(net.Conn)
	// ErrorLog, if set, is told of a handler's panic (other than http.ErrAbortHandler).
	ErrorLog func(msg string)
	// TLSConfig, if set, makes every TCP connection a TLS one (tls.go): its handshake is
	// made within ReadHeaderTimeout of the accept, and one that negotiates h2 is given to
	// Fallback as its *tls.Conn, handshaken. It should offer "h2" only with a Fallback that
	// serves HTTP/2, and "http/1.1". A connection that is not TCP goes to Fallback as it
	// came, before any handshake.
	TLSConfig *tls.Config
	// HandshakeLog, if set, is told of each failed TLS handshake.
	HandshakeLog func(format string, args ...any)
	// MaxConns bounds the connections held at once, those handed to Fallback included (0:
	// none). At the bound the kept-alive connections idle longest are closed, a few at a
	// time (at most ShedBatch); only when none is idle does the accept loop wait (new
	// connections wait in the listen backlog) until one closes or parks (limit.go).
	MaxConns int
	// AcceptLog, if set, is told once when accepting starts to fail for want of descriptors
	// (EMFILE and the like: the accept loop then sheds idle connections and retries, backing
	// off up to 100 ms while none can be shed), and once when an accept succeeds again.
	AcceptLog func(msg string, err error)

	// newPoll makes the poller and its sockets (poller.go); nil: the system's (defaultPoll). A
	// test chooses: the portable poller on Linux, or epoll with system calls that count or fail.
	newPoll func(*Server) (poller, sockets, error)

	mu       sync.Mutex // guards the following fields
	poll     poller     // set once, by the first Serve: read without mu by connections
	sock     sockets    // the same
	ln       net.Listener
	lis      listener // what the accept loop takes ln's connections from (sockets.listen)
	conns    map[*conn]struct{}
	shutdown bool
	closed   bool          // Close was called: nothing more is served
	pollErr  error         // the poller died of it (poll1); Serve returns it
	done     chan struct{} // closed when the last connection is gone after Shutdown

	down   atomic.Bool    // shutdown, readable without mu on every answer
	noKeep atomic.Bool    // StopKeepAlives was called
	wg     sync.WaitGroup // the poller's and the sweeper's goroutines
	// stopSweep, closed, stops the sweeper; expired is its list, kept between sweeps.
	stopSweep chan struct{}
	expired   []*conn
	work      workers // the goroutines that serve woken connections

	held    atomic.Int64  // connections held (Held)
	shed    atomic.Int64  // idle connections closed to make room (Shed)
	starved atomic.Bool   // the accept loop waits for room (waitRoom)
	room    chan struct{} // wakes it: a connection closed or parked
}

// IdleWorkers is how many goroutines wait to serve the next woken connection (at most
// MaxIdleWorkers).
func (s *Server) IdleWorkers() int { return s.work.idleCount() }

// LeaderServed is how many woken connections the poller's own goroutine served, having handed
// its role on (leader/follower: the request then waits for no thread woken on another CPU),
// rather than a worker; none under one P.
func (s *Server) LeaderServed() int64 {
	s.mu.Lock()
	p := s.poll
	s.mu.Unlock()
	if p == nil {
		return 0
	}
	return p.leaderServed()
}

// ProcsChanged tells the server GOMAXPROCS changed (package procs), so that the poller's
// leader/follower follows at once rather than at the sweeper's next period.
func (s *Server) ProcsChanged() {
	s.mu.Lock()
	p := s.poll
	s.mu.Unlock()
	if p != nil {
		p.checkProcs()
	}
}

// ErrServerClosed is what Serve returns after Shutdown or Close.
var ErrServerClosed = http.ErrServerClosed

// Serve accepts connections on ln until Shutdown or Close, or ln fails. From a
// *net.TCPListener it accepts on a duplicate of the listening socket, which Shutdown and Close
// close with ln: closing ln alone does not stop it.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		ln.Close() // as net/http: Serve closes ln, even after Shutdown or Close
		return ErrServerClosed
	}
	if s.poll == nil {
		newPoll := s.newPoll
		if newPoll == nil {
			newPoll = defaultPoll
		}
		p, sock, err := newPoll(s)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		s.poll, s.sock = p, sock
		s.conns = map[*conn]struct{}{}
		s.room = make(chan struct{}, 1)
		s.stopSweep = make(chan struct{})
		s.wg.Add(2) // the poller's role (whichever goroutine holds it) and the sweeper
		s.work.poll = s.poll1
		s.work.serve(pollRole)
		stop := s.stopSweep // taken here: a Close before the goroutine runs must still stop it
		go func() {
			defer s.wg.Done()
			s.sweeper(stop)
		}()
	}
	s.ln = ln
	s.mu.Unlock()

	// The poller's sockets say how connections are taken from ln (epoll's: from a
	// net.TCPListener by raw accept4 on a duplicate of its socket, sock_linux.go).
	l, err := s.sock.listen(ln)
	if err != nil {
		ln.Close()
		return err
	}
	s.mu.Lock()
	s.lis = l
	closed := s.shutdown
	s.mu.Unlock()
	defer l.close()
	if closed { // Shutdown or Close came meanwhile, and closed ln but not what l holds
		return ErrServerClosed
	}
	var delay time.Duration
	starving := false // accept failed for want of descriptors, and said so (AcceptLog)
	for {
		err := l.accept()
		if err == nil {
			delay = 0
			if starving {
				starving = false
				if s.AcceptLog != nil {
					s.AcceptLog("accepting connections again", nil)
				}
			}
			continue
		}
		if s.down.Load() { // Shutdown or Close closed the listener
			return s.closedErr()
		}
		if outOfDescriptors(err) {
			if !starving {
				starving = true
				if s.AcceptLog != nil {
					s.AcceptLog("cannot accept a connection: out of file descriptors; closing the longest-idle kept-alive connections", err)
				}
			}
			// As nginx when worker_connections run out: reuse the idle ones' descriptors. With
			// none to close, wait for one to be freed, a little longer each time, never long.
			if s.ShedIdle(s.shedBatch()) > 0 {
				continue
			}
			delay = min(max(2*delay, 5*time.Millisecond), 100*time.Millisecond)
			time.Sleep(delay)
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			time.Sleep(delay)
			continue
		}
		return err
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// closedErr is what Serve returns once the server closed: ErrServerClosed, or why the poller
// died.
func (s *Server) closedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pollErr != nil {
		return s.pollErr
	}
	return ErrServerClosed
}

// closeListener closes ln and what the accept loop holds of it (epoll's: a duplicate of its
// socket); with s.mu held.
func (s *Server) closeListener() {
	if s.ln != nil {
		s.ln.Close()
	}
	if s.lis != nil {
		s.lis.close()
	}
}

// closing: the answer being written is its connection's last (shutdown, or no keep-alives).
func (s *Server) closing() bool { return s.down.Load() || s.noKeep.Load() }

// connListener is a listener (poller.go) that takes connections by ln's Accept: the portable
// poller's, and epoll's from a listener that is not a net.TCPListener (one that wraps it).
type connListener struct {
	s  *Server
	ln net.Listener
	tl *net.TCPListener // ln, if it is one: a deadline lets its Accept take the backlog
	// drain: Shutdown takes the backlog (takeQueued); taken counts the connections accepted
	// since (the accept loop's).
	drain   atomic.Bool
	taken   int
	stopped chan struct{} // closed by close, when the accept loop ends
	once    sync.Once
}

func newConnListener(s *Server, ln net.Listener) *connListener {
	tl, _ := ln.(*net.TCPListener)
	return &connListener{s: s, ln: ln, tl: tl, stopped: make(chan struct{})}
}

// maxQueued bounds what takeQueued takes: a listen backlog's worth (net.core.somaxconn's
// default), so that a storm cannot hold Shutdown there.
const maxQueued = 4096

// queueDrain is how long an Accept waits for the next connection once Shutdown takes the
// backlog: the backlog's connections are there at once, and new ones are not waited for.
const queueDrain = 5 * time.Millisecond

// maxQueueWait bounds how long takeQueued waits for the accept loop to end.
const maxQueueWait = time.Second

var aLongTimeAgo = time.Unix(1, 0)

func (l *connListener) accept() error {
	fresh := false // this Accept's deadline is drain's own
	for {
		if l.tl != nil && l.drain.Load() {
			d := clock.System.Now().Add(queueDrain)
			if l.taken >= maxQueued {
				d = aLongTimeAgo
			}
			l.tl.SetDeadline(d)
			fresh = true
		}
		nc, err := l.ln.Accept()
		if err != nil {
			if !fresh && l.tl != nil && l.drain.Load() {
				continue // takeQueued's deadline ended a wait begun before: look once more
			}
			return err
		}
		if fresh {
			l.taken++
		}
		l.s.waitRoom()
		l.s.acceptConn(nc)
		return nil
	}
}

// takeQueued has the accept loop take what waits in a net.TCPListener's backlog (the loop
// holds the listener, and Accept takes a connection only there): once drain is set, each
// Accept waits queueDrain at most, so the loop takes the backlog, at most maxQueued, and
// ends (Shutdown has begun); the deadline set here ends a wait begun before. From another
// listener nothing can be taken without waiting, and nothing is.
func (l *connListener) takeQueued() {
	if l.tl == nil {
		return
	}
	l.drain.Store(true)
	l.tl.SetDeadline(clock.System.Now().Add(queueDrain))
	t := time.NewTimer(maxQueueWait)
	defer t.Stop()
	select {
	case <-l.stopped:
	case <-t.C:
	}
}

func (l *connListener) close() { l.once.Do(func() { close(l.stopped) }) }

// acceptConn takes a connection from a listener whose connections are net.Conns: a TCP one is
// made the server's (sockets.fromConn), any other goes to Fallback.
func (s *Server) acceptConn(nc net.Conn) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		s.fallback(s.holdHanded(nc))
		return
	}
	c, err := s.sock.fromConn(tc)
	if err != nil {
		return
	}
	s.accept(c)
}

// accept serves c, a connection just taken from a listener.
//
// A connection accepted while Shutdown closes the listener is served all the same (its answer
// carries Connection: close): its client has no answer to retry on, and in an upgrade in place
// the listening socket lives on in the new process, so the connection was not refused. Once
// Close was called, or Shutdown found no connection left, it is closed.
func (s *Server) accept(c *conn) {
	s.mu.Lock()
	if s.closed || s.shutdown && s.done != nil && isClosed(s.done) {
		s.mu.Unlock()
		s.sock.closeSocket(c)
		return
	}
	s.conns[c] = struct{}{}
	s.held.Add(1)
	s.mu.Unlock()
	c.state.Store(stateIdle)
	// A new connection's first request must start within the header timeout (net/http's
	// deadline for the first head runs from the accept); later ones within the idle timeout.
	c.idleFor(s.ReadHeaderTimeout)
	if err := s.poll.add(c, evRead); err != nil {
		c.close()
	}
}

func (s *Server) fallback(nc net.Conn) {
	if s.Fallback == nil {
		nc.Close()
		return
	}
	s.Fallback(nc)
}

// dispatch is the poller's: an event for c. An idle c gets a goroutine. A busy c is told: the
// client leaving cancels its request; data (a body, or a pipelined request) is noted, and at
// the second such event c's registration is switched to the client leaving only, so that a
// body's every packet does not wake the poller; c parks registered for a request again.
//
// A busy c's goroutine may wait for its socket: the event wakes it (sock.go); data it was
// waiting for does not count towards the switch to the client leaving only. Room to write
// (EPOLLOUT) concerns only a waiting writer.
// last: the batch's last event; serve: c is woken, for the caller to serve (only for last;
// the others are given to workers here).
func (s *Server) dispatch(c *conn, events uint32, last bool) (serve bool) {
	gone := events&evGoneSet != 0
	data := gone || events&evIn != 0
	woke := false
	if st := c.state.Load(); st != stateIdle && st != stateClosed {
		if gone || events&evOut != 0 {
			c.wr.notify()
		}
		if data {
			woke = c.rd.notify()
		}
	}
	if !data {
		return false
	}
	for {
		switch st := c.state.Load(); st {
		case stateIdle:
			if c.state.CompareAndSwap(stateIdle, stateBusy) {
				if gone {
					// The request and the client's end came in one event: no other comes.
					c.gone.Store(true)
				}
				if last {
					return true
				}
				s.work.serve(c)
				return false
			}
		case stateBusy, stateBusyEvent:
			next := stateBusyEvent
			if st == stateBusyEvent && !gone && !woke {
				next = stateBusyHangup
			}
			if !c.state.CompareAndSwap(st, next) {
				continue
			}
			if gone {
				c.cancelRequest()
			} else if next == stateBusyHangup {
				c.wantHangup()
			}
			return false
		case stateBusyHangup:
			if gone {
				c.cancelRequest()
			}
			return false
		default:
			return false
		}
	}
}

// poll1 holds the poller's role until it hands it on with a connection to serve, or the
// poller is closed (nil, and the role is done).
func (s *Server) poll1() *conn {
	c, err := s.poll.run()
	if c == nil {
		if err != nil {
			// The poller failed (epoll_wait): no connection would be woken again. The server closes, and
			// Serve returns the error (the node then stops: it must not stay "ready" with
			// every connection hanging).
			err = fmt.Errorf("h1: the poller failed: %w", err)
			s.mu.Lock()
			s.pollErr = err
			s.mu.Unlock()
			if s.ErrorLog != nil {
				s.ErrorLog(err.Error())
			}
			s.wg.Done()
			go s.Close() // it waits for s.wg
			return nil
		}
		s.wg.Done()
	}
	return c
}

// Shutdown stops accepting, closes idle connections, lets each busy one finish its request
// (its answer carries Connection: close) and returns when every connection is closed or ctx
// ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutdown = true
	s.down.Store(true)
	l := s.lis
	s.mu.Unlock()
	// Closing a listening socket resets the connections in its backlog, handshaken and maybe
	// with their request written: those are taken and served first (in an upgrade the socket
	// lives on in the new process, which would have taken them; they are served here instead).
	if l != nil {
		l.takeQueued()
	}
	s.mu.Lock()
	s.closeListener()
	if s.done == nil {
		s.done = make(chan struct{})
		if len(s.conns) == 0 {
			close(s.done)
		}
	}
	done := s.done
	s.mu.Unlock()
	s.closeIdle()
	select {
	case <-done:
		s.stopPoller()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// StopKeepAlives makes every answer from now on close its connection (the drain's first
// step). A kept-alive connection idle now stays open: its client may be sending its next
// request at this moment, which is answered (with Connection: close) rather than met by a
// close it cannot tell from a lost request; Shutdown, at the drain's end, closes the ones
// still idle. (net/http's SetKeepAlivesEnabled(false) closes them at once.)
func (s *Server) StopKeepAlives() {
	s.noKeep.Store(true)
}

// closeIdle closes every kept-alive connection parked idle now (Shutdown); a busy one closes
// after its answer (closing reports true by then), one parking meanwhile sees down in park. A
// new connection that has sent no request yet is left open: its first request is most likely
// on its way (a client that opens a connection sends at once, and has no answer to retry on,
// as it has on a kept-alive one); it is answered with Connection: close, and the header
// timeout closes one that sends nothing (net/http too leaves a new connection open, 5 s).
func (s *Server) closeIdle() {
	for _, c := range s.snapshot() {
		if !c.served.Load() {
			continue
		}
		if c.state.CompareAndSwap(stateIdle, stateClosed) {
			c.close()
		}
	}
}

// snapshot returns the connections open now.
func (s *Server) snapshot() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		all = append(all, c)
	}
	return all
}

// Close closes the listener and every connection at once.
func (s *Server) Close() error {
	s.mu.Lock()
	s.shutdown, s.closed = true, true
	s.down.Store(true)
	s.closeListener()
	s.mu.Unlock()
	for _, c := range s.snapshot() {
		if c.state.CompareAndSwap(stateIdle, stateClosed) {
			c.close()
		} else {
			c.kill() // busy: its goroutine closes it, its reads and writes failing from now on
		}
	}
	s.stopPoller()
	return nil
}

func (s *Server) stopPoller() {
	s.mu.Lock()
	p := s.poll
	s.mu.Unlock()
	if p != nil {
		p.close()
		s.mu.Lock()
		if s.stopSweep != nil {
			close(s.stopSweep)
			s.stopSweep = nil
		}
		s.mu.Unlock()
		s.wg.Wait()
	}
	s.work.close()
}

// sweepPeriod is how often the sweeper looks for connections idle past their time: a
// quarter of the shorter timeout, within 10 ms and 1 s, so a connection is closed at most
// that late.
func (s *Server) sweepPeriod() time.Duration {
	d := time.Second
	for _, t := range []time.Duration{s.IdleTimeout, s.ReadHeaderTimeout} {
		if t > 0 && t/4 < d {
			d = t / 4
		}
	}
	return max(d, 10*time.Millisecond)
}

// sweeper closes the idle connections past their idleUntil, until stop (stopSweep) is closed.
func (s *Server) sweeper(stop <-chan struct{}) {
	t := time.NewTicker(s.sweepPeriod())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			s.sweep(now.UnixNano())
			s.poll.checkProcs()
		}
	}
}

func (s *Server) sweep(now int64) {
	s.mu.Lock()
	expired := s.expired[:0]
	for c := range s.conns {
		if u := c.idleUntil.Load(); u != 0 && u <= now && c.state.Load() == stateIdle {
			expired = append(expired, c)
		}
	}
	s.mu.Unlock()
	for i, c := range expired {
		if c.state.CompareAndSwap(stateIdle, stateClosed) {
			c.close()
		}
		expired[i] = nil
	}
	if cap(expired) > 1024 { // a burst's list is not kept
		expired = nil
	}
	s.expired = expired
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	if _, ok := s.conns[c]; ok {
		s.held.Add(-1)
	}
	delete(s.conns, c)
	if s.done != nil && len(s.conns) == 0 {
		select {
		case <-s.done:
		default:
			close(s.done)
		}
	}
	s.mu.Unlock()
	s.roomMade()
}

const (
	stateIdle       int32 = iota // parked with the poller, no goroutine serving it
	stateBusy                    // a goroutine serves it
	stateBusyEvent               // busy, and an event came (data or the client leaving)
	stateBusyHangup              // busy, and data came twice: registered for the client leaving only
	stateClosed
)

// conn is one client connection: what an idle one holds (about 100 bytes, and its address).
type conn struct {
	srv    *Server
	remote string
	fdConn          // its socket under epoll (sock_linux.go); closed only by c's owner, its goroutine if busy
	ns     *netSock // its socket on the portable poller (poll_net.go); nil under epoll
	state  atomic.Int32
	// gone: the event that woke c said the client had closed its side too. Edge-triggered,
	// no event will say it again, so c reads on to the end instead of parking.
	gone atomic.Bool
	// idleUntil is when c, idle, is closed (Unix ns; 0: never, or busy). One sweeper
	// closes the connections past it, where a timer each would cost a runtime timer per
	// connection and two timer changes per request.
	idleUntil atomic.Int64
	cancel    atomic.Pointer[reqCtx] // the request being served
	rd, wr    waitPoint              // a busy c's goroutine waiting to read or write
	mu        sync.Mutex             // serialises re-arming between the poller and the serving goroutine, and guards fdClosed
	fdClosed  bool
	served    atomic.Bool // a request was read: the next is not the first, and idle c is a kept-alive one
	tls       *tlsState   // a TLS connection's, made at its first wake (Server.TLSConfig); nil: plain
}

// idleFor closes c if it stays idle for d (0: never): the sweeper closes it.
func (c *conn) idleFor(d time.Duration) {
	if d <= 0 {
		c.idleUntil.Store(0)
		return
	}
	c.idleUntil.Store(clock.System.Now().Add(d).UnixNano())
}

// stopIdle stops the idle clock: c is busy.
func (c *conn) stopIdle() { c.idleUntil.Store(0) }

func (c *conn) cancelRequest() {
	if ctx := c.cancel.Load(); ctx != nil {
		ctx.cancel()
	}
}

// close closes c's socket (its registration with the poller goes with it) and forgets c; once.
func (c *conn) close() {
	c.mu.Lock()
	if c.fdClosed {
		c.mu.Unlock()
		return
	}
	c.fdClosed = true
	c.stopIdle()
	c.srv.poll.release(c)
	if c.tls != nil && c.tls.sock.nc == nil {
		c.tls.tc.Close() // its close_notify, written if the socket has room; not the socket
	}
	c.srv.sock.closeSocket(c)
	c.mu.Unlock()
	c.srv.forget(c)
}

// kill makes a busy c's reads and writes fail from now on (at once, for one waiting), for
// Close; its goroutine then closes it.
func (c *conn) kill() {
	c.mu.Lock()
	if !c.fdClosed {
		c.srv.sock.kill(c)
	}
	c.mu.Unlock()
	c.rd.notify()
	c.wr.notify()
}

// session is what a connection holds while it is served, kept in a pool between wakes: an
// idle connection holds none of it.
type session struct {
	c         *conn
	br        *bufio.Reader
	bw        *bufio.Writer
	door      door.Reader // between br and lr: br sees only what the door lets in
	lr        limitReader
	fdSession            // the socket's reader and writer under epoll (sock_linux.go)
	sock      transport  // c's socket (sockets.transport): &io under epoll
	tio       tlsIO      // a TLS connection's tls.Conn over sock
	tr        transport  // what br (through the door) reads and bw writes: sock, or &tio
	plain     plainStore // readPlainInto's
}

// transport is a connection's byte stream as its session reads and writes it: the socket
// (sockets.transport), or TLS over it (tlsIO).
type transport interface {
	Read(p []byte) (int, error)
	ReadNow(p []byte) (int, error) // errWouldBlock: nothing to read yet
	Write(p []byte) (int, error)
	SetReadDeadline(t time.Time)
	SetWriteDeadline(t time.Time)
}

var sessionPool = sync.Pool{New: func() any {
	return &session{br: bufio.NewReaderSize(nil, 4096), bw: writerPool.Get().(*bufio.Writer), fdSession: newFDSession()}
}}

// writerPool holds the writers sessions gave back while their answer waited (releaseWriter),
// which new sessions take first: the writer an open stream gave back serves the next one.
var writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4096) }}

// releaseWriter gives ss's writer, empty, back to writerPool: its answer waits long between
// writes (response.ReleaseWriteBuffer). acquireWriter takes one again.
func (ss *session) releaseWriter() {
	ss.bw.Reset(nil)
	writerPool.Put(ss.bw)
	ss.bw = nil
}

// acquireWriter gives ss a writer again, if it gave its own back.
func (ss *session) acquireWriter() *bufio.Writer {
	if ss.bw == nil {
		ss.bw = writerPool.Get().(*bufio.Writer)
		ss.bw.Reset(ss.tr)
	}
	return ss.bw
}

// getSession gives c a session. c is at a request's first byte: it parks only between
// requests, with nothing read and not yet served (serve).
func getSession(c *conn) *session {
	ss := sessionPool.Get().(*session)
	ss.c = c
	ss.sock = c.srv.sock.transport(c, ss)
	ss.tr = ss.sock
	if c.tls != nil {
		c.tls.sock.io = ss.sock
		ss.tio = tlsIO{t: c.tls, io: ss.sock}
		ss.tr = &ss.tio
	}
	ss.lr.r = ss.tr
	ss.door.Reset(&ss.lr, !c.served.Load())
	ss.br.Reset(&ss.door)
	ss.bw.Reset(ss.tr)
	return ss
}

func putSession(ss *session) {
	ss.acquireWriter() // an answer ended while its writer was given back (a handler's panic)
	ss.br.Reset(nil)
	ss.bw.Reset(nil)
	ss.door.Reset(nil, false)
	ss.lr.r = nil
	if ss.tio.t != nil {
		ss.tio.t.sock.io = nil
		ss.tio = tlsIO{}
	}
	ss.tr, ss.sock, ss.c = nil, nil, nil
	ss.releaseFD()
	ss.plain.release()
	sessionPool.Put(ss)
}

// h2Preface is how an HTTP/2 connection with prior knowledge starts.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// park hands busy c to the poller (its registration armed) with its idle timer running for idle
// (0: none); false: an event came while it was busy, and c stays busy. A kept-alive c parking
// once Shutdown began is closed (closeIdle's snapshot may have missed it); any other stays
// open, as closeIdle leaves it: a new one (a TLS connection parks after its handshake, its
// first request on the way), and any in the drain before Shutdown (StopKeepAlives).
func (c *conn) park(idle time.Duration) bool {
	c.idleFor(idle)
	if !c.state.CompareAndSwap(stateBusy, stateIdle) {
		return false
	}
	if c.served.Load() {
		if c.srv.down.Load() && c.state.CompareAndSwap(stateIdle, stateClosed) {
			c.close()
		} else {
			c.srv.roomMade() // one more to shed, if the accept loop waits at MaxConns
		}
	}
	return true
}

// wantHangup registers c for the client leaving only (its request is being served).
func (c *conn) wantHangup() {
	c.mu.Lock()
	if c.state.Load() == stateBusyHangup {
		c.srv.poll.arm(c, evHangup)
	}
	c.mu.Unlock()
}

// serve serves requests on c while they come without a pause, then parks c again.
func (c *conn) serve() {
	handshakeBy := c.idleUntil.Load() // a new connection's: ReadHeaderTimeout after the accept
	c.stopIdle()
	if c.srv.TLSConfig != nil && c.tls == nil { // a TLS connection's first wake
		c.tls = newTLSState(c)
		ss := getSession(c)
		ok, handedOff := c.handshake(ss, handshakeBy)
		if handedOff {
			return
		}
		if !ok {
			putSession(ss)
			c.shut()
			return
		}
		// The first request may have come with the client's Finished, read with it; else
		// it is a round trip away, and c parks for it as a new connection does.
		if !ss.tlsHolds() {
			putSession(ss)
			if !c.parkOrWake(c.srv.ReadHeaderTimeout) {
				return
			}
			ss = getSession(c)
		}
		c.serveFrom(ss)
		return
	}
	c.serveFrom(getSession(c))
}

// serveFrom serves c's requests with session ss (see serve).
func (c *conn) serveFrom(ss *session) {
	for {
		keep, handedOff := c.serveOne(ss, !c.served.Load())
		c.served.Store(true)
		if handedOff {
			putSession(ss)
			return
		}
		if !keep {
			refused := ss.door.Refused()
			putSession(ss)
			if refused {
				// The client may still be sending what the door refused: the answer must
				// reach it before the reset that closing with unread data sends.
				c.closeWriteAndWait()
			}
			c.shut()
			return
		}
		if ss.br.Buffered() > 0 || ss.door.Buffered() > 0 || c.gone.Load() { // a pipelined request read already, or the end
			continue
		}
		if c.tls != nil && ss.tlsHolds() {
			continue
		}
		putSession(ss)
		if !c.parkOrWake(c.srv.IdleTimeout) {
			return
		}
		ss = getSession(c)
	}
}

// parkOrWake parks c (false) for at most idle, or says that data waits (true): the next
// request came while c was busy, whose event (edge-triggered) was the only one it gets.
func (c *conn) parkOrWake(idle time.Duration) bool {
	for {
		if c.park(idle) { // its registration wakes it for the next request
			return false
		}
		// An event came while busy: the next request, or a body's bytes (read already), or
		// the client leaving. c is registered for a request again if it was switched to the
		// hangup only, and looked at: data there is served at once; with none c parks (an
		// event from now on makes that park fail, and c is looked at again).
		c.stopIdle()
		if !c.state.CompareAndSwap(stateBusyEvent, stateBusy) {
			c.mu.Lock()
			ok := c.state.CompareAndSwap(stateBusyHangup, stateBusy)
			var err error
			if ok {
				err = c.srv.poll.arm(c, evRead)
			}
			c.mu.Unlock()
			if !ok || err != nil { // closed meanwhile (Close)
				c.shut()
				return false
			}
		}
		if c.srv.sock.readable(c) {
			return true
		}
	}
}

func (c *conn) shut() {
	c.state.Store(stateClosed)
	c.close()
}

// limitReader reads the socket for the door, and keeps the head's deadline: headTimeout,
// while a head is read, is the read deadline set at the head's first read that has to wait
// for the client (armed); a head that is there whole when the connection wakes, as nearly
// every one is, costs no deadline (two timer changes a request). The head's size is the
// door's to limit.
type limitReader struct {
	r           transport
	headTimeout time.Duration
	armed       bool
	// idleOK: a read that would wait before any byte of the next request came (got 0) returns
	// errNothingYet instead. A connection can be woken with nothing to read (an event the
	// poller delivers after the serving goroutine read its data already): it parks again, its
	// idle clock running, rather than wait for the request holding a goroutine, under a header
	// deadline that would start before the request did.
	idleOK bool
	got    int // bytes read since serveOne began
}

// errNothingYet: a woken connection had nothing to read (limitReader.idleOK).
var errNothingYet = errors.New("h1: nothing to read on a woken connection")

func (l *limitReader) Read(p []byte) (int, error) {
	var n int
	var err error
	if l.headTimeout > 0 && !l.armed || l.idleOK && l.got == 0 {
		n, err = l.r.ReadNow(p)
		if err == errWouldBlock {
			if l.idleOK && l.got == 0 {
				return 0, errNothingYet
			}
			if l.headTimeout > 0 {
				l.r.SetReadDeadline(clock.System.Now().Add(l.headTimeout))
				l.armed = true
			}
			n, err = l.r.Read(p)
		}
	} else {
		n, err = l.r.Read(p)
	}
	l.got += n
	return n, err
}

// serveOne reads one request from br and answers it. keep: the connection may carry another
// request; handedOff: c was given to Fallback.
func (c *conn) serveOne(ss *session, first bool) (keep, handedOff bool) {
	s := c.srv
	br, lr := ss.br, &ss.lr
	// Nothing of a next request read yet, here or held by the door: a read that would wait is
	// a wake with nothing to read.
	nothingYet := !first && br.Buffered() == 0 && ss.door.Buffered() == 0
	lr.headTimeout, lr.armed, lr.got, lr.idleOK = s.ReadHeaderTimeout, false, 0, nothingYet
	if !first {
		// As net/http: a next request is read only once 4 bytes of it are there; less and
		// the end of the stream closes the connection without an answer. A wake with nothing
		// to read parks the connection again.
		_, err := br.Peek(4)
		lr.idleOK = false
		if err == errNothingYet {
			return true, false
		}
		if err != nil {
			return false, false
		}
	}
	if first && c.tls == nil {
		// The HTTP/2 preface with prior knowledge goes to Fallback, its bytes replayed (the
		// door lets it through as a connection's first bytes, and nothing after it).
		if b, _ := br.Peek(4); string(b) == h2Preface[:4] {
			if b, err := br.Peek(len(h2Preface)); err == nil && string(b) == h2Preface && s.Fallback != nil {
				buffered, _ := br.Peek(br.Buffered())
				replay := append(append([]byte(nil), buffered...), ss.door.Drain()...)
				if tc := c.handOff(); tc != nil {
					s.Fallback(&replayConn{Conn: s.holdHanded(tc), pending: replay})
				}
				return false, true
			}
		}
	}
	ctx := &reqCtx{}
	defer ctx.cancel()
	req, plain := readPlainInto(br, ctx, &ss.plain)
	if !plain {
		var ok bool
		if req, ok = c.readRequest(ss); !ok {
			return false, false
		}
		req = req.WithContext(ctx)
	} else if lr.armed {
		ss.tr.SetReadDeadline(time.Time{}) // a read of its first bytes waited (Peek above)
	}
	lr.headTimeout, lr.armed = 0, false
	// c stays registered for the next request or the client leaving while this one is
	// served: with no body and no pipelining nothing comes, and parking after the answer
	// costs no syscall.
	c.cancel.Store(ctx)
	defer c.cancel.Store(nil)
	req.RemoteAddr = c.remote
	if c.tls != nil {
		req.TLS = c.tls.state
	}
	w := newResponse(s, ss, req)
	if req.Body != nil && req.Body != http.NoBody && httpsyntax.LooseToken(req.Header.Get("Expect"), "100-continue") && req.ProtoAtLeast(1, 1) && req.ContentLength != 0 {
		req.Body = &expectContinue{r: req.Body, w: w}
	}
	if !s.runHandler(w, req) {
		return false, false // aborted: the connection closes, the answer cut
	}
	w.finish()
	keep = !w.closeAfter && !s.closing() && bodyDone(req)
	w.release()
	if err := ss.bw.Flush(); err != nil { // finish took the writer again if it was given back
		keep = false
	}
	return keep, false
}

// readRequest reads a request head with http.ReadRequest and makes net/http's server's
// checks, answering what it refuses as net/http does; false: refused (or the client left),
// and the connection closes. The door has checked the head before (the head's size, its Host,
// its lines, its framing), so what net/http would refuse of it does not come here: the
// answers below are net/http's, kept for a head the door let through and net/http would not.
func (c *conn) readRequest(ss *session) (*http.Request, bool) {
	br, lr := ss.br, &ss.lr
	req, err := http.ReadRequest(br)
	armed := lr.armed
	lr.headTimeout, lr.armed = 0, false
	if err != nil {
		// A transfer coding but chunked, which net/http answers 501, never comes here: the
		// door answers it 501 unknown_coding first (node's door test has the row).
		if !isCommonNetReadError(err) { // else the client left or was too slow: no answer
			writeRaw(ss, "400 Bad Request", "")
		}
		return nil, false
	}
	if armed {
		ss.tr.SetReadDeadline(time.Time{})
	}
	if status, msg := checkRequest(req); status != "" {
		writeRaw(ss, status, msg)
		return nil, false
	}
	return req, true
}

// runHandler runs the handler; false: it panicked (http.ErrAbortHandler, or a bug, logged).
func (s *Server) runHandler(w *response, req *http.Request) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			ok = false
			if v != http.ErrAbortHandler && s.ErrorLog != nil {
				s.ErrorLog("h1: panic serving " + req.RemoteAddr + ": " + fmt.Sprint(v) + "\n" + string(debug.Stack()))
			}
		}
	}()
	s.Handler.ServeHTTP(w, req)
	return true
}

// checkRequest is what net/http's server checks beyond http.ReadRequest that the door does
// not (the door checks the version, the Host and the names and values of the header): an
// Expect it knows.
func checkRequest(req *http.Request) (status, msg string) {
	if req.ProtoMajor != 1 {
		return "505 HTTP Version Not Supported", "unsupported protocol version"
	}
	if e := req.Header.Get("Expect"); e != "" && !httpsyntax.LooseToken(e, "100-continue") {
		return "417 Expectation Failed", ""
	}
	return "", ""
}

// bodyDone reports whether the request body was read to its end (else the connection cannot
// carry another request).
func bodyDone(req *http.Request) bool {
	if req.Body == nil || req.Body == http.NoBody {
		return true
	}
	var one [1]byte
	n, err := req.Body.Read(one[:])
	return n == 0 && errors.Is(err, io.EOF)
}

// isCommonNetReadError is net/http's: the errors after which it closes without an answer.
func isCommonNetReadError(err error) bool {
	if err == io.EOF {
		return true
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return true
	}
	if oe, ok := err.(*net.OpError); ok && oe.Op == "read" {
		return true
	}
	return false
}

// writeRaw answers a request that cannot be served (net/http's words) and the connection closes.
func writeRaw(ss *session, status, msg string) {
	body := status
	if msg != "" {
		body += ": " + msg
	}
	if strings.HasPrefix(status, "431") {
		body = "431 Request Header Fields Too Large"
	}
	ss.tr.SetWriteDeadline(clock.System.Now().Add(time.Second))
	io.WriteString(ss.tr, "HTTP/1.1 "+status+"\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"+body)
	ss.c.closeWriteAndWait()
}

// rstAvoidanceDelay is net/http's: after an answer that closes a connection the client may
// still be writing to, the write side is closed and the socket kept this long, so that the
// client reads the answer before the reset that closing with unread data sends.
const rstAvoidanceDelay = 500 * time.Millisecond

func (c *conn) closeWriteAndWait() {
	if c.tls != nil {
		c.tls.tc.CloseWrite() // close_notify first (written at once, or with what is left)
	}
	c.srv.sock.shutWrite(c)
	time.Sleep(rstAvoidanceDelay)
}

// handOff takes c out of the server and gives its socket back as a net.TCPConn (for
// Fallback); nil if that fails, and c is closed.
func (c *conn) handOff() *net.TCPConn {
	c.srv.poll.remove(c)
	c.srv.forget(c)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fdClosed = true
	tc, err := c.srv.sock.netConn(c)
	if err != nil {
		return nil
	}
	return tc
}

// replayConn gives back the bytes read before the hand-off, then reads the socket.
type replayConn struct {
	net.Conn
	pending []byte
}

func (r *replayConn) Read(p []byte) (int, error) {
	if len(r.pending) > 0 {
		n := copy(p, r.pending)
		r.pending = r.pending[n:]
		return n, nil
	}
	return r.Conn.Read(p)
}

type expectContinue struct {
	r    io.ReadCloser
	w    *response
	sent bool
}

func (e *expectContinue) Read(p []byte) (int, error) {
	if !e.sent {
		e.sent = true
		if !e.w.wroteHeader {
			bw := e.w.writer()
			bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
			bw.Flush()
		}
	}
	return e.r.Read(p)
}

func (e *expectContinue) Close() error { return e.r.Close() }
