package h1

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// epoll is a poller (poller.go): one epoll instance that watches idle connections (and busy
// ones for the client leaving, or for their goroutine waiting to read or write: sock_linux.go)
// without a goroutine each. A connection's socket is in no other epoll instance (Go's
// netpoller does not know it). Registrations are edge-triggered and stay: a connection is
// registered once, for a request or the client leaving, and an event comes each time the
// client sends. A keep-alive request costs no epoll_ctl; only a connection whose client sends
// while it is busy (a body, a pipelined request) is switched to the client leaving only, and
// back when it parks.
//
// The epoll instance is itself watched by Go's netpoller (an epoll fd is readable while it has
// events), so run parks like any socket read: no thread blocks in epoll_wait, and with one P
// the poller never holds it in a syscall.
type epoll struct {
	epfd int
	file *os.File // epfd, registered with Go's netpoller
	raw  syscall.RawConn
	mu   sync.Mutex // guards slots and free
	// slots maps an event's slot number to its connection; an event carries slot and
	// generation, so an event for a connection closed meanwhile (whose fd and slot may be
	// reused) is recognised and dropped. gen counts registrations, the poller's and not a
	// connection's: each connection's own count would start at 1, and a closed one's event
	// (taken by epoll_wait before its close) would match the next connection given its slot.
	slots []*conn
	free  []int32
	gen   int32
	sys   epollSys     // the system calls
	leads atomic.Int64 // connections run served itself, having handed its role on (Server.LeaderServed)
	// oneP: GOMAXPROCS is 1 (no leader/follower), read by the sweeper every period (it can
	// change at run time) rather than by run, under the scheduler's lock, every batch.
	oneP atomic.Bool

	// dispatch and handOn are run's (set once, before the first run): dispatch hands an event
	// to its connection, and says whether the caller serves it (it woke, and was the batch's
	// last); handOn hands the poller's role to another goroutine.
	dispatch func(c *conn, events uint32, last bool) (serve bool)
	handOn   func()

	// run's wait, made once: the function given to raw.Read and its results (a closure per
	// wait would allocate).
	events []unix.EpollEvent
	lead   *conn // the connection run's goroutine serves
	werr   error
	waitFn func(uintptr) bool
}

// epollSys is the poller's two system calls: rawEpoll's, unless a test gives the Server one
// that counts them or fails them. The event goes by value, so that a registration's does not
// escape to the heap through the interface.
type epollSys interface {
	ctl(epfd, op, fd int, ev unix.EpollEvent) error
	wait(epfd int, events []unix.EpollEvent) (int, error)
}

type rawEpoll struct{}

func (rawEpoll) ctl(epfd, op, fd int, ev unix.EpollEvent) error { return epollCtl(epfd, op, fd, &ev) }
func (rawEpoll) wait(epfd int, events []unix.EpollEvent) (int, error) {
	return epollWait(epfd, events)
}

// newEpoll makes a poller whose system calls are sys's (nil: rawEpoll).
func newEpoll(sys epollSys) (*epoll, error) {
	if sys == nil {
		sys = rawEpoll{}
	}
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "epoll")
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	p := &epoll{epfd: fd, file: f, raw: raw, sys: sys, events: make([]unix.EpollEvent, 256)}
	p.waitFn = p.wait
	p.checkProcs()
	return p, nil
}

