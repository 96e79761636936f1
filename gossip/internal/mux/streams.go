package mux

import (
	"io"
	"net"
	"sync"
	"time"

	"github.com/fenec/fenec-entry/internal/clock"
)

// One gossip address (docs/REFERENCE.md, "Configuration"). The joiner's table and repair travel
// over memberlist's own TCP port, as direct homes travel over its UDP port: a stream that opens
// with the byte SyncMagic is a sync stream (an HTTP/1.1 exchange with the table's server
// follows, past that byte), any other is memberlist's and is handed to it with its first byte
// put back. The dialer of a sync stream writes SyncMagic first. No memberlist
// stream begins with SyncMagic: memberlist's own begin with a message type below 16, the
// label header 244 or an encryption version. So an entry opens no listener of its own for
// peers, and the table follows --gossip-bind wherever it binds.
const SyncMagic byte = 0xFB

// Bounds of the stream sorter.
const (
	// sortTimeout is how long a new stream may take to send its first byte before it is
	// closed (memberlist's own streams send theirs at once).
	sortTimeout = 5 * time.Second
	// maxSorting bounds the streams waiting for their first byte; past it new streams are
	// closed at once and counted (streams_refused_total{reason="sorting"}).
	maxSorting = 64
	// SyncBacklog bounds the sync streams accepted and not yet taken by the HTTP server; past
	// it they are closed and counted (reason "backlog").
	SyncBacklog = 16
)

// sortStreams reads the inner transport's streams until stop closes: each goes to memberlist
// (t.streams) or to the sync listener, by its first byte, read on a goroutine of its own (at
// most maxSorting at once) so that a slow peer holds no other stream up. Once closing has
// closed, each is closed unread.
func (t *Transport) sortStreams() {
	defer t.wg.Done()
	src := t.NodeAwareTransport.StreamCh()
	sem := make(chan struct{}, maxSorting)
	for {
		select {
		case <-t.stop:
			return
		case c := <-src:
			select {
			case <-t.closing:
				c.Close()
				continue
			default:
			}
			select {
			case sem <- struct{}{}:
			default:
				c.Close()
				t.refused("sorting")
				continue
			}
			t.wg.Add(1)
			go func() {
				defer t.wg.Done()
				defer func() { <-sem }()
				t.sortOne(c)
			}()
		}
	}
}

func (t *Transport) sortOne(c net.Conn) {
	c = &countConn{Conn: c, b: t.bytes}
	t.mu.Lock()
	select {
	case <-t.closing:
		t.mu.Unlock()
		c.Close()
		return
	default:
	}
	t.sorting[c] = struct{}{}
	t.mu.Unlock()
	var b [1]byte
	c.SetReadDeadline(clock.System.Now().Add(sortTimeout))
	_, err := io.ReadFull(c, b[:])
	t.mu.Lock()
	delete(t.sorting, c)
	t.mu.Unlock()
	if err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	if b[0] == SyncMagic {
		if t.sync == nil || !t.sync.Push(c) {
			c.Close()
			t.refused("backlog")
		}
		return
	}
	select {
	case t.streams <- &prefixConn{Conn: c, first: b[0]}:
	case <-t.closing:
		c.Close()
	}
}

func (t *Transport) refused(reason string) {
	if t.onRefused != nil {
		t.onRefused(reason)
	}
}

// StreamCh is what memberlist reads: every stream but the sync streams.
func (t *Transport) StreamCh() <-chan net.Conn { return t.streams }

// prefixConn is a stream whose first byte was read to sort it: Read returns it first.
type prefixConn struct {
	net.Conn
	first byte
	used  bool
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if !c.used && len(p) > 0 {
		c.used = true
		p[0] = c.first
		return 1, nil
	}
	return c.Conn.Read(p)
}

// Listener is a net.Listener whose connections are pushed to it (the sync streams of
// every serf incarnation, the RPC connections of the current one). Safe for concurrent use;
// Close is idempotent and closes the connections not yet accepted.
type Listener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func NewListener(addr net.Addr, backlog int) *Listener {
	return &Listener{addr: addr, ch: make(chan net.Conn, backlog), done: make(chan struct{})}
}

// push hands c to Accept; false (c untouched) if the backlog is full or the listener closed.
func (l *Listener) Push(c net.Conn) bool {
	select {
	case <-l.done:
		return false
	default:
	}
	select {
	case l.ch <- c:
		return true
	default:
		return false
	}
}

func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.done)
		for {
			select {
			case c := <-l.ch:
				c.Close()
			default:
				return
			}
		}
	})
	return nil
}

func (l *Listener) Addr() net.Addr { return l.addr }

// PipeAddr names a Listener's address where there is no socket of its own.
type PipeAddr string

func (a PipeAddr) Network() string { return "gossip" }
func (a PipeAddr) String() string  { return string(a) }
