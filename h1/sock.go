//go:build linux

package h1

import (
	"io"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fenec/fenec-entry/sockio"
	"golang.org/x/sys/unix"
)

// A client connection's socket is a bare non-blocking file descriptor: no net.TCPConn and no
// runtime poll descriptor (about 1.2 KB of a held connection's memory with the GC's headroom;
// docs/BENCHMARKS.md). It is read and written by raw system calls (package sockio
// says why), and when it is not ready the goroutine serving it waits for the server's own
// epoll instance (poller), where the connection is registered anyway: the poller's event
// wakes the waiter, as Go's netpoller wakes a net.Conn's reader.

// waiter is what the goroutine serving a connection blocks on while its socket is not ready,
// kept in the session: an idle connection holds none.
type waiter struct {
	ch    chan struct{} // buffered: notify never blocks
	timer *time.Timer   // for a deadline; made at first use
}

// readyMark, in a waitPoint: an event came while no one waited.
var readyMark = &waiter{}

// waitPoint is one direction's readiness, between the poller and the goroutine serving the
// connection (Go's pollDesc rg and wg): nil, readyMark, or the waiter blocked on it. Only
// the notify that takes a waiter out sends it its wake, so a waiter gets one per wait.
type waitPoint struct{ p atomic.Pointer[waiter] }

// notify is the poller's, on an event (and kill's): it wakes the waiter, or leaves the mark
// for the next wait. woke: a waiter was woken.
func (w *waitPoint) notify() (woke bool) {
	old := w.p.Swap(readyMark)
	if old == nil || old == readyMark {
		return false
	}
	old.ch <- struct{}{}
	return true
}

var errTimeout = os.ErrDeadlineExceeded

// wait blocks wt until notify or the deadline (Unix ns; 0: none): nil, the socket may be
// ready (try again); errTimeout, the deadline passed first. An event that came since the
// last wait returns at once.
func (w *waitPoint) wait(wt *waiter, deadline int64) error {
	var d time.Duration
	if deadline != 0 {
		if d = time.Until(time.Unix(0, deadline)); d <= 0 {
			return errTimeout
		}
	}
	if !w.p.CompareAndSwap(nil, wt) { // the mark: an event came meanwhile
		w.p.CompareAndSwap(readyMark, nil)
		return nil
	}
	if deadline == 0 {
		<-wt.ch
		w.p.CompareAndSwap(readyMark, nil)
		return nil
	}
	if wt.timer == nil {
		wt.timer = time.NewTimer(d)
	} else {
		wt.timer.Reset(d)
	}
	select {
	case <-wt.ch:
		wt.timer.Stop()
		w.p.CompareAndSwap(readyMark, nil)
		return nil
	case <-wt.timer.C:
	}
	if w.p.CompareAndSwap(wt, nil) {
		return errTimeout
	}
	<-wt.ch // notify took wt out as the deadline passed: its wake is on the way
	w.p.CompareAndSwap(readyMark, nil)
	return nil
}

// sockIO reads and writes a connection's socket for the goroutine serving it: the session's
// (its waiters and deadlines are for one request's life; Go's net.Conn keeps them per
// connection). A read and a write may wait at the same time, in two goroutines.
type sockIO struct {
	c      *conn
	rdl    int64 // read deadline, Unix ns; 0: none
	wdl    int64 // write deadline
	rw, ww waiter
}

func (s *sockIO) reset(c *conn) { s.c, s.rdl, s.wdl = c, 0, 0 }

func newSockIO() sockIO {
	return sockIO{rw: waiter{ch: make(chan struct{}, 1)}, ww: waiter{ch: make(chan struct{}, 1)}}
}

// errWouldBlock is ReadNow's when the socket has nothing to read yet: a temporary net.Error,
// which crypto/tls gives back without keeping it (tls.go).
var errWouldBlock error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "h1: nothing to read yet" }
func (wouldBlock) Timeout() bool   { return false }
func (wouldBlock) Temporary() bool { return true }

// Read reads into p as net.Conn's Read does: it waits for data, the end (io.EOF) or the read
// deadline.
func (s *sockIO) Read(p []byte) (int, error) { return s.read(p, false) }

// ReadNow is Read without the wait: errWouldBlock when nothing can be read at once.
func (s *sockIO) ReadNow(p []byte) (int, error) { return s.read(p, true) }

func (s *sockIO) read(p []byte, now bool) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, e := sockio.ReadFD(s.c.fd, p)
		switch {
		case e == 0 && n == 0:
			return 0, io.EOF
		case e == 0:
			return n, nil
		case e != syscall.EAGAIN:
			return 0, opError("read", os.NewSyscallError("read", e))
		case now:
			return 0, errWouldBlock
		}
		if err := s.c.wantData(); err != nil {
			return 0, opError("read", err)
		}
		if err := s.c.rd.wait(&s.rw, s.rdl); err != nil {
			return 0, opError("read", err)
		}
	}
}

// Write writes all of p as net.Conn's Write does, waiting for room when the socket is full
// (until the write deadline).
func (s *sockIO) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, e := sockio.WriteFD(s.c.fd, p[done:])
		done += n
		switch e {
		case 0:
		case syscall.EAGAIN:
			if err := s.c.wr.wait(&s.ww, s.wdl); err != nil {
				return done, opError("write", err)
			}
		default:
			return done, opError("write", os.NewSyscallError("write", e))
		}
	}
	return done, nil
}

