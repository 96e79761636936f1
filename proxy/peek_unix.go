//go:build unix

package proxy

import (
	"errors"
	"syscall"
)

// idleAlive looks at an idle pooled socket without waiting or taking anything: false when the
// router closed it or sent something unasked (a TLS alert), true while it is idle and open.
func idleAlive(fd uintptr) bool {
	var buf [1]byte
	n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch {
	case n > 0:
		return false // unsolicited bytes (or a TLS alert): not ours to read
	case err == nil: // n == 0: orderly shutdown by the router
		return false
	case errors.Is(err, syscall.EAGAIN):
		return true // nothing to read: the connection is idle and open
	}
	return false
}
