package mux

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// blockingInner is a transport that behaves as memberlist's NetTransport does at shutdown:
// its listeners send to unbuffered channels, and Shutdown waits for them, so a packet or a
// stream accepted just before it blocks Shutdown until someone reads it.
type blockingInner struct {
	packets chan *memberlist.Packet
	streams chan net.Conn
	done    chan struct{}
}

func (b *blockingInner) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return net.IPv4(127, 0, 0, 1), 1, nil
}
func (b *blockingInner) WriteTo([]byte, string) (time.Time, error) { return time.Now(), nil }
func (b *blockingInner) WriteToAddress([]byte, memberlist.Address) (time.Time, error) {
	return time.Now(), nil
}
func (b *blockingInner) PacketCh() <-chan *memberlist.Packet { return b.packets }
func (b *blockingInner) StreamCh() <-chan net.Conn           { return b.streams }
func (b *blockingInner) DialTimeout(string, time.Duration) (net.Conn, error) {
	return nil, net.ErrClosed
}
func (b *blockingInner) DialAddressTimeout(memberlist.Address, time.Duration) (net.Conn, error) {
	return nil, net.ErrClosed
}

// Shutdown delivers one last packet and one last stream, as listeners caught mid-accept do,
// and returns once both were taken.
func (b *blockingInner) Shutdown() error {
	c, _ := net.Pipe()
	b.packets <- &memberlist.Packet{Buf: []byte{1, 2, 3}}
	b.streams <- c
	close(b.done)
	return nil
}

// TestTransportShutdownDrainsInner pins that Shutdown keeps reading the inner transport's
// channels while it shuts down: memberlist's NetTransport waits for its listeners, which may
// be blocked sending what they accepted last (a hang seen under load in the gossip tests).
func TestTransportShutdownDrainsInner(t *testing.T) {
	inner := &blockingInner{packets: make(chan *memberlist.Packet), streams: make(chan net.Conn), done: make(chan struct{})}
	tr := NewTransport(inner, 0xFB, func([]byte) {}, NewListener(PipeAddr("test"), 1), nil, nil)
	done := make(chan error, 1)
	go func() { done <- tr.Shutdown() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown hung: the inner transport's last packet or stream was never read")
	}
	select {
	case <-inner.done:
	default:
		t.Fatal("Shutdown returned before the inner transport's")
	}
}
