package node

import (
	"context"
	"net"
)

// leanServer is h1's server as the node runs it (--http1-server lean): built on Linux only
// (lean_linux.go), where h1's epoll is; elsewhere there is none, and the default is net/http
// (lean_other.go).
type leanServer interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
	StopKeepAlives()
	ProcsChanged()
	// ShedIdle closes up to n of the kept-alive connections idle longest, and says how many.
	ShedIdle(n int) int
}
