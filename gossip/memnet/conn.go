package memnet

import (
	"net"
	"sync"
	"sync/atomic"
)

// streamPair is one established stream: two ends of a net.Pipe, registered
// with the network so that Partition, Kill and Shutdown can close it.
type streamPair struct {
	n              *Network
	a, b           *Transport // dialer, listener
	client, server *conn
	once           sync.Once    // for close
	ends           atomic.Int32 // ends closed by their owners
}

// newStreamPair registers a stream from a to b, unless either end is
// already shut down.
func (n *Network) newStreamPair(a, b *Transport) (*streamPair, error) {
	c1, c2 := net.Pipe()
	p := &streamPair{n: n, a: a, b: b}
	p.client = &conn{Conn: c1, local: a.tcpAddr, remote: b.tcpAddr, pair: p}
	p.server = &conn{Conn: c2, local: b.tcpAddr, remote: a.tcpAddr, pair: p}
	n.mu.Lock()
	defer n.mu.Unlock()
	// Checked under n.mu: Shutdown marks closed before it sweeps n.conns
	// under n.mu, so no pair registered here can escape the sweep.
	if a.isClosed() {
		return nil, ErrClosed
	}
	if b.isClosed() {
		return nil, ErrRefused
	}
	n.conns[p] = struct{}{}
	return p, nil
}

// close closes both ends, as a partition or a dead host does: each end's
// reads and writes fail. It is idempotent.
func (p *streamPair) close() {
	p.once.Do(func() {
		_ = p.client.Conn.Close()
		_ = p.server.Conn.Close()
		p.n.mu.Lock()
		delete(p.n.conns, p)
		p.n.mu.Unlock()
	})
}

// conn is one end of a stream. It reports the nodes' fake TCP addresses,
// where net.Pipe would say "pipe". Closing one end makes the other read
// io.EOF, as with TCP.
type conn struct {
	net.Conn
	local, remote net.Addr
	pair          *streamPair
	once          sync.Once
}

func (c *conn) LocalAddr() net.Addr  { return c.local }
func (c *conn) RemoteAddr() net.Addr { return c.remote }

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		if c.pair.ends.Add(1) == 2 {
			c.pair.close() // only unregisters: both ends are closed
		}
	})
	return err
}
