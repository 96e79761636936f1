//go:build !linux && !windows

package sockio

import "syscall"

// ReadFD is one read of non-blocking socket fd into p (len(p) > 0), retried on EINTR:
// syscall.EAGAIN when nothing can be read now, 0 bytes and no error at the end. Off Linux it
// is syscall.Read: the same, through the system's own entry (fd_linux.go says why Linux's is
// a raw recvfrom).
func ReadFD(fd int, p []byte) (int, syscall.Errno) {
	for {
		n, err := syscall.Read(fd, p)
		if err == syscall.EINTR {
			continue
		}
		return max(n, 0), errno(err)
	}
}

// WriteFD writes p (len(p) > 0) to non-blocking socket fd until it is all written, an error,
// or the socket is full (syscall.EAGAIN): the bytes written, and why it stopped (0: all
// written). A peer gone is EPIPE: Go's runtime ignores the SIGPIPE of a socket's write.
func WriteFD(fd int, p []byte) (int, syscall.Errno) {
	done := 0
	for done < len(p) {
		n, err := syscall.Write(fd, p[done:])
		switch {
		case err == nil:
			done += n
		case err == syscall.EINTR:
		default:
			return done, errno(err)
		}
	}
	return done, 0
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}
