package main

// The load mode (-load): clients that make requests without end and account for every one,
// for the storm bench (go run ./bench storm). A request is counted once its first byte is written (or, over TLS,
// once the handshake of its new connection has begun), and then ends in exactly one way:
// answered (a whole answer read, by status), or LOST (by kind: the connection ended or was
// reset before the whole answer, the write failed, or no answer within -timeout). A dial
// that fails writes no request: refused (nothing listens), connect timeout, or another
// connect error, counted apart. A kept-alive connection found closed by the server before
// the next request is written is closed_idle, not a request: a client that looks before it
// writes, as Go's Transport does, sees it and dials again.

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The kinds of a lost request, and the kinds of a failed dial or held connection.
const (
	kindEOF        = "eof"         // the connection ended before any byte of the answer
	kindPartial    = "partial"     // it ended, or was reset, part-way through the answer
	kindReset      = "reset"       // reset (ECONNRESET) before any byte of the answer
	kindBrokenPipe = "broken_pipe" // the request could not be written: EPIPE
	kindTimeout    = "timeout"     // no whole answer within -timeout
	kindHandshake  = "handshake_"  // the TLS handshake of the request's new connection failed: handshake_eof, handshake_reset, ...
	kindOther      = "other"

	kindRefused        = "refused"         // dial: ECONNREFUSED, nothing listens
	kindConnectTimeout = "connect_timeout" // dial: no SYN-ACK within -timeout
	kindConnectError   = "connect_error"   // dial: anything else (EADDRNOTAVAIL, ...)
)

// statusError is an answer whose status was not the one wanted (hold mode).
type statusError struct{ code int }

func (e statusError) Error() string { return fmt.Sprintf("want status 200, got %d", e.code) }

// dialKind is the kind of a failed dial.
func dialKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return kindRefused
	case errors.As(err, &ne) && ne.Timeout():
		return kindConnectTimeout
	}
	return kindConnectError
}

// lostKind is the kind of a request that failed after it was written (or began to be), got
// being whether any byte of its answer had come.
func lostKind(err error, got bool) string {
	var ne net.Error
	var se statusError
	switch {
	case errors.As(err, &se):
		return "status_" + strconv.Itoa(se.code)
	case errors.As(err, &ne) && ne.Timeout():
		return kindTimeout
	case got && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)):
		return kindPartial
	case errors.Is(err, syscall.EPIPE):
		return kindBrokenPipe
	case errors.Is(err, syscall.ECONNRESET):
		return kindReset
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return kindEOF
	}
	return kindOther
}

// tally counts what the clients saw; safe for concurrent use.
type tally struct {
	mu       sync.Mutex
	requests int64
	answered map[string]int64 // by status code
	lost     map[string]int64 // by kind
	reused   int64            // lost requests that were written on a kept-alive connection
	dial     map[string]int64 // failed dials by kind
	idle     int64            // closed_idle
	conns    int64            // connections made
	examples []lostExample
}

type lostExample struct {
	AtUnixMs int64  `json:"at_unix_ms"`
	Kind     string `json:"kind"`
	Reused   bool   `json:"reused"`
	Err      string `json:"err"`
}

const maxExamples = 10

func newTally() *tally {
	return &tally{answered: map[string]int64{}, lost: map[string]int64{}, dial: map[string]int64{}}
}

func (t *tally) answer(code int) {
	t.mu.Lock()
	t.requests++
	t.answered[strconv.Itoa(code)]++
	t.mu.Unlock()
}

func (t *tally) lose(err error, got, reused bool) { t.loseAs(lostKind(err, got), err, reused) }

func (t *tally) loseAs(k string, err error, reused bool) {
	t.mu.Lock()
	t.requests++
	t.lost[k]++
	if reused {
		t.reused++
	}
	if len(t.examples) < maxExamples {
		t.examples = append(t.examples, lostExample{time.Now().UnixMilli(), k, reused, err.Error()})
	}
	t.mu.Unlock()
}

func (t *tally) dialFailed(err error) string {
	k := dialKind(err)
	t.mu.Lock()
	t.dial[k]++
	if k != kindRefused && len(t.examples) < maxExamples { // refused says all there is
		t.examples = append(t.examples, lostExample{time.Now().UnixMilli(), k, false, err.Error()})
	}
	t.mu.Unlock()
	return k
}

func (t *tally) add(p *int64) {
	t.mu.Lock()
	*p++
	t.mu.Unlock()
}

// loadResult is the one JSON line the load mode prints.
type loadResult struct {
	Requests      int64            `json:"requests"`
	Answered      int64            `json:"answered"`
	AnsweredBy    map[string]int64 `json:"answered_by_status"`
	Non2xx        int64            `json:"non_2xx"`
	Lost          int64            `json:"lost"`
	LostBy        map[string]int64 `json:"lost_by_kind"`
	LostOnReused  int64            `json:"lost_on_reused"`
	Refused       int64            `json:"refused"`
	DialFailed    map[string]int64 `json:"dial_failed_by_kind"`
	ClosedIdle    int64            `json:"closed_idle"`
	Connections   int64            `json:"connections"`
	ElapsedMs     int64            `json:"elapsed_ms"`
	LostExamples  []lostExample    `json:"examples"` // the first lost requests and failed dials (refused aside)
	Clients       int              `json:"clients"`
	NewConnEach   bool             `json:"new_conn_each"`
	Slow          bool             `json:"slow"`
	StartedUnixMs int64            `json:"started_unix_ms"`
}

