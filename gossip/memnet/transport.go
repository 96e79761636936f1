package memnet

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/fenec/fenec-entry/internal/clock"
)

// QueueLen bounds, per node, both the packets waiting out their latency and
// the packets delivered but not yet read by memberlist. A packet that finds
// either full is dropped and counted in Stats.DroppedQueueFull.
const QueueLen = 1024

var (
	// ErrClosed is returned by a transport's methods after its Shutdown.
	ErrClosed = errors.New("memnet: transport shut down")
	// ErrRefused is returned by a dial to a node whose transport was shut
	// down: its host answers, its process does not.
	ErrRefused = errors.New("memnet: connection refused")
	// ErrNoRoute is returned for an address that no transport of the
	// network ever had.
	ErrNoRoute = errors.New("memnet: no route to host")
)

// Transport is one node's end of a Network. It implements
// memberlist.NodeAwareTransport; create it with Network.NewTransport and
// hand it to memberlist.Config.Transport. It is safe for concurrent use, and
// owns one goroutine, which Shutdown stops.
type Transport struct {
	net      *Network
	name     string
	addr     string
	udpAddr  *net.UDPAddr
	tcpAddr  *net.TCPAddr
	packetCh chan *memberlist.Packet
	streamCh chan net.Conn // unbuffered: a dial succeeds only when memberlist takes the conn
	killed   atomic.Bool
	done     chan struct{} // closed by Shutdown
	once     sync.Once
	stopped  chan struct{} // closed when the scheduler has returned

	mu      sync.Mutex // guards the following fields
	closed  bool
	pending pendingHeap
	wake    chan struct{} // cap 1: pending changed
}

var (
	_ memberlist.NodeAwareTransport = (*Transport)(nil)
	_ memberlist.Transport          = (*Transport)(nil)
)

func newTransport(n *Network, name, addr string) *Transport {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	ip := net.ParseIP(host)
	t := &Transport{
		net:      n,
		name:     name,
		addr:     addr,
		udpAddr:  &net.UDPAddr{IP: ip, Port: p},
		tcpAddr:  &net.TCPAddr{IP: ip, Port: p},
		packetCh: make(chan *memberlist.Packet, QueueLen),
		streamCh: make(chan net.Conn),
		done:     make(chan struct{}),
		stopped:  make(chan struct{}),
		wake:     make(chan struct{}, 1),
	}
	go t.schedule()
	return t
}

// Name returns the node name the transport was created for.
func (t *Transport) Name() string { return t.name }

// Addr returns the transport's fake "ip:port" address, the one memberlist
// advertises and other nodes Join.
func (t *Transport) Addr() string { return t.addr }

// FinalAdvertiseAddr returns the transport's own address, whatever is
// asked: memberlist's bind and advertise settings mean nothing here.
func (t *Transport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return t.udpAddr.IP, t.udpAddr.Port, nil
}

// WriteTo sends a packet to addr; see WriteToAddress.
func (t *Transport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress sends a copy of b to the node named a.Name or, if that is
// empty or unknown, at a.Addr. It never blocks: like UDP, a packet that
// cannot be delivered is dropped silently (and counted). It returns an
// error only for an address no transport ever had, or after Shutdown.
func (t *Transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	c := &t.net.counters
	now := clock.System.Now()
	c.sent.Add(1)
	c.sentBytes.Add(uint64(len(b)))
	if t.isClosed() {
		c.droppedDown.Add(1)
		return now, ErrClosed
	}
	dst, v, delay := t.net.route(t, addrKey{a.Name, a.Addr}, true)
	switch v {
	case noRoute:
		c.noRoute.Add(1)
		return now, fmt.Errorf("memnet: write to %s: %w", a.String(), ErrNoRoute)
	case unreachable:
		if t.killed.Load() || dst.killed.Load() {
			c.droppedDown.Add(1)
		} else {
			c.droppedPartition.Add(1)
		}
		return now, nil
	case lost:
		c.droppedLoss.Add(1)
		return now, nil
	case refused:
		c.droppedDown.Add(1)
		return now, nil
	}
	p := &memberlist.Packet{Buf: append([]byte(nil), b...), From: t.udpAddr}
	if delay <= 0 {
		dst.deliver(p)
	} else {
		dst.enqueue(p, now.Add(delay))
	}
	return now, nil
}

// PacketCh returns the channel of packets received. It is never closed.
func (t *Transport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

// StreamCh returns the channel of accepted streams. It is never closed.
func (t *Transport) StreamCh() <-chan net.Conn { return t.streamCh }

// DialTimeout dials addr; see DialAddressTimeout.
func (t *Transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout opens a reliable stream to the node named a.Name or, if
// that is empty or unknown, at a.Addr, taking one latency draw. A dial that
// cannot reach its node (partition, either end killed) fails when timeout
// elapses, with an error matching os.ErrDeadlineExceeded; a timeout <= 0
// waits until this transport shuts down. A dial to a shut-down node fails
// with ErrRefused.
func (t *Transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	c := &t.net.counters
	c.dials.Add(1)
	conn, err := t.dial(a, timeout)
	if err != nil {
		c.dialsFailed.Add(1)
		return nil, &net.OpError{Op: "dial", Net: "memnet", Source: t.tcpAddr, Addr: addrString(a.Addr), Err: err}
	}
	return conn, nil
}

func (t *Transport) dial(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.isClosed() {
		return nil, ErrClosed
	}
	var expired <-chan time.Time
	if timeout > 0 {
		tm := time.NewTimer(timeout)
		defer tm.Stop()
		expired = tm.C
	}
	dst, v, delay := t.net.route(t, addrKey{a.Name, a.Addr}, false)
	switch v {
	case noRoute:
		return nil, ErrNoRoute
	case unreachable:
		select {
		case <-expired:
			return nil, os.ErrDeadlineExceeded
		case <-t.done:
			return nil, ErrClosed
		}
	}
	if delay > 0 {
		d := time.NewTimer(delay)
		defer d.Stop()
		select {
		case <-d.C:
		case <-expired:
			return nil, os.ErrDeadlineExceeded
		case <-t.done:
			return nil, ErrClosed
		}
	}
	if v == refused {
		return nil, ErrRefused
	}
	p, err := t.net.newStreamPair(t, dst)
	if err != nil {
		return nil, err
	}
	select {
	case dst.streamCh <- p.server:
		return p.client, nil
	case <-dst.done:
		p.close()
		return nil, ErrRefused
	case <-t.done:
		p.close()
		return nil, ErrClosed
	case <-expired:
		p.close()
		return nil, os.ErrDeadlineExceeded
	}
}

// Shutdown stops the transport: its scheduler goroutine returns, queued
// packets are discarded, nothing is delivered to it any more, its streams
// are closed and its pending dials fail. Later packets to it are dropped
// and dials to it are refused. Shutdown is idempotent, always returns nil,
// and returns after the scheduler has stopped.
func (t *Transport) Shutdown() error {
	t.once.Do(func() {
		t.mu.Lock()
		t.closed = true
		t.pending = nil
		t.mu.Unlock()
		close(t.done)
		n := t.net
		n.mu.Lock()
		cut := n.collectConnsLocked(func(p *streamPair) bool { return p.a == t || p.b == t })
		n.mu.Unlock()
		closeAll(cut)
	})
	<-t.stopped
	return nil
}

func (t *Transport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

type addrString string

func (a addrString) Network() string { return "memnet" }
func (a addrString) String() string  { return string(a) }
