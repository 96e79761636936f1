//go:build !linux

package node

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// controlSocketpair is a worker's control socket pair, marked close-on-exec after it is made
// (no SOCK_CLOEXEC here; the exec that could inherit it in between is the worker's own, and
// it gets its ends by ExtraFiles).
func controlSocketpair() ([2]int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fds[0])
		unix.CloseOnExec(fds[1])
	}
	return fds, err
}

// workerProcAttr: no parent-death signal here; a worker whose master died sees its control
// socket end and stops.
func workerProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// masterExe is the binary a worker runs: the master's path (this system has no
// /proc/self/exe to keep it once a package upgrade replaces the file).
func masterExe() (string, error) { return os.Executable() }

// reusePortSpreads: SO_REUSEPORT here lets sockets share a port, but the kernel does not spread connections over them (one gets them all): workers would not share the load.
const reusePortSpreads = false
