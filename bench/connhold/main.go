// Command connhold opens many HTTP/1.1 connections to a proxy, makes one request on each,
// and holds them all open: the load of the memory rows of the proxies bench
// (go run ./bench proxies), which reads the proxy's memory before and while they are held, and of the
// open-file limit row of the storm bench. With -load it is instead a load of clients that
// account for every request they make (the storm bench; load.go and below).
//
//	connhold -addr 127.0.0.1:18001 -n 10000                      # idle keep-alive connections
//	connhold -addr 127.0.0.1:18001 -n 2000 -stream -path /t/acme/events   # open event streams
//	connhold -addr 127.0.0.1:18001 -load -n 32 -close < fifo     # 32 clients, a new connection each request
//	connhold -addr 127.0.0.1:18001 -load -slow -n 200 -per-conn 4 -duration 15s   # slow clients
//
// Each connection is dialed, sends one GET and reads the answer, which must be 200. Without
// -stream the answer's body is read to its end and the connection is then left idle
// (keep-alive); an answer that closes the connection counts as failed. With -stream the answer
// must be text/event-stream and the stream's first event must be "event: open"; the stream is
// then left open and read (its keep-alive comments discarded). Every dial, request and answer
// is bounded by -timeout; after that a held connection has no deadline.
//
// Once every connection is open (or has failed) it prints one line on stdout,
//
//	READY conns=N failed=K
//
// N the connections held, K those that failed, after one JSON line saying the same with the
// failures by kind (refused, connect_timeout, connect_error, timeout, eof, reset, status_502,
// ...), the time to open them all (open_ms) and the time of the last one opened (last_ok_ms),
// and holds them until stdin reaches its end or SIGINT/SIGTERM arrives. It then prints
//
//	DONE conns=N closed=C
//
// C the held connections the other side closed (or, idle, sent something on) during the hold,
// closes every connection and exits 0. More than -max-failed failures, or a bad flag, exit 1
// with one line on stderr and nothing held.
//
// -load runs -n clients, each making one request after another (a GET of -path), on a
// kept-alive connection, or on a new connection each (-close: Connection: close), until
// -duration has passed, or without -duration until stdin reaches its end or SIGINT/SIGTERM
// arrives; each client then finishes the request it is making. With -slow every byte of a
// request is written alone, after a pause drawn from -byte-min to -byte-max, and every second
// request is a POST with a -body bytes long body; -per-conn K closes a connection after K
// requests. It then prints one JSON line: requests made, answered by status, LOST by kind,
// refused dials and other failed dials, kept-alive connections found closed before a request
// (closed_idle, not a request), and the first few losses and failed dials (refused aside) with
// their time and error. How each
// request is counted: load.go.
package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type options struct {
	addr      string
	path      string
	host      string
	n         int
	stream    bool
	parallel  int
	timeout   time.Duration
	sources   int
	maxFailed int
	tls       bool

	// -load
	load     bool
	close    bool
	slow     bool
	byteMin  time.Duration
	byteMax  time.Duration
	perConn  int
	body     int
	duration time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "", "the proxy, `host:port` (required)")
	flag.StringVar(&o.path, "path", "/t/acme/items/1", "the request's path")
	flag.StringVar(&o.host, "host", "", "the Host header (default: -addr)")
	flag.IntVar(&o.n, "n", 1000, "connections to open")
	flag.BoolVar(&o.stream, "stream", false, "expect a server-sent event stream whose first event is \"event: open\", and keep it open")
	flag.IntVar(&o.parallel, "parallel", 64, "connections being opened at once")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Second, "bound of each dial, and of each request with its answer (the first event for -stream)")
	flag.IntVar(&o.sources, "sources", 1, "dial from 127.0.0.1 .. 127.0.0.`K` in turn (more source ports on loopback)")
	flag.IntVar(&o.maxFailed, "max-failed", 0, "connections that may fail before connhold gives up")
	flag.BoolVar(&o.tls, "tls", false, "speak HTTPS (HTTP/1.1 by ALPN, TLS 1.3, the server's certificate not checked: a bench on loopback)")
	flag.BoolVar(&o.load, "load", false, "run a load of -n clients that account for every request, instead of holding connections")
	flag.BoolVar(&o.close, "close", false, "-load: a new connection for each request (Connection: close)")
	flag.BoolVar(&o.slow, "slow", false, "-load: write each request a byte at a time, every second one a POST with a body")
	flag.DurationVar(&o.byteMin, "byte-min", 5*time.Millisecond, "-slow: the shortest pause before a byte")
	flag.DurationVar(&o.byteMax, "byte-max", 20*time.Millisecond, "-slow: the longest pause before a byte")
	flag.IntVar(&o.perConn, "per-conn", 0, "-load: requests on a connection before the client closes it and dials again (0: no limit)")
	flag.IntVar(&o.body, "body", 32, "-slow: the bytes of a POST's body")
	flag.DurationVar(&o.duration, "duration", 0, "-load: how long to run (0: until stdin ends or SIGINT/SIGTERM)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "connhold: %v\n", err)
		os.Exit(1)
	}
}

