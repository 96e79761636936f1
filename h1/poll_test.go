//go:build linux

package h1

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// countingEpoll is the poller's system calls, counted, and failed on demand: a test's
// epollSys (the real ones are rawEpoll's).
type countingEpoll struct {
	rawEpoll
	mods     atomic.Int64          // EPOLL_CTL_MOD: registrations changed
	waits    atomic.Int64          // epoll_wait calls
	failNext atomic.Pointer[error] // the error the next wait meets instead of epoll_wait's
}

func (c *countingEpoll) ctl(epfd, op, fd int, ev unix.EpollEvent) error {
	if op == unix.EPOLL_CTL_MOD {
		c.mods.Add(1)
	}
	return c.rawEpoll.ctl(epfd, op, fd, ev)
}

func (c *countingEpoll) wait(epfd int, events []unix.EpollEvent) (int, error) {
	if e := c.failNext.Load(); e != nil {
		return 0, *e
	}
	c.waits.Add(1)
	return c.rawEpoll.wait(epfd, events)
}

// runPoller runs a poller with one connection registered for a request (evRead), whose
// events dispatch sends to got; client is the connection's other end, nc its server end; its
// system calls are counted in sys.
func runPoller(t *testing.T) (p *poller, sys *countingEpoll, client, nc net.Conn, got chan uint32) {
	t.Helper()
	sys = &countingEpoll{}
	p, err := newPoller(sys)
	if err != nil {
		t.Fatal(err)
	}
	client, nc = testutil.TCPPair(t)
	c := &conn{slot: -1}
	raw, _ := nc.(*net.TCPConn).SyscallConn()
	raw.Control(func(fd uintptr) { c.fd = int(fd) })
	got = make(chan uint32, 4)
	p.dispatch = func(_ *conn, ev uint32, _ bool) bool { got <- ev; return false }
	go p.run()
	t.Cleanup(func() { p.close() })
	if err := p.add(c, evRead); err != nil {
		t.Fatal(err)
	}
	return p, sys, client, nc, got
}

func TestPollerWakes(t *testing.T) {
	_, _, client, _, got := runPoller(t)
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
	_, sys, client, nc, got := runPoller(t)
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
	before := sys.waits.Load()
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
	if n := sys.waits.Load() - before; n > wakes+wakes/4 {
		t.Errorf("%d epoll_wait calls for %d wake-ups, want about one each", n, wakes)
	}
}
