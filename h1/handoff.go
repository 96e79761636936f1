package h1

import (
	"net"
	"sync"
)

// Handoff is a net.Listener fed by Give: Server.Fallback gives it the connections this server
// does not serve, and a net/http Server serves them from it. Safe for concurrent use.
type Handoff struct {
	addr      net.Addr
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

// NewHandoff returns a Handoff whose Addr is addr (the real listener's).
func NewHandoff(addr net.Addr) *Handoff {
	return &Handoff{addr: addr, conns: make(chan net.Conn), closed: make(chan struct{})}
}

// Give hands c to the next Accept; once the Handoff is closed, c is closed instead.
func (h *Handoff) Give(c net.Conn) {
	select {
	case h.conns <- c:
	case <-h.closed:
		c.Close()
	}
}

func (h *Handoff) Accept() (net.Conn, error) {
	select {
	case c := <-h.conns:
		return c, nil
	case <-h.closed:
		return nil, net.ErrClosed
	}
}

func (h *Handoff) Close() error {
	h.closeOnce.Do(func() { close(h.closed) })
	return nil
}

func (h *Handoff) Addr() net.Addr { return h.addr }
