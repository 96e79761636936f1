//go:build linux

package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// connhold: -n clients of a proxy that account for every request they make. Each dials
// (from 127.0.0.1 .. 127.0.0.K in turn with -sources K), shakes hands over TLS with -tls
// (HTTP/1.1 by ALPN, the certificate not checked), and makes requests, every one within
// -timeout. By default each makes one GET of -path, which must be answered 200, and then holds
// its connection, idle (the body read to its end; an answer that closes it is not held), or
// with -stream an event stream whose first event must be "open"; -parallel at a time are being
// opened. Once every one is held or has failed it prints one JSON line (the counts below, held,
// open_ms: the time to open them all, last_ok_ms: to the last one held) and READY, and holds
// them until stdin ends or SIGINT/SIGTERM; then DONE closed=C, C the held connections the other
// side closed (or, idle, sent something on) meanwhile. More than -max-failed failures exit 1.
// With -load each client makes one request after another, on a kept-alive connection or a new
// one each (-close), until -duration has passed (0: until stdin ends or SIGINT/SIGTERM), each
// finishing the request it is making; with -slow every byte of a request is written alone,
// after a pause from -byte-min to -byte-max, and every second request is a POST of -body bytes;
// -per-conn K closes a connection after K requests. It then prints the JSON line.
//
// A request is counted once its first byte is written (over TLS: once the handshake of its new
// connection has begun), and then ends in exactly one way: answered (a whole answer read, by
// status), or LOST (by kind: eof, reset, partial, broken_pipe, timeout, handshake_...). A dial
// that fails writes no request: refused (nothing listens), connect_timeout or connect_error,
// counted apart. A kept-alive connection found closed before the next request is written is
// closed_idle, not a request: a client that looks before it writes, as Go's Transport does,
// sees it and dials again.

type holdOpts struct {
	addr, path, host                    string
	n, parallel, sources, maxFailed     int
	perConn, body                       int
	timeout, byteMin, byteMax, duration time.Duration
	stream, tls, load, close, slow      bool
}

