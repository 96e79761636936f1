package testutil

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// LinkState is what a Link does with the connections it gets.
type LinkState uint8

const (
	// LinkUp forwards every connection to the target, both ways.
	LinkUp LinkState = iota
	// LinkRefused closes the listener: connections are refused, as to a host whose port is
	// closed or a firewall that rejects.
	LinkRefused
	// LinkBlackhole accepts connections and never answers: what is written is read and
	// dropped, nothing comes back, until the other side closes.
	LinkBlackhole
)

// Link is one path to a target TCP address, that a test cuts and heals: an entry given the
// Link's Addr instead of a router's reaches the router only while the Link is up, while
// everything else reaches the router directly. Setting a state closes every connection open
// through the Link (a cut breaks them). Safe for concurrent use; closed when the test ends.
type Link struct {
	Addr   string // host:port to dial instead of the target
	target string

	mu    sync.Mutex // guards the following
	ln    net.Listener
	state LinkState
	conns map[net.Conn]struct{}
	done  bool
}

// NewLink starts an up Link to target on a loopback port.
func NewLink(t testing.TB, target string) *Link {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &Link{Addr: ln.Addr().String(), target: target, conns: map[net.Conn]struct{}{}}
	l.serve(ln)
	t.Cleanup(l.close)
	return l
}

// Set changes what the Link does from now on, closing every connection open through it. From
// LinkRefused it listens on Addr again, retrying for a second (it fails the test beyond).
func (l *Link) Set(t testing.TB, s LinkState) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.Close()
		delete(l.conns, c)
	}
	switch {
	case s == LinkRefused && l.ln != nil:
		l.ln.Close()
		l.ln = nil
	case s != LinkRefused && l.ln == nil:
		var ln net.Listener
		var err error
		for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
			if ln, err = net.Listen("tcp", l.Addr); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatalf("link %s: listen again: %v", l.Addr, err)
		}
		l.serve(ln)
	}
	l.state = s
}

// serve accepts on ln; l.mu is held or l is not yet shared.
func (l *Link) serve(ln net.Listener) {
	l.ln = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			if l.done || l.ln != ln {
				l.mu.Unlock()
				c.Close()
				return
			}
			l.conns[c] = struct{}{}
			state := l.state
			l.mu.Unlock()
			go l.handle(c, state)
		}
	}()
}

func (l *Link) handle(c net.Conn, state LinkState) {
	defer l.forget(c)
	if state == LinkBlackhole {
		io.Copy(io.Discard, c)
		return
	}
	up, err := net.DialTimeout("tcp", l.target, time.Second)
	if err != nil {
		return
	}
	l.mu.Lock()
	if _, open := l.conns[c]; !open {
		l.mu.Unlock()
		up.Close()
		return
	}
	l.conns[up] = struct{}{}
	l.mu.Unlock()
	defer l.forget(up)
	go func() {
		io.Copy(up, c)
		up.Close()
	}()
	io.Copy(c, up)
}

func (l *Link) forget(c net.Conn) {
	c.Close()
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

func (l *Link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	if l.ln != nil {
		l.ln.Close()
	}
	for c := range l.conns {
		c.Close()
	}
}
