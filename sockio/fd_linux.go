//go:build linux

package sockio

import (
	"syscall"
	"unsafe"
)

// ReadFD is one read of non-blocking socket fd into p (len(p) > 0), by a raw system call,
// retried on EINTR: syscall.EAGAIN when nothing can be read now, 0 bytes and no error at the
// end. The call is recvfrom(2), not read(2): the same on a socket, less the file layer's work
// (docs/BENCHMARKS.md).
func ReadFD(fd int, p []byte) (int, syscall.Errno) {
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), 0, 0, 0)
		if e != syscall.EINTR {
			return int(n), e
		}
	}
}

// WriteFD writes p (len(p) > 0) to non-blocking socket fd by raw system calls until it is
// all written, an error, or the socket is full (syscall.EAGAIN): the bytes written, and why it
// stopped (0: all written). The call is sendto(2) with MSG_NOSIGNAL, as ReadFD's: a peer
// gone is EPIPE, with no SIGPIPE sent for Go's runtime to ignore.
func WriteFD(fd int, p []byte) (int, syscall.Errno) {
	done := 0
	for done < len(p) {
		rest := p[done:]
		n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&rest[0])), uintptr(len(rest)), syscall.MSG_NOSIGNAL, 0, 0)
		switch e {
		case 0:
			done += int(n)
		case syscall.EINTR:
		default:
			return done, e
		}
	}
	return done, 0
}