func connholdMain(args []string) error {
	var o holdOpts
	fs := flag.NewFlagSet("connhold", flag.ExitOnError)
	fs.StringVar(&o.addr, "addr", "", "the proxy, `host:port` (required)")
	fs.StringVar(&o.path, "path", reqPath, "the requests' path")
	fs.IntVar(&o.n, "n", 1000, "clients (connections held)")
	fs.BoolVar(&o.stream, "stream", false, "hold server-sent event streams whose first event is \"event: open\"")
	fs.IntVar(&o.parallel, "parallel", 64, "connections being opened at once (hold)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "bound of each dial, and of each request with its answer")
	fs.IntVar(&o.sources, "sources", 1, "dial from 127.0.0.1 .. 127.0.0.`K` in turn (more source ports on loopback)")
	fs.IntVar(&o.maxFailed, "max-failed", 0, "connections that may fail before connhold gives up (hold)")
	fs.BoolVar(&o.tls, "tls", false, "speak HTTPS (HTTP/1.1 by ALPN, the server's certificate not checked: a bench on loopback)")
	fs.BoolVar(&o.load, "load", false, "make requests without end instead of holding connections")
	fs.BoolVar(&o.close, "close", false, "-load: a new connection for each request (Connection: close)")
	fs.BoolVar(&o.slow, "slow", false, "-load: write each request a byte at a time, every second one a POST with a body")
	fs.DurationVar(&o.byteMin, "byte-min", 5*time.Millisecond, "-slow: the shortest pause before a byte")
	fs.DurationVar(&o.byteMax, "byte-max", 20*time.Millisecond, "-slow: the longest pause before a byte")
	fs.IntVar(&o.perConn, "per-conn", 0, "-load: requests on a connection before the client dials again (0: no limit)")
	fs.IntVar(&o.body, "body", 32, "-slow: the bytes of a POST's body")
	fs.DurationVar(&o.duration, "duration", 0, "-load: how long to run (0: until stdin ends or SIGINT/SIGTERM)")
	fs.Parse(args)
	switch {
	case o.addr == "" || o.n < 1 || o.parallel < 1 || o.timeout <= 0 || o.sources < 1 || o.sources > 254:
		return errors.New("-addr is required; -n and -parallel: 1 or more; -timeout positive; -sources 1..254")
	case o.load && o.stream || !o.load && (o.close || o.slow || o.perConn != 0 || o.duration != 0):
		return errors.New("-stream is for holding; -close, -slow, -per-conn and -duration for -load")
	case o.byteMin < 0 || o.byteMax < o.byteMin || o.perConn < 0 || o.body < 0 || o.duration < 0 || o.maxFailed < 0:
		return errors.New("-byte-min <= -byte-max, -per-conn, -body, -duration and -max-failed: 0 or more")
	}
	o.host = o.addr
	release := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	var once sync.Once
	end := func() { once.Do(func() { close(release) }) }
	go func() { <-sig; end() }()
	if o.duration > 0 {
		time.AfterFunc(o.duration, end)
	} else {
		go func() { io.Copy(io.Discard, os.Stdin); end() }()
	}
	if o.load {
		return json.NewEncoder(os.Stdout).Encode(runLoad(o, release))
	}
	r, conns := openAll(o)
	json.NewEncoder(os.Stdout).Encode(r)
	if failed := o.n - int(r.Held); failed > o.maxFailed {
		closeAll(conns)
		return fmt.Errorf("%d of %d connections failed (-max-failed %d); examples: %v", failed, o.n, o.maxFailed, r.Examples)
	}
	fmt.Printf("READY conns=%d failed=%d\n", r.Held, o.n-int(r.Held))
	// Each held connection is read until it ends: a stream's keep-alive comments are
	// discarded; on an idle connection nothing should come.
	var closed atomic.Int64
	for _, lc := range conns {
		go func() {
			if o.stream {
				io.Copy(io.Discard, lc.br)
			} else {
				lc.br.ReadByte()
			}
			closed.Add(1)
		}()
	}
	<-release
	fmt.Printf("DONE closed=%d\n", closed.Load())
	closeAll(conns)
	return nil
}

// loadResult is connhold's JSON line. Safe for concurrent use through its methods.
type loadResult struct {
	mu           sync.Mutex
	Requests     int64            `json:"requests"`
	AnsweredBy   map[string]int64 `json:"answered_by_status"`
	LostBy       map[string]int64 `json:"lost_by_kind"`
	LostOnReused int64            `json:"lost_on_reused"` // lost requests written on a kept-alive connection
	DialFailed   map[string]int64 `json:"dial_failed_by_kind"`
	ClosedIdle   int64            `json:"closed_idle"`
	Connections  int64            `json:"connections"`
	Held         int64            `json:"held,omitempty"`
	OpenMs       int64            `json:"open_ms,omitempty"`
	LastOKMs     int64            `json:"last_ok_ms,omitempty"`
	ElapsedMs    int64            `json:"elapsed_ms"`
	Examples     []lostExample    `json:"examples"` // the first lost requests and failed dials (refused aside)
}

type lostExample struct {
	AtUnixMs int64  `json:"at_unix_ms"`
	Kind     string `json:"kind"`
	Err      string `json:"err"`
}

func newResult() *loadResult {
	return &loadResult{AnsweredBy: map[string]int64{}, LostBy: map[string]int64{}, DialFailed: map[string]int64{}, Examples: []lostExample{}}
}

// count adds one to m[k], and to the requests when req, with err as an example.
func (t *loadResult) count(m map[string]int64, k string, req bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m[k]++; req {
		t.Requests++
	}
	if err != nil && k != "refused" && len(t.Examples) < 10 { // refused says all there is
		t.Examples = append(t.Examples, lostExample{time.Now().UnixMilli(), k, err.Error()})
	}
}

// inc adds one to *p.
func (t *loadResult) inc(p *int64) {
	t.mu.Lock()
	*p++
	t.mu.Unlock()
}

// dialKind is the kind of a failed dial.
func dialKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.As(err, &ne) && ne.Timeout():
		return "connect_timeout"
	}
	return "connect_error"
}

// lostKind is the kind of a request that failed after it was written (or began to be), got
// being whether any byte of its answer had come.
func lostKind(err error, got bool) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case got && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)):
		return "partial" // it ended, or was reset, part-way through the answer
	case errors.Is(err, syscall.EPIPE):
		return "broken_pipe" // the request could not be written
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "eof" // the connection ended before any byte of the answer
	}
	return "other"
}