func (o *options) check() error {
	switch {
	case flag.NArg() > 0:
		return fmt.Errorf("unexpected argument %q: connhold takes flags only", flag.Arg(0))
	case o.addr == "":
		return errors.New("-addr is required")
	case o.n < 1:
		return fmt.Errorf("-n: want 1 or more, got %d", o.n)
	case o.parallel < 1:
		return fmt.Errorf("-parallel: want 1 or more, got %d", o.parallel)
	case o.timeout <= 0:
		return fmt.Errorf("-timeout: want a positive duration, got %v", o.timeout)
	case o.sources < 1 || o.sources > 254:
		return fmt.Errorf("-sources: want 1..254, got %d", o.sources)
	case o.maxFailed < 0:
		return fmt.Errorf("-max-failed: want 0 or more, got %d", o.maxFailed)
	case !strings.HasPrefix(o.path, "/"):
		return fmt.Errorf("-path: want an absolute path, got %q", o.path)
	case !o.load && (o.close || o.slow || o.perConn != 0 || o.duration != 0):
		return errors.New("-close, -slow, -per-conn and -duration are for -load")
	case o.load && o.stream:
		return errors.New("-stream is for holding connections, not -load")
	case o.byteMin < 0 || o.byteMax < o.byteMin:
		return fmt.Errorf("-byte-min %v, -byte-max %v: want 0 <= min <= max", o.byteMin, o.byteMax)
	case o.perConn < 0 || o.body < 0 || o.duration < 0:
		return errors.New("-per-conn, -body and -duration: want 0 or more")
	}
	if o.sources > 1 {
		host, _, err := net.SplitHostPort(o.addr)
		if ip := net.ParseIP(host); err != nil || ip == nil || ip.To4() == nil || !ip.IsLoopback() {
			return fmt.Errorf("-sources %d: -addr must be a loopback IPv4 address, got %q", o.sources, o.addr)
		}
	}
	if o.host == "" {
		o.host = o.addr
	}
	return nil
}

// held is one open connection and the reader of what comes next on it: the connection's own
// reader (idle), or one on the stream's body.
type held struct {
	c net.Conn
	r *bufio.Reader
}

func run(o options) error {
	if err := o.check(); err != nil {
		return err
	}
	if o.load {
		return load(o, releaser(o.duration == 0))
	}
	start := time.Now()
	conns, byKind, lastOK, firstErr := openAll(o)
	failed := 0
	for _, n := range byKind {
		failed += n
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"held": len(conns), "failed": failed, "failed_by_kind": byKind,
		"open_ms": time.Since(start).Milliseconds(), "last_ok_ms": lastOK.Sub(start).Milliseconds()})
	if failed > o.maxFailed {
		closeAll(conns)
		return fmt.Errorf("%d of %d connections failed (-max-failed %d); first: %v", failed, o.n, o.maxFailed, firstErr)
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "connhold: warning: %d of %d connections failed; first: %v\n", failed, o.n, firstErr)
	}
	fmt.Printf("READY conns=%d failed=%d\n", len(conns), failed)

	// Each held connection is read until it ends: a stream's keep-alive comments are
	// discarded; on an idle connection nothing should come. Either way an end, or anything on
	// an idle connection, means the other side has let the connection go.
	var closed atomic.Int64
	for _, h := range conns {
		go func() {
			if o.stream {
				io.Copy(io.Discard, h.r)
			} else {
				h.r.ReadByte()
			}
			closed.Add(1)
		}()
	}

	<-releaser(true)

	fmt.Printf("DONE conns=%d closed=%d\n", len(conns), closed.Load())
	closeAll(conns)
	return nil
}

