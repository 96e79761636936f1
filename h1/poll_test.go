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
	p.dispatch = func(_ *conn, ev uint32, _ bool) bool { got <- ev; return false }
	go p.run()
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

// Each wake-up costs the poller one epoll_wait, the one that takes the event: it stays in one
// raw.Read between batches rather than look again (and find nothing) after each.
func TestPollerOneWaitAWake(t *testing.T) {
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
	p.dispatch = func(_ *conn, ev uint32, _ bool) bool { got <- ev; return false }
	go p.run()
	defer p.close()
	if err := p.add(c, evRead); err != nil {
		t.Fatal(err)
	}
	next := func() {
		t.Helper()
		select {
		case <-got:
		case <-time.After(2 * time.Second):
			t.Fatal("the poller did not wake")
		}
	}
	next() // room to write, at once
	time.Sleep(20 * time.Millisecond)
	const wakes = 20
	before := p.waits.Load()
	buf := make([]byte, 1)
	for range wakes {
		client.Write([]byte("x"))
		next()
		nc.Read(buf) // edge-triggered: the next byte is a new edge either way
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	// A readiness can race a batch's epoll_wait and cost one more: a few are allowed, not one
	// a wake-up.
	if n := p.waits.Load() - before; n > wakes+wakes/4 {
		t.Errorf("%d epoll_wait calls for %d wake-ups, want about one each", n, wakes)
	}
}