// epollCtl and epollWait are unix.EpollCtl and unix.EpollWait (timeout 0) by raw system
// calls: neither can block, and a syscall.Syscall would wake sysmon after every idle moment
// and have it tick every 20 µs for the next millisecond (see package sockio, which does the
// same for the sockets' reads and writes).
func epollCtl(epfd, op, fd int, ev *unix.EpollEvent) error {
	_, _, e := syscall.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

func epollWait(epfd int, events []unix.EpollEvent) (int, error) {
	n, _, e := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// The event bits dispatch reads (poller.go) are epoll's: the array's length is 0 only while
// each one is.
var _ [0]struct{} = [(evIn ^ unix.EPOLLIN) | (evOut ^ unix.EPOLLOUT) | (evErr ^ unix.EPOLLERR) |
	(evHup ^ unix.EPOLLHUP) | (evRDHup ^ unix.EPOLLRDHUP) | (evET ^ unix.EPOLLET)]struct{}{}

// add registers c (armed with events) and gives it a slot.
func (p *epoll) add(c *conn, events uint32) error {
	p.mu.Lock()
	var slot int32
	if n := len(p.free); n > 0 {
		slot, p.free = p.free[n-1], p.free[:n-1]
		p.slots[slot] = c
	} else {
		slot = int32(len(p.slots))
		p.slots = append(p.slots, c)
	}
	c.slot = slot
	p.gen++
	c.gen = p.gen
	gen := c.gen
	p.mu.Unlock()
	ev := unix.EpollEvent{Events: events, Fd: slot, Pad: gen}
	if err := p.sys.ctl(p.epfd, unix.EPOLL_CTL_ADD, c.fd, ev); err != nil {
		p.release(c)
		return err
	}
	return nil
}

// arm changes what c's registration waits for. Edge-triggered, a change to what is true
// already (data waiting, the client gone) is reported at once.
func (p *epoll) arm(c *conn, events uint32) error {
	p.mu.Lock()
	ev := unix.EpollEvent{Events: events, Fd: c.slot, Pad: c.gen}
	p.mu.Unlock()
	if ev.Fd < 0 {
		return errClosed
	}
	return p.sys.ctl(p.epfd, unix.EPOLL_CTL_MOD, c.fd, ev)
}

// remove takes c out of epoll and frees its slot; before c's socket is handed on (closing it
// takes it out of epoll: release is enough then).
func (p *epoll) remove(c *conn) {
	p.sys.ctl(p.epfd, unix.EPOLL_CTL_DEL, c.fd, unix.EpollEvent{})
	p.release(c)
}

func (p *epoll) release(c *conn) {
	p.mu.Lock()
	if c.slot >= 0 && int(c.slot) < len(p.slots) && p.slots[c.slot] == c {
		p.slots[c.slot] = nil
		p.free = append(p.free, c.slot)
	}
	c.slot = -1
	p.mu.Unlock()
}

// wait is raw.Read's: it takes the events there are and hands each to its connection
// (dispatch). true: run returns (a connection to serve, in lead; or epoll_wait failed, in
// werr); false: raw.Read waits until epfd is readable again and calls wait again.
//
// Staying in the one raw.Read is what spares an epoll_wait a wake-up: raw.Read forgets a
// readiness that came before it is called (its prepareRead), so a new raw.Read must look
// first, and after each batch run would call epoll_wait once more only to find nothing. In
// one raw.Read, a readiness that comes after the batch's epoll_wait is kept for its wait.
// A batch that fills events may have left others behind, which no new readiness announces
// (epfd's registration is edge-triggered): wait takes the next batch at once.
func (p *epoll) wait(fd uintptr) bool {
	events := p.events
	for {
		n, err := p.sys.wait(int(fd), events)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			p.werr = err
			return true
		}
		lead := n - 1 // the event whose connection this goroutine serves, if it wakes one
		if p.oneP.Load() {
			lead = -1
		}
		for i := range n {
			ev := &events[i]
			p.mu.Lock()
			var c *conn
			if int(ev.Fd) < len(p.slots) {
				c = p.slots[ev.Fd]
			}
			ok := c != nil && c.gen == ev.Pad
			p.mu.Unlock()
			if ok && p.dispatch(c, ev.Events, i == lead) {
				p.lead = c
				return true
			}
		}
		if n < len(events) {
			return false
		}
	}
}

// run waits for events and hands each to its connection (dispatch), until close. The last
// event of a batch, if it wakes an idle connection, is not handed to a worker: run hands its
// own role to one (handOn) and returns the connection, for its goroutine to serve at once
// (leader/follower): the request then waits for no thread woken on another CPU. Only with more
// than one P: with one, nothing runs beside it, and the role's hand-off only put the new
// poller first in line, to wake for nothing (docs/BENCHMARKS.md).
// nil: closed, or epoll_wait failed (err: why; the poller is dead then).
func (p *epoll) run() (*conn, error) {
	p.lead, p.werr = nil, nil
	if err := p.raw.Read(p.waitFn); err != nil {
		return nil, nil // closed
	}
	if p.werr != nil {
		return nil, p.werr
	}
	c := p.lead
	p.lead = nil
	p.leads.Add(1)
	p.handOn() // out of raw.Read: the next poller's raw.Read would wait for this one's lock
	return c, nil
}

func (p *epoll) leaderServed() int64 { return p.leads.Load() }

// checkProcs notes whether GOMAXPROCS is 1.
func (p *epoll) checkProcs() { p.oneP.Store(runtime.GOMAXPROCS(0) == 1) }

// close ends run and closes the epoll instance.
func (p *epoll) close() error { return p.file.Close() }

// defaultPoll is the poller a Server uses unless a test gives it another (Server.newPoll):
// epoll, its system calls the kernel's.
func defaultPoll(s *Server) (poller, sockets, error) { return withEpoll(nil)(s) }

// withEpoll makes a Server's poller epoll with system calls sys (nil: rawEpoll's).
func withEpoll(sys epollSys) func(*Server) (poller, sockets, error) {
	return func(s *Server) (poller, sockets, error) {
		p, err := newEpoll(sys)
		if err != nil {
			return nil, nil, err
		}
		p.dispatch = s.dispatch
		p.handOn = func() { s.work.serve(pollRole) }
		return p, fdSockets{s}, nil
	}
}
