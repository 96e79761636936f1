package h1

import (
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"github.com/fenec/fenec-entry/sockio"
	"golang.org/x/sys/unix"
)

// A client connection's socket is a bare non-blocking file descriptor: no net.TCPConn and no
// runtime poll descriptor (about 1.2 KB of a held connection's memory with the GC's headroom;
// docs/BENCHMARKS.md). It is read and written by raw system calls (package sockio
// says why), and when it is not ready the goroutine serving it waits for the server's own
// epoll instance (poller), where the connection is registered anyway: the poller's event
// wakes the waiter, as Go's netpoller wakes a net.Conn's reader.

// fdConn is what a connection of epoll's holds of its socket, in conn.
type fdConn struct {
	fd   int   // the socket; closed only by whoever owns c: its goroutine if busy
	slot int32 // the poller's; -1: not registered
	gen  int32 // the poller's registration generation
}

// newFDConn is a connection of s on socket fd (non-blocking), from remote; not yet accepted.
func newFDConn(s *Server, fd int, remote string) *conn {
	c := &conn{srv: s, remote: remote}
	c.fd, c.slot = fd, -1
	return c
}

// fdSession is what a session holds for epoll's connections: their socket's reader and
// writer (sockIO), kept with the session between wakes.
type fdSession struct{ io sockIO }

func newFDSession() fdSession { return fdSession{io: newSockIO()} }

// releaseFD lets the session's sockIO forget its connection (putSession).
func (f *fdSession) releaseFD() { f.io.reset(nil) }

// fdSockets is epoll's sockets (poller.go): bare file descriptors, read and written by raw
// system calls.
type fdSockets struct{ s *Server }

// listen accepts from a net.TCPListener by raw accept4 on a duplicate of its socket (a
// listener's RawConn cannot wait to read otherwise): a connection is then a file descriptor,
// never a net.TCPConn. From any other listener, its Accept (connListener).
func (f fdSockets) listen(ln net.Listener) (listener, error) {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return newConnListener(f.s, ln), nil
	}
	lf, err := listenFile(tl)
	if err != nil {
		return nil, err
	}
	raw, err := lf.SyscallConn()
	if err != nil {
		lf.Close()
		return nil, err
	}
	return &fdListener{s: f.s, file: lf, raw: raw}, nil
}

// fromConn takes tc's socket as a file descriptor of its own (takeFD), and closes tc.
func (f fdSockets) fromConn(tc *net.TCPConn) (*conn, error) {
	remote := tc.RemoteAddr().String()
	fd, err := takeFD(tc)
	if err != nil {
		return nil, err
	}
	return newFDConn(f.s, fd, remote), nil
}

func (fdSockets) transport(c *conn, ss *session) transport {
	ss.io.reset(c)
	return &ss.io
}

// readable peeks once, without waiting.
func (fdSockets) readable(c *conn) bool {
	var b [1]byte
	_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(c.fd), uintptr(unsafe.Pointer(&b[0])), 1,
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return e != syscall.EAGAIN
}

// writeNow writes once, as a socket with room takes it.
func (fdSockets) writeNow(c *conn, p []byte) (int, error) {
	n, e := sockio.WriteFD(c.fd, p)
	if e != 0 {
		return max(n, 0), opError("write", os.NewSyscallError("write", e))
	}
	return n, nil
}

func (fdSockets) shutWrite(c *conn) {
	unix.Shutdown(c.fd, unix.SHUT_WR) // c's goroutine owns it: not closed meanwhile
}

func (fdSockets) kill(c *conn) { unix.Shutdown(c.fd, unix.SHUT_RDWR) }

// closeSocket closes c's socket; its epoll registration goes with it.
func (fdSockets) closeSocket(c *conn) { unix.Close(c.fd) }

// netConn makes c's socket a net.TCPConn: a duplicate, in Go's netpoller; c's own is closed.
func (fdSockets) netConn(c *conn) (*net.TCPConn, error) {
	f := os.NewFile(uintptr(c.fd), "")
	nc, err := net.FileConn(f) // a duplicate of the socket, in Go's netpoller
	f.Close()
	tc, ok := nc.(*net.TCPConn)
	if err != nil || !ok {
		if nc != nil {
			nc.Close()
		}
		if err == nil {
			err = errNotTCP
		}
		return nil, err
	}
	return tc, nil
}

var errNotTCP = errors.New("h1: the socket is not a TCP connection")

// fdListener is epoll's listener from a net.TCPListener: a duplicate of its socket, which
// Shutdown and Close close with the net.Listener (closing that alone does not stop it).
type fdListener struct {
	s    *Server
	file *os.File // the duplicate, in Go's netpoller
	raw  syscall.RawConn
}

func (l *fdListener) accept() error {
	for {
		fd, sa, err := acceptRaw(l.raw)
		if err != nil {
			return err
		}
		if setAcceptedOptions(fd) != nil { // the client reset it already
			unix.Close(fd)
			continue
		}
		l.s.waitRoom()
		l.s.accept(newFDConn(l.s, fd, remoteString(sa)))
		return nil
	}
}

func (l *fdListener) close() { l.file.Close() }

// wantData makes sure a busy c's registration wakes it for data, before its goroutine waits
// to read: one switched to the client leaving only (a body's second event) is switched back.
func (c *conn) wantData() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fdClosed {
		return net.ErrClosed
	}
	if c.state.CompareAndSwap(stateBusyHangup, stateBusyEvent) {
		return c.srv.poll.arm(c, evRead)
	}
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

// takeQueued accepts, without waiting, the connections waiting in the backlog of h1's
// duplicate of the listening socket and serves them, until none is left.
func (l *fdListener) takeQueued() {
	s := l.s
	l.raw.Control(func(lfd uintptr) {
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
			s.accept(newFDConn(s, fd, remoteString(sa)))
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