// SetReadDeadline and SetWriteDeadline are net.Conn's, for the request being served.
func (s *sockIO) SetReadDeadline(t time.Time)  { s.rdl = unixNano(t) }
func (s *sockIO) SetWriteDeadline(t time.Time) { s.wdl = unixNano(t) }

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// opError shapes err as net.Conn's errors are (isCommonNetReadError knows them).
func opError(op string, err error) error { return &net.OpError{Op: op, Net: "tcp", Err: err} }

// listenFile is tl's listening socket, duplicated (non-blocking, close-on-exec), as a file in
// Go's netpoller, whose RawConn can wait for a connection to accept.
func listenFile(tl *net.TCPListener) (*os.File, error) {
	raw, err := tl.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd, err := dupSocket(raw)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "h1-listener"), nil
}

// dupSocket duplicates raw's socket: a file descriptor of its own, non-blocking and
// close-on-exec.
func dupSocket(raw syscall.RawConn) (int, error) {
	fd := -1
	var derr error
	if err := raw.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, os.NewSyscallError("fcntl", derr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, os.NewSyscallError("fcntl", err)
	}
	return fd, nil
}

// acceptRaw accepts a connection from the listening socket raw reads (h1's listenFile),
// non-blocking and close-on-exec, waiting in Go's netpoller while none is pending.
func acceptRaw(raw syscall.RawConn) (fd int, sa unix.Sockaddr, err error) {
	var errno error
	rerr := raw.Read(func(lfd uintptr) bool {
		for {
			fd, sa, errno = unix.Accept4(int(lfd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
			switch errno {
			case unix.EINTR, unix.ECONNABORTED: // net's accept retries these too
				continue
			case unix.EAGAIN:
				return false
			}
			return true
		}
	})
	if rerr != nil {
		return -1, nil, rerr
	}
	if errno != nil {
		return -1, nil, os.NewSyscallError("accept4", errno)
	}
	return fd, sa, nil
}

// maxQueued bounds what takeQueued takes: a listen backlog's worth (net.core.somaxconn's
// default), so that a storm cannot hold Shutdown there.
const maxQueued = 4096

// takeQueued accepts, without waiting, the connections waiting in lf's backlog (lf: h1's
// duplicate of the listening socket; nil: none) and serves them, until none is left.
func (s *Server) takeQueued(lf *os.File) {
	if lf == nil {
		return
	}
	raw, err := lf.SyscallConn()
	if err != nil {
		return
	}
	raw.Control(func(lfd uintptr) {
		for range maxQueued {
			fd, sa, err := unix.Accept4(int(lfd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
			if err == unix.EINTR || err == unix.ECONNABORTED {
				continue
			}
			if err != nil {
				return // EAGAIN: none left; or the listener is gone
			}
			if setAcceptedOptions(fd) != nil {
				unix.Close(fd)
				continue
			}
			s.accept(fd, remoteString(sa))
		}
	})
}

// remoteString is the client's address as net.TCPAddr's String gives it (an IPv4 client of a
// dual-stack listener as a.b.c.d, not ::ffff:a.b.c.d), as net/http's Request.RemoteAddr.
func remoteString(sa unix.Sockaddr) string {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return (&net.TCPAddr{IP: sa.Addr[:], Port: sa.Port}).String()
	case *unix.SockaddrInet6:
		a := &net.TCPAddr{IP: sa.Addr[:], Port: sa.Port}
		if sa.ZoneId != 0 {
			if ifi, err := net.InterfaceByIndex(int(sa.ZoneId)); err == nil {
				a.Zone = ifi.Name
			} else {
				a.Zone = strconv.Itoa(int(sa.ZoneId))
			}
		}
		return a.String()
	}
	return ""
}

// takeFD takes tc's socket as a file descriptor of its own (a duplicate, non-blocking,
// close-on-exec) and closes tc: for a TCP connection from a listener that is not a
// net.TCPListener (one that wraps it), whose socket h1 then holds as its own accepts' are.
func takeFD(tc *net.TCPConn) (int, error) {
	defer tc.Close()
	raw, err := tc.SyscallConn()
	if err != nil {
		return -1, err
	}
	return dupSocket(raw)
}

// setAcceptedOptions sets on an accepted socket what net's accept sets on every connection
// (net.ListenConfig's defaults): TCP_NODELAY, and keep-alive probes after 15 s idle, every
// 15 s, 9 of them. (Linux does not give an accepted socket these from its listener.)
func setAcceptedOptions(fd int) error {
	for _, o := range [...]struct{ level, opt, v int }{
		{unix.IPPROTO_TCP, unix.TCP_NODELAY, 1},
		{unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
		{unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, 15},
		{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, 15},
		{unix.IPPROTO_TCP, unix.TCP_KEEPCNT, 9},
	} {
		if e := unix.SetsockoptInt(fd, o.level, o.opt, o.v); e != nil {
			return os.NewSyscallError("setsockopt", e)
		}
	}
	return nil
}
