package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fenec/fenec-entry/internal/clock"
	"github.com/fenec/fenec-entry/sockio"

	"github.com/prometheus/client_golang/prometheus"
)

// router is one router of a region and its pool of idle keep-alive
// connections. The pool is bounded (maxIdle); connections in use are bounded
// by the handler's in-flight limit. Safe for concurrent use.
type router struct {
	reg     *regionState
	key     string // routerKey: the same router across routings
	name    string // scheme://host:port, for logs and status
	addr    string // host:port to dial
	tlsConf *tls.Config
	dialer  net.Dialer
	freeFDs func() bool // Config.FreeDescriptors

	maxIdle     int
	idleTimeout time.Duration // by clock
	clock       clock.Clock
	dropped     prometheus.Counter // connections closed because the idle pool was full

	state routerState // the last attempt, for RouterStatus; atomics only

	mu     sync.Mutex // guards the following fields
	idle   []*conn    // LIFO: the most recently used first
	closed bool
}

func newRouter(reg *regionState, key string, u *url.URL, serverName string, cfg *Config, dropped prometheus.Counter) *router {
	rt := &router{
		dropped:     dropped,
		reg:         reg,
		key:         key,
		name:        u.Scheme + "://" + u.Host,
		addr:        u.Host,
		dialer:      net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second},
		freeFDs:     cfg.FreeDescriptors,
		maxIdle:     cfg.MaxIdlePerRouter,
		idleTimeout: cfg.IdleTimeout,
		clock:       cfg.Clock,
	}
	if rt.clock == nil {
		rt.clock = clock.System
	}
	if u.Port() == "" {
		if u.Scheme == "https" {
			rt.addr = net.JoinHostPort(u.Hostname(), "443")
		} else {
			rt.addr = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	if u.Scheme == "https" {
		tc := &tls.Config{}
		if cfg.RouterTLS != nil {
			tc = cfg.RouterTLS.Clone()
		}
		if tc.ServerName == "" {
			tc.ServerName = u.Hostname()
		}
		if serverName != "" {
			tc.ServerName = serverName
		}
		tc.NextProtos = []string{"http/1.1"}
		rt.tlsConf = tc
	}
	return rt
}

// conn is one connection to a router. It counts the bytes read since the
// last request so a failure can tell "nothing came back" from a broken answer.
type conn struct {
	nc     net.Conn
	br     *bufio.Reader // 4 KiB, as nginx's proxy_buffer_size: heads are small
	reused bool
	read   int64     // bytes read since reset
	rerr   error     // the first read error (see Read)
	idleAt time.Time // when it was pooled, by the router's clock
	rt     *router
	// deadline is the one set on nc for answer heads (zero: none), kept from request to
	// request while it is far enough off (see answerDeadline); inBody: the head of the last
	// answer has come, and a read of its body from the socket lifts the deadline first.
	deadline time.Time
	inBody   bool
	// spare: the last answer's storage, delivered and handed back, for the next (see
	// plainAnswer); nil while an answer is out, or after one that was not.
	spare *plainAnswer
	// closeFn closes nc: made once, so that hooking it to each request's context allocates
	// nothing.
	closeFn func()
	// wtr is nc when it can write a request and wait for its answer in one turn (a plain TCP
	// router: sockio.Conn.WriteThenRead), else nil. deferLast makes the next Write (the
	// request's last flush) wait in pending for the first Read, which sends it that way.
	wtr       *sockio.Conn
	deferLast bool
	pending   []byte
}

// Write writes p to nc; the request's last flush (deferLast) is kept for Read instead: see wtr.
func (c *conn) Write(p []byte) (int, error) {
	if c.deferLast {
		c.deferLast, c.pending = false, p
		return len(p), nil
	}
	return c.nc.Write(p)
}

// flushRequest flushes bw, the request written to c, leaving its last bytes for the first Read
// when c can send them with it (wtr); bw's buffer must then stay unused until that Read.
func (c *conn) flushRequest(bw *bufio.Writer) error {
	c.deferLast = c.wtr != nil && c.br.Buffered() == 0 // (bytes already there would be read without a Read)
	err := bw.Flush()
	c.deferLast = false
	return err
}

// Read reads nc. Its first error stays: a later read returns it again, not what the socket
// says next (EOF after a reset), so that readAnswer's fallback to http.ReadResponse reports
// the failure that happened. A connection that failed a read is never pooled.
func (c *conn) Read(p []byte) (int, error) {
	if c.rerr != nil {
		return 0, c.rerr
	}
	if c.inBody && !c.deadline.IsZero() {
		// Once the head has arrived there is no time limit (streams, held writes).
		c.deadline = time.Time{}
		c.nc.SetDeadline(time.Time{})
	}
	var n int
	var err error
	if w := c.pending; w != nil {
		c.pending = nil
		n, err = c.wtr.WriteThenRead(w, p)
	} else {
		n, err = c.nc.Read(p)
	}
	c.read += int64(n)
	if err != nil {
		c.rerr = err
	}
	return n, err
}

// dialError is a connection never made: refused, DNS, no route, dial timeout
// or TLS handshake. The router cannot have seen the request; classifyFailure
// tells it by this type (outNeverMade).
type dialError struct{ err error }

func (e *dialError) Error() string { return "dial router: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// answerDeadline sets c's deadline for an answer head to a request sent at sent: at least
// timeout after it, and at most timeout/16 (1 s at the most) more. A deadline set for an
// earlier request that still falls in that window is kept: setting one is two changes of a
// runtime timer, 1.5% of the entry's CPU when done twice a request (docs/BENCHMARKS.md).
func (c *conn) answerDeadline(sent time.Time, timeout time.Duration) {
	c.inBody = false
	need := sent.Add(timeout)
	if !c.deadline.Before(need) {
		return
	}
	c.deadline = need.Add(min(timeout/16, time.Second))
	c.nc.SetDeadline(c.deadline)
}

// get returns a pooled connection, or a new one. fresh forces a new
// connection (the one repeat after a stale one). With check, a pooled
// connection is first peeked at (one syscall) so that a plain write is not
// sent on a connection the router already closed; a retryable request skips
// the check, since a stale connection costs it only the one repeat.
func (rt *router) get(ctx context.Context, fresh, check bool) (*conn, error) {
	if !fresh {
		for {
			c := rt.popIdle()
			if c == nil {
				break
			}
			if rt.clock.Now().Sub(c.idleAt) < rt.idleTimeout && (!check || c.alive()) {
				c.reused = true
				return c, nil
			}
			c.nc.Close()
		}
	}
	return rt.dial(ctx)
}

func (rt *router) popIdle() *conn {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	n := len(rt.idle)
	if n == 0 {
		return nil
	}
	c := rt.idle[n-1]
	rt.idle[n-1] = nil
	rt.idle = rt.idle[:n-1]
	return c
}

func (rt *router) dial(ctx context.Context) (*conn, error) {
	t0 := clock.System.Now() // a duration of real work
	nc, err := rt.dialer.DialContext(ctx, "tcp", rt.addr)
	if err != nil && rt.freeFDs != nil && (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) && rt.freeFDs() {
		nc, err = rt.dialer.DialContext(ctx, "tcp", rt.addr)
	}
	if err != nil {
		return nil, &dialError{err}
	}
	if took := clock.System.Now().Sub(t0); rt.reg != nil {
		rt.reg.lat.observe(took, rt.clock.Now().UnixNano()) // a connect is one round trip
	}
	if tcp, ok := nc.(*net.TCPConn); ok {
		if sc, err := sockio.New(tcp); err == nil {
			nc = sc
		}
	}
	if rt.tlsConf != nil {
		tc := tls.Client(nc, rt.tlsConf)
		hctx, cancel := context.WithTimeout(ctx, rt.dialer.Timeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			nc.Close()
			return nil, &dialError{err}
		}
		nc = tc
	}
	return newConn(nc, rt), nil
}

func newConn(nc net.Conn, rt *router) *conn {
	c := &conn{nc: nc, rt: rt}
	c.wtr, _ = nc.(*sockio.Conn)
	c.closeFn = func() { c.nc.Close() }
	c.br = bufio.NewReaderSize(c, 4<<10)
	return c
}

// A connection's writer is taken from a pool for the request's head and body, and given back
// once they are sent and the answer's head has come (its last bytes are sent with the first
// read: conn.wtr): a connection streaming an answer for hours (an event stream), or pooled
// idle, holds no write buffer.
var writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 8<<10) }}

