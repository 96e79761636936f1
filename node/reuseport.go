package node

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// reusePort is the client listener's net.ListenConfig.Control under --reuse-port: SO_REUSEPORT
// before the bind, so entries of the same user on this host can listen on one address and the
// kernel spreads new connections over them by their addresses' hash. Linux only lets sockets
// of the same effective user share the port.
func reusePort(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