func (t *tally) result() loadResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := loadResult{Requests: t.requests, AnsweredBy: t.answered, LostBy: t.lost, LostOnReused: t.reused,
		DialFailed: t.dial, Refused: t.dial[kindRefused], ClosedIdle: t.idle, Connections: t.conns,
		LostExamples: t.examples}
	for code, n := range t.answered {
		r.Answered += n
		if !strings.HasPrefix(code, "2") {
			r.Non2xx += n
		}
	}
	for _, n := range t.lost {
		r.Lost += n
	}
	if r.LostExamples == nil {
		r.LostExamples = []lostExample{}
	}
	return r
}

// runLoad runs o.n clients until stop is closed, each finishing the request it is making,
// and returns what they saw.
func runLoad(o options, stop <-chan struct{}) loadResult {
	t := newTally()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range o.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client(o, i, t, stop)
		}()
	}
	wg.Wait()
	r := t.result()
	r.ElapsedMs = time.Since(start).Milliseconds()
	r.StartedUnixMs = start.UnixMilli()
	r.Clients, r.NewConnEach, r.Slow = o.n, o.close, o.slow
	return r
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

// refusedPause is how long a client waits after a refused or failed dial before it dials
// again: nothing listens, and a tight loop would take the CPUs of what is measured.
const refusedPause = 10 * time.Millisecond

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

func client(o options, id int, t *tally, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	var lc *loadConn
	defer func() {
		if lc != nil {
			lc.c.Close()
		}
	}()
	for seq := 0; !stopped(stop); seq++ {
		if lc != nil && lc.closedByPeer() {
			t.add(&t.idle)
			lc.c.Close()
			lc = nil
		}
		if lc == nil {
			var err error
			if lc, err = dialLoad(o, id, t); err != nil {
				if !errors.Is(err, errHandshake) {
					t.dialFailed(err)
				}
				select {
				case <-stop:
				case <-time.After(refusedPause):
				}
				continue
			}
		}
		keep := lc.do(o, seq, rng, t)
		if !keep {
			lc.c.Close()
			lc = nil
		}
	}
}

var errHandshake = errors.New("TLS handshake failed")

// dialLoad dials (and over TLS shakes hands); a handshake that fails is counted as a lost
// request here, since the connection was accepted and its request was ready.
func dialLoad(o options, id int, t *tally) (*loadConn, error) {
	d := net.Dialer{Timeout: o.timeout, KeepAlive: -1}
	if o.sources > 1 {
		d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+id%o.sources))}
	}
	c, err := d.Dial("tcp", o.addr)
	if err != nil {
		return nil, err
	}
	t.add(&t.conns)
	lc := &loadConn{c: c, raw: c.(*net.TCPConn)}
	if o.tls {
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}) //nolint:gosec // a bench on loopback, against its own certificate
		tc.SetDeadline(time.Now().Add(o.timeout))
		if err := tc.Handshake(); err != nil {
			t.loseAs(kindHandshake+lostKind(err, false), fmt.Errorf("TLS handshake: %w", err), false)
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
// while it was idle: a look at the socket that neither waits nor takes anything from it.
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
		n, rerr = peek(fd)
		return true
	}); err != nil {
		return true
	}
	switch {
	case errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK):
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

// do makes one request on lc and counts how it ended; it says whether lc may be used again.
func (lc *loadConn) do(o options, seq int, rng *rand.Rand, t *tally) bool {
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
	if err != nil {
		t.lose(fmt.Errorf("writing the request: %w", err), lc.got.n > 0, reused)
		return false
	}
	lc.c.SetDeadline(time.Now().Add(o.timeout))
	resp, err := http.ReadResponse(lc.br, nil)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err != nil {
		t.lose(fmt.Errorf("reading the answer: %w", err), lc.got.n > 0, reused)
		return false
	}
	t.answer(resp.StatusCode)
	return !o.close && !resp.Close && (o.perConn == 0 || lc.used < o.perConn)
}

// requestBytes is request seq of a client: a GET of -path, or, in the slow mode, every
// second one a POST of a -body bytes long body.
func requestBytes(o options, seq int) []byte {
	var b strings.Builder
	post := o.slow && o.body > 0 && seq%2 == 1
	method := "GET"
	if post {
		method = "POST"
	}
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: connhold\r\n", method, o.path, o.host)
	if o.close {
		b.WriteString("Connection: close\r\n")
	}
	if post {
		fmt.Fprintf(&b, "Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n%s", o.body, strings.Repeat("x", o.body))
	} else {
		b.WriteString("\r\n")
	}
	return []byte(b.String())
}

// slowWrite writes req a byte at a time, each after a pause drawn from -byte-delay; the
// deadline is moved on with every byte, so -timeout bounds each byte's write, not the whole.
func slowWrite(c net.Conn, req []byte, o options, rng *rand.Rand) error {
	for i := range req {
		if i > 0 {
			d := o.byteMin
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

// load is the -load mode: clients until -duration has passed, or else until stdin ends or
// SIGINT/SIGTERM comes; then one JSON line on stdout.
func load(o options, release <-chan struct{}) error {
	stop := make(chan struct{})
	go func() {
		if o.duration > 0 {
			select {
			case <-time.After(o.duration):
			case <-release:
			}
		} else {
			<-release
		}
		close(stop)
	}()
	r := runLoad(o, stop)
	return json.NewEncoder(os.Stdout).Encode(r)
}
