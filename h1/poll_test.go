package h1

import (
	"net"
	"testing"
	"time"
)

func TestPollerWakes(t *testing.T) {
	p, err := newPoller()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := &conn{nc: nc.(*net.TCPConn), slot: -1}
	raw, _ := c.nc.SyscallConn()
	raw.Control(func(fd uintptr) { c.fd = int(fd) })
	got := make(chan uint32, 4)
	go p.run(func(_ *conn, ev uint32) { got <- ev })
	defer p.close()
	if err := p.add(c, evRead); err != nil {
		t.Fatal(err)
	}
	client.Write([]byte("x"))
	select {
	case ev := <-got:
		if ev&0x1 == 0 {
			t.Errorf("event %x, want EPOLLIN", ev)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the poller did not wake for a readable connection")
	}
}
