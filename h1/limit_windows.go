package h1

import (
	"errors"

	"golang.org/x/sys/windows"
)

// outOfSockets reports whether an accept failed for want of sockets or buffers as Winsock
// says it (its errors are not the syscall package's EMFILE and ENOBUFS).
func outOfSockets(err error) bool {
	return errors.Is(err, windows.WSAEMFILE) || errors.Is(err, windows.WSAENOBUFS)
}
