//go:build !linux

package node

import "net"

// DefaultHTTP1Server is net/http where h1 is not built (it needs Linux's epoll).
const DefaultHTTP1Server = "std"

// leanBuilt: h1 is not built here; Validate refuses --http1-server lean.
const leanBuilt = false

// h1ShedBatch is never used here (there is no h1 to shed).
const h1ShedBatch = 0

// newLean is never called here (serveClient asks leanBuilt first).
func (n *Node) newLean(net.Addr) (leanServer, net.Listener) { return nil, nil }