func getWriter(w io.Writer) *bufio.Writer {
	bw := writerPool.Get().(*bufio.Writer)
	bw.Reset(w)
	return bw
}

func putWriter(bw *bufio.Writer) {
	bw.Reset(nil)
	writerPool.Put(bw)
}

// put returns a connection whose last answer was read to its end.
func (rt *router) put(c *conn) {
	c.idleAt = rt.clock.Now()
	rt.mu.Lock()
	if rt.closed || len(rt.idle) >= rt.maxIdle {
		full := !rt.closed
		rt.mu.Unlock()
		c.nc.Close()
		if full {
			rt.dropped.Inc()
		}
		return
	}
	rt.idle = append(rt.idle, c)
	rt.mu.Unlock()
}

// closeIdle closes every idle connection; with final, the pool keeps none
// from then on.
func (rt *router) closeIdle(final bool) {
	rt.mu.Lock()
	idle := rt.idle
	rt.idle = nil
	if final {
		rt.closed = true
	}
	rt.mu.Unlock()
	for _, c := range idle {
		c.nc.Close()
	}
}

func (rt *router) idleCount() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return len(rt.idle)
}

// alive peeks at an idle connection without blocking: a router that closed
// it (EOF), reset it, or sent bytes nobody asked for makes it unusable. This
// narrows the window in which a write could go to a connection the router has
// already closed to the time between this check and the write.
func (c *conn) alive() bool {
	if c.br.Buffered() > 0 {
		return false
	}
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		if tc, isTLS := c.nc.(*tls.Conn); isTLS {
			sc, ok = tc.NetConn().(syscall.Conn)
		}
		if !ok {
			return true
		}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := true
	// Control, not Read: a pooled connection may keep its last answer's deadline, past by
	// now, which Read would meet instead of looking.
	rerr := rc.Control(func(fd uintptr) { alive = idleAlive(fd) })
	return rerr == nil && alive
}

// probeAnswer sends HEAD probePath to the router on a connection of its own (dialled for it,
// closed after) and reports whether an answer head with Fenec-Shard came back, whatever its
// status, within timeout and before ctx ends. A connection accepted and never answered is
// false. The connect is a latency sample, as any dial.
func (rt *router) probeAnswer(ctx context.Context, timeout time.Duration) bool {
	c, err := rt.dial(ctx)
	if err != nil {
		return false
	}
	defer c.nc.Close()
	stop := context.AfterFunc(ctx, c.closeFn)
	defer stop()
	deadline := clock.System.Now().Add(timeout) // the kernel enforces it
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.nc.SetDeadline(deadline)
	host := strings.TrimPrefix(strings.TrimPrefix(rt.name, "http://"), "https://")
	if _, err := io.WriteString(c.nc, "HEAD "+probePath+" HTTP/1.1\r\nHost: "+host+
		"\r\nUser-Agent: fenec-entry-probe\r\nConnection: close\r\n\r\n"); err != nil {
		return false
	}
	req := &http.Request{Method: http.MethodHead}
	for range 4 { // interim 1xx answers, a few at most
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			v := resp.Header["Fenec-Shard"]
			return len(v) > 0 && v[0] == "1"
		}
	}
	return false
}
