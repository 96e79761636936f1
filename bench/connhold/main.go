// Command connhold opens many HTTP/1.1 connections to a proxy, makes one request on each,
// and holds them all open: the load of the cost-per-connection mode of bench/proxies.sh
// (--mode conns), which reads the proxy's memory before and while they are held.
//
//	connhold -addr 127.0.0.1:18001 -n 10000                      # idle keep-alive connections
//	connhold -addr 127.0.0.1:18001 -n 2000 -stream -path /t/acme/events   # open event streams
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
// N the connections held, K those that failed, and holds them until stdin reaches its end or
// SIGINT/SIGTERM arrives. It then prints
//
//	DONE conns=N closed=C
//
// C the held connections the other side closed (or, idle, sent something on) during the hold,
// closes every connection and exits 0. More than -max-failed failures, or a bad flag, exit 1
// with one line on stderr and nothing held.
package main

import (
	"bufio"
	"crypto/tls"
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
	conns, failed, firstErr := openAll(o)
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

	release := make(chan struct{}, 2)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; release <- struct{}{} }()
	go func() { io.Copy(io.Discard, os.Stdin); release <- struct{}{} }()
	<-release

	fmt.Printf("DONE conns=%d closed=%d\n", len(conns), closed.Load())
	closeAll(conns)
	return nil
}

// openAll opens o.n connections, o.parallel at a time.
func openAll(o options) (conns []held, failed int, firstErr error) {
	var mu sync.Mutex // guards conns, failed, firstErr
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
					failed++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					conns = append(conns, h)
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
	return conns, failed, firstErr
}

// open dials connection i, makes the request and checks the answer.
func open(o options, i int) (held, error) {
	d := net.Dialer{Timeout: o.timeout, KeepAlive: -1} // idle means idle: no TCP keep-alive probes
	if o.sources > 1 {
		d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%o.sources))}
	}
	c, err := d.Dial("tcp", o.addr)
	if err != nil {
		return held{}, err
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
		return nil, fmt.Errorf("want status 200, got %s", resp.Status)
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