// openAll is the hold mode's opening: every client makes its one request, -parallel at a time.
func openAll(o holdOpts) (*loadResult, []*loadConn) {
	t, start := newResult(), time.Now()
	var mu sync.Mutex // guards conns
	var conns []*loadConn
	sem := make(chan struct{}, o.parallel)
	var wg sync.WaitGroup
	for i := range o.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			lc := clientLoop(o, i, t, nil)
			<-sem
			if lc != nil {
				lc.c.SetDeadline(time.Time{})
				mu.Lock()
				conns = append(conns, lc)
				t.LastOKMs = time.Since(start).Milliseconds()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Held, t.OpenMs, t.ElapsedMs = int64(len(conns)), time.Since(start).Milliseconds(), time.Since(start).Milliseconds()
	return t, conns
}

func closeAll(conns []*loadConn) {
	for _, lc := range conns {
		lc.c.Close()
	}
}

// runLoad runs o.n clients until stop is closed and returns what they saw.
func runLoad(o holdOpts, stop <-chan struct{}) *loadResult {
	t, start := newResult(), time.Now()
	var wg sync.WaitGroup
	for i := range o.n {
		wg.Add(1)
		go func() { defer wg.Done(); clientLoop(o, i, t, stop) }()
	}
	wg.Wait()
	t.ElapsedMs = time.Since(start).Milliseconds()
	return t
}

// loadConn is a client's connection: c to speak on (TLS or not), raw its TCP connection.
type loadConn struct {
	c    net.Conn
	raw  *net.TCPConn
	got  *countingReader
	br   *bufio.Reader
	used int // requests made on it
}

type countingReader struct {
	r io.Reader
	n int64
}

func (cr *countingReader) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	cr.n += int64(n)
	return n, err
}

// clientLoop is one client: requests until stop is closed, or, with stop nil (holding), one;
// it returns the connection held, if any. A client dials again 10 ms after a failed dial:
// nothing listens, and a tight loop would take the CPUs of what is measured.
func clientLoop(o holdOpts, id int, t *loadResult, stop <-chan struct{}) *loadConn {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	var lc *loadConn
	for seq := 0; stop == nil && seq == 0 || stop != nil && !closed(stop); seq++ {
		if lc != nil && lc.closedByPeer() {
			t.inc(&t.ClosedIdle)
			lc.c.Close()
			lc = nil
		}
		if lc == nil {
			var err error
			if lc, err = dial(o, id, t); err != nil {
				if !errors.Is(err, errHandshake) {
					t.count(t.DialFailed, dialKind(err), false, err)
				}
				select {
				case <-stop:
				case <-time.After(10 * time.Millisecond):
				}
				continue
			}
		}
		if !lc.do(o, seq, rng, t) {
			lc.c.Close()
			lc = nil
		}
	}
	if stop != nil && lc != nil {
		lc.c.Close()
		lc = nil
	}
	return lc
}

func closed(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

var errHandshake = errors.New("TLS handshake failed")

// dial dials (and over TLS shakes hands); a handshake that fails is a lost request, since the
// connection was accepted and its request was ready.
func dial(o holdOpts, id int, t *loadResult) (*loadConn, error) {
	d := net.Dialer{Timeout: o.timeout, KeepAlive: -1} // idle means idle: no TCP keep-alive probes
	if o.sources > 1 {
		d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+id%o.sources))}
	}
	c, err := d.Dial("tcp", o.addr)
	if err != nil {
		return nil, err
	}
	t.inc(&t.Connections)
	lc := &loadConn{c: c, raw: c.(*net.TCPConn)}
	if o.tls {
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}) //nolint:gosec // a bench on loopback, against its own certificate
		tc.SetDeadline(time.Now().Add(o.timeout))
		if err := tc.Handshake(); err != nil {
			t.count(t.LostBy, "handshake_"+lostKind(err, false), true, fmt.Errorf("TLS handshake: %w", err))
			c.Close()
			return nil, errHandshake
		}
		lc.c = tc
	}
	lc.got = &countingReader{r: lc.c}
	lc.br = bufio.NewReader(lc.got)
	return lc, nil
}