// releaser is a channel that receives when SIGINT or SIGTERM arrives and, with stdin, when
// stdin reaches its end.
func releaser(stdin bool) <-chan struct{} {
	release := make(chan struct{}, 2)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; release <- struct{}{} }()
	if stdin {
		go func() { io.Copy(io.Discard, os.Stdin); release <- struct{}{} }()
	}
	return release
}

// openAll opens o.n connections, o.parallel at a time. It returns those held, the failures
// by kind, and when the last one held was opened.
func openAll(o options) (conns []held, byKind map[string]int, lastOK time.Time, firstErr error) {
	byKind = map[string]int{}
	var mu sync.Mutex // guards conns, byKind, lastOK, firstErr
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(o.parallel, o.n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				h, err := open(o, i)
				mu.Lock()
				if err != nil {
					byKind[failKind(err)]++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					conns = append(conns, h)
					lastOK = time.Now()
				}
				mu.Unlock()
			}
		}()
	}
	for i := range o.n {
		next <- i
	}
	close(next)
	wg.Wait()
	return conns, byKind, lastOK, firstErr
}

// dialError is a dial that failed: no request was written.
type dialError struct{ error }

func (e dialError) Unwrap() error { return e.error }

// failKind is the kind of a connection that could not be opened (and held).
func failKind(err error) string {
	var de dialError
	if errors.As(err, &de) {
		return dialKind(err)
	}
	return lostKind(err, false)
}

// open dials connection i, makes the request and checks the answer.
func open(o options, i int) (held, error) {
	d := net.Dialer{Timeout: o.timeout, KeepAlive: -1} // idle means idle: no TCP keep-alive probes
	if o.sources > 1 {
		d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%o.sources))}
	}
	c, err := d.Dial("tcp", o.addr)
	if err != nil {
		return held{}, dialError{err}
	}
	if o.tls {
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS13}) //nolint:gosec // a bench on loopback, against its own certificate
		tc.SetDeadline(time.Now().Add(o.timeout))
		if err := tc.Handshake(); err != nil {
			c.Close()
			return held{}, fmt.Errorf("TLS handshake with %s: %w", o.addr, err)
		}
		c = tc
	}
	r, err := request(o, c)
	if err != nil {
		c.Close()
		return held{}, fmt.Errorf("%s -> %s: %w", c.LocalAddr(), o.addr, err)
	}
	c.SetDeadline(time.Time{})
	return held{c: c, r: r}, nil
}

// request makes the request on c and checks the answer (and the first event of a stream)
// within o.timeout. It returns the reader of what comes after.
func request(o options, c net.Conn) (*bufio.Reader, error) {
	c.SetDeadline(time.Now().Add(o.timeout))
	br := bufio.NewReader(c)
	accept := "*/*"
	if o.stream {
		accept = "text/event-stream"
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: connhold\r\nAccept: %s\r\n\r\n", o.path, o.host, accept); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, statusError{resp.StatusCode}
	}
	if o.stream {
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			return nil, fmt.Errorf("want Content-Type text/event-stream, got %q", ct)
		}
		// The stream is read through the body, which undoes the chunking.
		sr := bufio.NewReader(resp.Body)
		return sr, firstEvent(sr)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return nil, fmt.Errorf("reading the body: %w", err)
	}
	if resp.Close {
		return nil, errors.New("the answer closes the connection (Connection: close): nothing to hold")
	}
	return br, nil
}

// firstEvent reads the stream up to the end of its first event, which must be "open".
func firstEvent(r *bufio.Reader) error {
	name := ""
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("waiting for event: open: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" && name != "":
			if name != "open" {
				return fmt.Errorf("want the first event to be open, got %q", name)
			}
			return nil
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		}
	}
}

func closeAll(conns []held) {
	for _, h := range conns {
		h.c.Close()
	}
}
