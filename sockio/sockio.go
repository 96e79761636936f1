// Package sockio reads and writes a TCP connection's non-blocking socket with raw system calls,
// waiting in Go's netpoller as net.Conn does when the socket is not ready.
//
// Why: net.Conn's Read and Write enter the kernel through syscall.Syscall, which marks the
// goroutine as in a system call. A loopback write that wakes the reader on another CPU often
// stays in the kernel longer than sysmon's 20 µs, so sysmon takes the P away and starts another
// thread to run it, and the writing thread parks when it returns: two futex calls and two
// context switches for a system call that could never block. A read or write on a
// non-blocking socket returns as soon as it copied what fits, so the raw call keeps the P and
// the thread (nginx's worker does the same, having only the one). The profile and the numbers
// are in docs/BENCHMARKS.md.
//
// Deadlines, Close and everything else are the net.TCPConn's (ReadFrom and WriteTo too:
// io.Copy through them is correct, by net's system calls); errors are shaped as
// net.Conn's (a *net.OpError "read"/"write", wrapping os.ErrDeadlineExceeded, net.ErrClosed or
// the errno as an *os.SyscallError); a read of 0 bytes at the end of the stream is io.EOF.
//
// A Conn may be read by one goroutine and written by another at the same time, as a
// net.Conn, but not read (or written) by two at once.
//
// It knows nothing of HTTP or of who uses the connection: bytes in, bytes out.
package sockio

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// Conn is a *net.TCPConn whose Read and Write are raw system calls.
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn

	// The system call's arguments and results, in the struct so that the functions given to
	// the RawConn are made once (a closure per call would allocate).
	rp     []byte
	rn     int
	rerr   syscall.Errno
	nowait bool // ReadNow's: do not wait for the socket
	again  bool // ReadNow's read met EAGAIN
	reads  int  // read system calls made (Reads)
	readFn func(uintptr) bool
	// WriteThenRead's write, made by the read's first call: what is left of it, and why it
	// stopped (EAGAIN: the socket was full).
	first    []byte
	firstErr syscall.Errno
	wp       []byte
	wn       int
	werr     syscall.Errno
	writeFn  func(uintptr) bool
}

// New wraps tc. It fails if tc has no file descriptor (closed), or where raw socket calls are
// not built (Windows: errUnsupported; the caller keeps the net.TCPConn).
func New(tc *net.TCPConn) (*Conn, error) {
	c := new(Conn)
	if err := c.Init(tc); err != nil {
		return nil, err
	}
	return c, nil
}

// Init makes c wrap tc, for a Conn held inside another struct (one allocation less per
// connection). c must not be copied afterwards.
func (c *Conn) Init(tc *net.TCPConn) error {
	if !supported {
		return errUnsupported
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	*c = Conn{TCPConn: tc, rc: rc}
	c.readFn = c.read
	c.writeFn = c.write
	return nil
}

// Read reads into p as net.Conn's Read does.
func (c *Conn) Read(p []byte) (int, error) { return c.readRaw(p, false) }

// ErrWouldBlock is ReadNow's when the socket has nothing to read yet.
var ErrWouldBlock = errors.New("sockio: nothing to read yet")

// ReadNow is Read without the wait: ErrWouldBlock when nothing can be read at once.
func (c *Conn) ReadNow(p []byte) (int, error) { return c.readRaw(p, true) }

func (c *Conn) readRaw(p []byte, nowait bool) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rp, c.rn, c.rerr, c.nowait, c.again = p, 0, 0, nowait, false
	err := c.rc.Read(c.readFn)
	n, errno, again := c.rn, c.rerr, c.again
	c.rp, c.nowait = nil, false
	switch {
	case err != nil:
		return 0, c.opError("read", unwrapOp(err))
	case again:
		return 0, ErrWouldBlock
	case errno != 0:
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// WriteThenRead writes w whole and then reads into p: Write(w) and Read(p), less the read
// that an answer to w would meet empty. Read would first try the socket, find nothing (the
// peer has not seen w yet) and only then wait; here w is written inside the read's own
// system-call turn (RawConn.Read's function), after the read readiness was reset, so the
// goroutine waits for readability at once and loses no event that w's answer brings (an
// answer that came meanwhile is marked ready, and the wait returns at once). One read system
// call and one netpoller turn less for a proxy's request and its answer (docs/BENCHMARKS.md).
// A write that fills the socket is finished by Write, waiting for room, and then
// read by Read.
//
// n is Read's; a failed write returns Write's error (a *net.OpError "write") and n 0. The
// read deadline bounds the whole, and Close from another goroutine ends it, as for Read. It is
// a read and a write: no other Read or Write may run on c meanwhile.
func (c *Conn) WriteThenRead(w, p []byte) (n int, err error) {
	if len(w) == 0 {
		return c.Read(p)
	}
	if len(p) == 0 {
		_, err := c.Write(w)
		return 0, err
	}
	c.first, c.firstErr = w, 0
	c.rp, c.rn, c.rerr, c.nowait, c.again = p, 0, 0, false, false
	rerr := c.rc.Read(c.readFn)
	rest, werr := c.first, c.firstErr
	n, errno := c.rn, c.rerr
	c.rp, c.first = nil, nil
	switch {
	case werr == syscall.EAGAIN: // the socket is full: finish the write as Write does
		if _, err := c.Write(rest); err != nil {
			return 0, err
		}
		return c.Read(p)
	case werr != 0:
		return 0, c.opError("write", os.NewSyscallError("write", werr))
	case rerr != nil && rest != nil: // closed or past the deadline before anything was written
		return 0, c.opError("write", unwrapOp(rerr))
	case rerr != nil:
		return 0, c.opError("read", unwrapOp(rerr))
	case errno != 0:
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// read is the RawConn's: false waits for the socket to be readable (for ReadNow: true, and
// again says it was not). With WriteThenRead's write pending, its first call writes that and
// waits.
func (c *Conn) read(fd uintptr) bool {
	if c.first != nil {
		n, e := WriteFD(int(fd), c.first)
		if c.first = c.first[n:]; e != 0 {
			c.firstErr = e
			return true
		}
		c.first = nil
		return false // the answer cannot be here yet: wait for it
	}
	n, e := ReadFD(int(fd), c.rp)
	c.reads++
	switch e {
	case 0:
		c.rn = n
		return true
	case syscall.EAGAIN:
		c.again = c.nowait
		return c.nowait
	}
	c.rerr = e
	return true
}

// Reads is how many read system calls c made (the point of WriteThenRead is one less). It
// may not be called while a read runs.
func (c *Conn) Reads() int { return c.reads }

// Write writes all of p as net.Conn's Write does, waiting for room when the socket is full.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wp, c.wn, c.werr = p, 0, 0
	err := c.rc.Write(c.writeFn)
	n, errno := c.wn, c.werr
	c.wp = nil
	switch {
	case err != nil:
		return n, c.opError("write", unwrapOp(err))
	case errno != 0:
		return n, c.opError("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

// write is the RawConn's: it writes until p is all written (true) or the socket is full
// (false: wait for room, then it is called again for the rest).
func (c *Conn) write(fd uintptr) bool {
	n, e := WriteFD(int(fd), c.wp[c.wn:])
	c.wn += n
	if e == syscall.EAGAIN {
		return false
	}
	c.werr = e
	return true
}

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// unwrapOp takes the RawConn's *net.OpError ("raw-read") apart, to be wrapped as net.Conn's.
func unwrapOp(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}
