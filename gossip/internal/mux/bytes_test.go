package mux

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/fenec/fenec-entry/gossip/memnet"
)

// TestBytesCounted pins that every byte through the gossip address is counted once, each way:
// packets memberlist's and the direct path's alike (a direct packet goes to its handler, not
// to memberlist, and is counted all the same), and streams dialled and accepted.
func TestBytesCounted(t *testing.T) {
	nw := memnet.New(1)
	var ab, bb Bytes
	direct := make(chan []byte, 1)
	a := NewTransport(nw.NewTransport("a"), 0xAB, func([]byte) {}, nil, nil, &ab)
	b := NewTransport(nw.NewTransport("b"), 0xAB, func(p []byte) { direct <- p }, nil, nil, &bb)
	defer a.Shutdown()
	defer b.Shutdown()
	to := memberlist.Address{Name: "b", Addr: b.NodeAwareTransport.(*memnet.Transport).Addr()}

	if _, err := a.WriteToAddress([]byte{1, 2, 3, 4, 5}, to); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteTo([]byte{0xAB, 2, 3}, to.Addr); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for range 2 {
		select {
		case <-b.PacketCh():
		case <-direct:
		case <-deadline:
			t.Fatal("a packet never arrived")
		}
	}

	c, err := a.DialAddressTimeout(to, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	wrote := make(chan error, 1)
	go func() { _, err := c.Write([]byte("hello")); wrote <- err }() // memnet's streams are pipes
	var s net.Conn
	select {
	case s = <-b.StreamCh():
	case <-deadline:
		t.Fatal("the stream never reached memberlist's channel")
	}
	defer s.Close()
	s.SetDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 5)
	if _, err := io.ReadFull(s, got); err != nil || string(got) != "hello" {
		t.Fatalf("read %q, %v", got, err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	go func() { _, err := s.Write([]byte("hi!")); wrote <- err }()
	if _, err := io.ReadFull(c, got[:3]); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}

	for _, row := range []struct {
		name      string
		got, want uint64
	}{
		{"a packet sent", ab.PacketSent.Load(), 8},
		{"b packet received", bb.PacketReceived.Load(), 8},
		{"a stream sent", ab.StreamSent.Load(), 5},
		{"b stream received", bb.StreamReceived.Load(), 5},
		{"b stream sent", bb.StreamSent.Load(), 3},
		{"a stream received", ab.StreamReceived.Load(), 3},
		{"a packet received", ab.PacketReceived.Load(), 0},
	} {
		if row.got != row.want {
			t.Errorf("%s: %d bytes, want %d", row.name, row.got, row.want)
		}
	}
}
