//go:build unix

package h1

import (
	"io"
	"os"
	"syscall"

	"github.com/fenec/fenec-entry/sockio"
)

// The portable poller's raw calls where sockets are non-blocking (every Unix; Go's netpoller
// makes them so, so a peek needs no MSG_DONTWAIT, which AIX lacks): a read that does not wait,
// a peek and a write that does not wait are made on the descriptor beside the watcher's wait
// (RawConn.Control), without a kick.

// nonBlocking: the socket can be read without waiting (netSock.Read tries that first).
const nonBlocking = true

// netRaw is what a netSock keeps for its raw calls: their arguments and results, and their
// functions, made once (a closure a call would allocate).
type netRaw struct {
	rp     []byte
	rn     int
	rerr   syscall.Errno
	readFn func(uintptr)
	peekFn func(uintptr)
	peeked bool
}

func (w *netSock) initRaw() { w.readFn, w.peekFn = w.readRaw, w.peekRaw }

// look is the watcher's function for RawConn.Read: false (wait for the socket to be readable)
// while a peek finds nothing. It looks before any wait, for RawConn.Read forgets a readiness
// that came before it was called.
func (w *netSock) look(fd uintptr) bool {
	var b [1]byte
	for {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
		switch {
		case n > 0:
			w.seen = seenData
		case err == nil: // n == 0: the client closed its side
			w.seen = seenEnd
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return false
		default: // an error, which a read meets (a reset)
			w.seen = seenEnd
		}
		return true
	}
}

// readNow reads what the socket has, without waiting: errWouldBlock when it has nothing.
func (w *netSock) readNow(p []byte) (int, error) {
	if w.p.byDeadline {
		return w.readByDeadline(p)
	}
	w.rp = p
	err := w.rc.Control(w.readFn)
	n, e := w.rn, w.rerr
	w.rp = nil
	if err != nil { // closed
		return 0, opError("read", err)
	}
	// Read, or found empty: what the watcher saw (it may have peeked the bytes this read took)
	// is gone either way, and it looks again.
	w.readDone(true)
	switch {
	case e == syscall.EAGAIN:
		return 0, errWouldBlock
	case e != 0:
		return 0, opError("read", os.NewSyscallError("read", e))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (w *netSock) readRaw(fd uintptr) { w.rn, w.rerr = sockio.ReadFD(int(fd), w.rp) }

// readable peeks, without waiting.
func (w *netSock) readable() bool {
	if w.p.byDeadline {
		return true
	}
	if w.rc.Control(w.peekFn) != nil {
		return true // closed: a read meets it
	}
	if !w.peeked {
		w.readDone(true) // empty: the connection parks, and the watcher must look again
	}
	return w.peeked
}

func (w *netSock) peekRaw(fd uintptr) {
	var b [1]byte
	for {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
		if err != syscall.EINTR {
			w.peeked = err != syscall.EAGAIN
			return
		}
	}
}

// writeNow writes once, as a socket with room takes it.
func (w *netSock) writeNow(p []byte) (int, error) {
	if w.p.byDeadline {
		return w.writeByDeadline(p)
	}
	var n int
	var e syscall.Errno
	err := w.rc.Write(func(fd uintptr) bool {
		n, e = sockio.WriteFD(int(fd), p)
		return true
	})
	switch {
	case err != nil:
		return 0, opError("write", err)
	case e != 0:
		return max(n, 0), opError("write", os.NewSyscallError("write", e))
	}
	return n, nil
}
