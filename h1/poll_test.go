package h1

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	c := &conn{slot: -1}
	raw, _ := nc.(*net.TCPConn).SyscallConn()
	raw.Control(func(fd uintptr) { c.fd = int(fd) })
	got := make(chan uint32, 4)
	go p.run(func(_ *conn, ev uint32, _ bool) bool { got <- ev; return false }, nil)
	defer p.close()
	if err := p.add(c, evRead); err != nil {
		t.Fatal(err)
	}
	// The registration waits for room to write too: a new socket has it, and says so at once.
	select {
	case ev := <-got:
		if ev != unix.EPOLLOUT {
			t.Errorf("first event %x, want EPOLLOUT alone", ev)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the poller did not report a new connection's room to write")
	}
	client.Write([]byte("x"))
	select {
	case ev := <-got:
		if ev&unix.EPOLLIN == 0 {
			t.Errorf("event %x, want EPOLLIN", ev)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the poller did not wake for a readable connection")
	}
}