// closedByPeer says whether the server has closed (or written on) this kept-alive connection
// while it was idle: a look at the socket (MSG_PEEK) that neither waits nor takes anything.
func (lc *loadConn) closedByPeer() bool {
	if lc.used == 0 {
		return false
	}
	if lc.br.Buffered() > 0 {
		return true // bytes after the last answer: the server is not speaking HTTP/1.1 to us
	}
	rc, err := lc.raw.SyscallConn()
	if err != nil {
		return true
	}
	var n int
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); err != nil {
		return true
	}
	switch {
	case errors.Is(rerr, syscall.EAGAIN):
		return false // nothing: alive
	case rerr != nil || n == 0:
		return true // reset, or the end
	}
	if tc, ok := lc.c.(*tls.Conn); ok {
		// A TLS record came: a session ticket is harmless, a close_notify alert is the end.
		// Let TLS read it, for a moment.
		tc.SetReadDeadline(time.Now().Add(time.Millisecond))
		_, err := lc.br.Peek(1)
		tc.SetReadDeadline(time.Time{})
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
	return true
}

// do makes one request on lc and counts how it ended; it says whether lc may be used again
// (holding: whether it is held).
func (lc *loadConn) do(o holdOpts, seq int, rng *rand.Rand, t *loadResult) bool {
	reused := lc.used > 0
	lc.used++
	req := requestBytes(o, seq)
	lc.got.n = 0
	lc.c.SetDeadline(time.Now().Add(o.timeout))
	var err error
	if o.slow {
		err = slowWrite(lc.c, req, o, rng)
	} else {
		_, err = lc.c.Write(req)
	}
	if err == nil {
		lc.c.SetDeadline(time.Now().Add(o.timeout))
		err = lc.answer(o, t)
	}
	if errors.Is(err, errNotHeld) {
		return false
	} else if err != nil {
		t.count(t.LostBy, lostKind(err, lc.got.n > 0), true, err)
		if reused {
			t.inc(&t.LostOnReused)
		}
		return false
	}
	return o.stream || !o.close && (o.perConn == 0 || lc.used < o.perConn)
}

var errNotHeld = errors.New("answered, not held")

// answer reads the answer and counts it by status. Holding, it must be 200 and leave the
// connection open, or be an event stream whose first event is "open" (errNotHeld else).
func (lc *loadConn) answer(o holdOpts, t *loadResult) error {
	resp, err := http.ReadResponse(lc.br, nil)
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if o.stream && resp.StatusCode == 200 { // the stream is held open, read through its body (which undoes the chunking)
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			return fmt.Errorf("want Content-Type text/event-stream, got %q", ct)
		}
		lc.br = bufio.NewReader(resp.Body)
		if err := firstEvent(lc.br); err != nil {
			return err
		}
	} else if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("reading the body: %w", err)
	}
	t.count(t.AnsweredBy, strconv.Itoa(resp.StatusCode), true, nil)
	if resp.Close || !o.load && resp.StatusCode != 200 {
		return errNotHeld
	}
	return nil
}

// firstEvent reads the stream up to the end of its first event, which must be "open".
func firstEvent(r *bufio.Reader) error {
	name := ""
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("waiting for event: open: %w", err)
		}
		switch line = strings.TrimRight(line, "\r\n"); {
		case line == "" && name != "" && name != "open":
			return fmt.Errorf("want the first event to be open, got %q", name)
		case line == "" && name != "":
			return nil
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		}
	}
}

// requestBytes is request seq of a client: a GET of -path, or, with -slow, every second one a
// POST of a -body bytes long body.
func requestBytes(o holdOpts, seq int) []byte {
	post := o.slow && o.body > 0 && seq%2 == 1
	method, accept := "GET", "*/*"
	if post {
		method = "POST"
	}
	if o.stream {
		accept = "text/event-stream"
	}
	s := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: connhold\r\nAccept: %s\r\n", method, o.path, o.host, accept)
	if o.close {
		s += "Connection: close\r\n"
	}
	if post {
		return []byte(s + fmt.Sprintf("Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", o.body) + strings.Repeat("x", o.body))
	}
	return []byte(s + "\r\n")
}

// slowWrite writes req a byte at a time, each after a pause from -byte-min to -byte-max;
// -timeout bounds each byte's write, not the whole.
func slowWrite(c net.Conn, req []byte, o holdOpts, rng *rand.Rand) error {
	for i := range req {
		if d := o.byteMin; i > 0 {
			if o.byteMax > o.byteMin {
				d += time.Duration(rng.Int64N(int64(o.byteMax - o.byteMin)))
			}
			time.Sleep(d)
		}
		c.SetWriteDeadline(time.Now().Add(o.timeout))
		if _, err := c.Write(req[i : i+1]); err != nil {
			return err
		}
	}
	return nil
}
