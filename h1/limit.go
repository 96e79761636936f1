package h1

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// The bound on connections held (Server.MaxConns), and what the server does when it is
// reached or when descriptors run out, as nginx does with worker_connections: the kept-alive
// connections idle longest are closed first ("reusing connections"), and a new connection
// waits in the listen backlog only when none is idle.

// ShedBatch is the most idle kept-alive connections closed at a time (nginx's
// ngx_drain_connections closes up to 32 too): one scan of the connections frees room for that
// many accepts. Under a small MaxConns it is a 64th of the bound, at least 1.
const ShedBatch = 32

// shedBatch is how many connections one shed closes.
func (s *Server) shedBatch() int {
	if s.MaxConns <= 0 {
		return ShedBatch
	}
	return min(max(s.MaxConns/64, 1), ShedBatch)
}

// roomRecheck bounds how long the accept loop waits at the bound before it looks again for a
// connection to shed (a connection closing or parking wakes it sooner).
const roomRecheck = 50 * time.Millisecond

// Held is how many connections the server holds: those it serves or waits on, and those it
// handed to Fallback that are not closed yet.
func (s *Server) Held() int64 { return s.held.Load() }

// Shed is how many idle kept-alive connections the server closed to make room (at MaxConns,
// when accept ran out of descriptors, or asked by ShedIdle's other callers).
func (s *Server) Shed() int64 { return s.shed.Load() }

// ShedIdle closes up to n of the kept-alive connections idle longest (a new connection that
// has sent nothing yet is never one), and returns how many it closed. The accept loop calls it
// at MaxConns and when accept meets EMFILE; the node calls it when a router dial does. Safe for
// concurrent use.
func (s *Server) ShedIdle(n int) int {
	closed := 0
	for _, c := range s.longestIdle(n) {
		if c.state.CompareAndSwap(stateIdle, stateClosed) {
			c.close()
			closed++
		}
	}
	s.shed.Add(int64(closed))
	return closed
}

// longestIdle is up to n of the kept-alive connections idle now, those idle longest first: one
// scan of the connections, keeping the n oldest.
func (s *Server) longestIdle(n int) []*conn {
	type pick struct {
		c     *conn
		until int64
	}
	picks := make([]pick, 0, n)
	s.mu.Lock()
	for c := range s.conns {
		if !c.served.Load() || c.state.Load() != stateIdle {
			continue
		}
		// Idle connections all wait IdleTimeout from their last answer: the soonest to expire
		// is the longest idle.
		u := c.idleUntil.Load()
		if len(picks) == n && u >= picks[n-1].until {
			continue
		}
		i := len(picks)
		if i < n {
			picks = append(picks, pick{})
		} else {
			i = n - 1
		}
		for ; i > 0 && picks[i-1].until > u; i-- {
			picks[i] = picks[i-1]
		}
		picks[i] = pick{c, u}
	}
	s.mu.Unlock()
	out := make([]*conn, len(picks))
	for i, p := range picks {
		out[i] = p.c
	}
	return out
}

// waitRoom is the accept loop's, with a connection just accepted: it returns once the server
// holds fewer than MaxConns connections, shedding idle kept-alive ones to get there, or
// waiting for one to close or park while none is idle (the connection in hand waits, and those
// behind it wait in the listen backlog: at most MaxConns+1 are open, as with nginx, which also
// accepts before it looks for a free connection). It returns at once when Shutdown begins:
// the connection in hand is served as accept serves any then.
func (s *Server) waitRoom() {
	limit := int64(s.MaxConns)
	if limit <= 0 || s.held.Load() < limit {
		return
	}
	t := time.NewTimer(roomRecheck)
	defer t.Stop()
	for !s.down.Load() {
		if s.held.Load() < limit || s.ShedIdle(s.shedBatch()) > 0 {
			return
		}
		s.starved.Store(true)
		if s.held.Load() < limit { // closed between the look and the flag
			s.starved.Store(false)
			return
		}
		t.Reset(roomRecheck)
		select {
		case <-s.room:
		case <-t.C:
		}
		s.starved.Store(false)
	}
}

// roomMade wakes the accept loop if it waits at MaxConns: a connection closed or parked.
func (s *Server) roomMade() {
	if s.starved.Load() {
		select {
		case s.room <- struct{}{}:
		default:
		}
	}
}

// outOfDescriptors reports whether an accept failed for want of descriptors or memory: the
// process's or the system's open-file limit, socket buffers, kernel memory.
func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) || outOfSockets(err)
}

// heldConn is a connection handed to Fallback: it counts as held until it is closed.
type heldConn struct {
	net.Conn
	srv    *Server
	closed atomic.Bool
}

func (s *Server) holdHanded(nc net.Conn) net.Conn {
	s.held.Add(1)
	return &heldConn{Conn: nc, srv: s}
}

func (h *heldConn) Close() error {
	if h.closed.CompareAndSwap(false, true) {
		h.srv.held.Add(-1)
		h.srv.roomMade()
	}
	return h.Conn.Close()
}

// CloseWrite is the TCP connection's, for the server that is handed it (net/http).
func (h *heldConn) CloseWrite() error {
	if cw, ok := h.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
