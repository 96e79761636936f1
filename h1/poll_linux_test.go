package h1

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
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
func runPoller(t *testing.T) (p *epoll, sys *countingEpoll, client, nc net.Conn, got chan uint32) {
	t.Helper()
	sys = &countingEpoll{}
	p, err := newEpoll(sys)
	if err != nil {
		t.Fatal(err)
	}
	client, nc = testutil.TCPPair(t)
	c := &conn{}
	c.slot = -1
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

// scriptedEpoll is a poller's system calls with no kernel behind them: ctl records each
// registration's event, and wait returns the batch a test put in next.
type scriptedEpoll struct {
	added map[int]unix.EpollEvent // fd -> the event its EPOLL_CTL_ADD registered
	next  []unix.EpollEvent
}

func (s *scriptedEpoll) ctl(_, op, fd int, ev unix.EpollEvent) error {
	if op == unix.EPOLL_CTL_ADD {
		s.added[fd] = ev
	}
	return nil
}

func (s *scriptedEpoll) wait(_ int, events []unix.EpollEvent) (int, error) {
	n := copy(events, s.next)
	s.next = nil
	return n, nil
}

// An event epoll_wait took for a connection that is closed before the event is dispatched
// must not reach the next connection given the same slot. Each connection counted its own
// registrations, so both were generation 1 and the closed one's "client left" reached the
// new one, busy with its first request: the request was cancelled and its client, on a new
// connection, read EOF with no answer (about one request in 460,000 under a storm of new
// connections).
func TestPollerDropsAnEventOfAClosedConnectionsSlot(t *testing.T) {
	sys := &scriptedEpoll{added: map[int]unix.EpollEvent{}}
	p, err := newEpoll(sys)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	var got []*conn
	p.dispatch = func(c *conn, _ uint32, _ bool) bool { got = append(got, c); return false }

	closed := &conn{}
	closed.fd, closed.slot = 1001, -1
	if err := p.add(closed, evRead); err != nil {
		t.Fatal(err)
	}
	slot := closed.slot
	p.release(closed) // its socket closed (conn.close)
	next := &conn{}
	next.fd, next.slot = 1002, -1
	if err := p.add(next, evRead); err != nil {
		t.Fatal(err)
	}
	if next.slot != slot {
		t.Fatalf("the next connection got slot %d, not the closed one's %d: the test's premise is gone", next.slot, slot)
	}

	stale := sys.added[closed.fd]
	stale.Events = unix.EPOLLIN | unix.EPOLLRDHUP
	fresh := sys.added[next.fd]
	fresh.Events = unix.EPOLLIN
	sys.next = []unix.EpollEvent{fresh, stale}
	p.wait(uintptr(p.epfd))
	if len(got) != 1 || got[0] != next {
		t.Fatalf("dispatched %d events (%v), want the next connection's own only", len(got), got)
	}
}

// A keep-alive GET changes no registration: a connection stays registered, edge-triggered,
// from its accept to its close (one epoll_ctl a request was 2% of the entry's CPU).
func TestKeepAliveRequestsChangeNoRegistration(t *testing.T) {
	sys := &countingEpoll{}
	s := &Server{Handler: http.HandlerFunc(okHandler), newPoll: withEpoll(sys)}
	addr := startLean(t, s)
	c, br := dial(t, addr)
	for i := range 50 {
		if i%10 == 0 {
			time.Sleep(10 * time.Millisecond) // parked meanwhile, and woken again
		}
		resp := get(t, c, br, "/")
		io.Copy(io.Discard, resp.Body)
	}
	if n := sys.mods.Load(); n != 0 {
		t.Errorf("50 keep-alive requests changed the registration %d times, want 0", n)
	}
}

// A poller that fails (epoll_wait's error) would leave every connection unwoken: the server
// closes instead, its connections with it, and Serve returns the error, so that the node stops
// rather than stay ready in front of hanging connections.
func TestPollerFailureEndsServe(t *testing.T) {
	var logged atomic.Value
	sys := &countingEpoll{}
	s := &Server{Handler: http.HandlerFunc(okHandler), ErrorLog: func(msg string) { logged.Store(msg) }, newPoll: withEpoll(sys)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() { s.Close() })
	c, br := dial(t, ln.Addr().String())
	resp := get(t, c, br, "/")
	io.Copy(io.Discard, resp.Body)
	time.Sleep(10 * time.Millisecond) // parked

	failure := error(syscall.EBADF)
	sys.failNext.Store(&failure)
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: e\r\n\r\n") // an event: the poller waits again, and fails
	select {
	case err := <-served:
		if err == nil || errors.Is(err, ErrServerClosed) || !errors.Is(err, syscall.EBADF) {
			t.Errorf("Serve returned %v, want the poller's failure", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return within 5 s of the poller's failure")
	}
	closedSoon(t, br, "the parked connection was not closed with the server")
	if msg, _ := logged.Load().(string); !strings.Contains(msg, "poller failed") {
		t.Errorf("ErrorLog was told %q, want the poller's failure", msg)
	}
}

// With more than one P, the goroutine that polled serves the connection its batch's last
// event woke, having handed the poller's role on (leader/follower); with one, every woken
// connection goes to a worker. Either way each request is answered.
func TestPollerServesTheLastWokenConnection(t *testing.T) {
	for _, procs := range []int{2, 1} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			s := &Server{Handler: http.HandlerFunc(okHandler)}
			addr := startLean(t, s)
			c, br := dial(t, addr)
			const requests = 20
			for range requests {
				resp := get(t, c, br, "/")
				io.Copy(io.Discard, resp.Body)
				time.Sleep(5 * time.Millisecond) // the connection parks between requests
			}
			leads := s.LeaderServed()
			// Each request comes after its connection parked, alone in its batch; a slow
			// machine may still be parking it when the next comes (served without a wake).
			if procs > 1 && leads < requests/2 {
				t.Errorf("the poller served %d of %d woken connections itself, want (nearly) all", leads, requests)
			}
			if procs == 1 && leads != 0 {
				t.Errorf("the poller served %d connections itself under one P, want none", leads)
			}
		})
	}
}

// ProcsChanged makes the poller follow GOMAXPROCS at once (package procs changes it at run
// time), not at the sweeper's next period (a second here).
func TestProcsChangedTakesEffectAtOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	s := &Server{Handler: http.HandlerFunc(okHandler)}
	addr := startLean(t, s)
	c, br := dial(t, addr)
	leads := s.LeaderServed
	serve := func(n int) {
		for range n {
			resp := get(t, c, br, "/")
			io.Copy(io.Discard, resp.Body)
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The poller is made (and reads GOMAXPROCS) when Serve starts: served from on 2 Ps first,
	// so that the change to 1 below is one it must be told of.
	serve(10)
	if leads() == 0 {
		t.Fatal("on 2 Ps the poller served no woken connection itself")
	}
	runtime.GOMAXPROCS(1)
	s.ProcsChanged()
	before := leads()
	serve(10)
	if got := leads() - before; got != 0 {
		t.Errorf("after GOMAXPROCS 1 and ProcsChanged, the poller served %d connections itself, want none", got)
	}
	runtime.GOMAXPROCS(2)
	s.ProcsChanged()
	before = leads()
	serve(20)
	if got := leads() - before; got < 10 {
		t.Errorf("after GOMAXPROCS 2 and ProcsChanged, the poller served %d of 20 woken connections itself, want (nearly) all", got)
	}
}
