//go:build linux

package node

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// controlSocketpair is a worker's control socket pair, close-on-exec from the start.
func controlSocketpair() ([2]int, error) {
	return unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
}

// workerProcAttr: the kernel kills a worker whose master dies, however it dies.
func workerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// masterExe is the binary a worker runs: the master's own, even once a package upgrade
// replaced the file (a worker started again later must speak the master's protocol, so never
// the path's newer binary).
func masterExe() (string, error) {
	const exe = "/proc/self/exe"
	_, err := os.Stat(exe)
	return exe, err
}

// reusePortSpreads: the kernel spreads a port's new connections over the sockets bound to it with SO_REUSEPORT.
const reusePortSpreads = true
