package mux

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Bytes counts the bytes that cross the gossip address, packets and streams, each way, as
// the transport sees them (sealed, label headers included; IP and UDP headers not). One
// Bytes outlives the Transports of a Gossip's incarnations; safe for concurrent use.
type Bytes struct {
	PacketSent, PacketReceived atomic.Uint64
	StreamSent, StreamReceived atomic.Uint64
}

// WriteTo counts a packet memberlist sends and sends it.
func (t *Transport) WriteTo(b []byte, addr string) (time.Time, error) {
	t.bytes.PacketSent.Add(uint64(len(b)))
	return t.NodeAwareTransport.WriteTo(b, addr)
}

// WriteToAddress counts a packet memberlist (or the direct path) sends and sends it.
func (t *Transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	t.bytes.PacketSent.Add(uint64(len(b)))
	return t.NodeAwareTransport.WriteToAddress(b, a)
}

// DialTimeout opens a stream whose bytes are counted.
func (t *Transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := t.NodeAwareTransport.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return &countConn{Conn: c, b: t.bytes}, nil
}

// DialAddressTimeout opens a stream whose bytes are counted.
func (t *Transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	c, err := t.NodeAwareTransport.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	return &countConn{Conn: c, b: t.bytes}, nil
}

// countConn is a stream, dialled or accepted, whose bytes are counted.
type countConn struct {
	net.Conn
	b *Bytes
}

func (c *countConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.b.StreamReceived.Add(uint64(n))
	return n, err
}

func (c *countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.b.StreamSent.Add(uint64(n))
	return n, err
}
