//go:build windows

package h1

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

// The portable poller's calls on Windows, where a socket in Go's netpoller is an overlapped
// handle: there is no read that does not wait, so a read "now" is a read under a deadline a
// moment away (readByDeadline), a write "now" likewise, and the watcher's wait is RawRead's
// zero-byte WSARecv.

// nonBlocking: no read can be tried without waiting (netSock.Read waits at once).
const nonBlocking = false

// netRaw: no raw calls here.
type netRaw struct{}

func (w *netSock) initRaw() {}

// look is the watcher's function for RawConn.Read. Its first call returns false, and RawRead
// waits with a zero-byte WSARecv, which completes once the socket has data or the end
// (internal/poll's fd_windows.go: the data is not taken); the second call tells the two apart
// by what the socket holds (FIONREAD, which does not wait). A reset fails the wait itself.
func (w *netSock) look(h uintptr) bool {
	if !w.waited {
		w.waited = true
		return false
	}
	var avail, n uint32
	err := windows.WSAIoctl(windows.Handle(h), fionread, nil, 0, (*byte)(unsafe.Pointer(&avail)), 4, &n, nil, 0)
	if err == nil && avail > 0 {
		w.seen = seenData
	} else {
		w.seen = seenEnd
	}
	return true
}

// fionread is winsock's FIONREAD: the bytes a socket holds to be read.
const fionread = 0x4004667f

func (w *netSock) readNow(p []byte) (int, error)  { return w.readByDeadline(p) }
func (w *netSock) writeNow(p []byte) (int, error) { return w.writeByDeadline(p) }

// readable cannot look without waiting: it says yes, and the read without waiting that
// follows (a wake with nothing to read parks the connection again) tells.
func (w *netSock) readable() bool { return true }
