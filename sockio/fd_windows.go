//go:build windows

package sockio

import (
	"errors"
	"syscall"
)

// supported: Windows's sockets are not read and written by raw calls here (they are
// overlapped handles, with no EAGAIN to wait on): New refuses, and the caller keeps its
// net.TCPConn, in Go's own poller.
const supported = false

var errUnsupported = errors.New("sockio: raw socket calls are not built on Windows")

// ReadFD and WriteFD are never called on Windows (New refuses every connection); they fail.
func ReadFD(int, []byte) (int, syscall.Errno)  { return 0, syscall.EWINDOWS }
func WriteFD(int, []byte) (int, syscall.Errno) { return 0, syscall.EWINDOWS }
