package door

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Reader reads one client connection's HTTP/1 request stream for the server that parses it,
// and lets through only what the door accepts (docs/REFERENCE.md, "At the door"):
//
//   - A request head is held until it is whole and checked, then passed on at once; the
//     server's own parser never sees a head the door refused, nor a part of one.
//   - A head the door refuses is passed on as a stand-in, a plain GET of RefusedPath whose
//     Fenec-Door header names the reason (Refusal reads it), followed by the end of the
//     stream: the server answers it in turn, after any request before it on the
//     connection, and closes the connection after the answer.
//   - A body is passed on as it comes, checked as it goes: a chunked body that breaks the
//     rules, or stops before its last chunk, fails the server's read with an *Error at the
//     byte that breaks it, and every read after.
//   - The HTTP/2 preface as a connection's first bytes (h2c with prior knowledge) turns the
//     door off: HTTP/2 frames its own requests.
//
// A Reader holds no memory between requests but what it has read and not yet passed on
// (Buffered). It is for one goroutine at a time, as a connection's reads are; Refused may be
// called from any.
type Reader struct {
	src       io.Reader
	st        readState
	connStart bool // the next head is the connection's first
	h         head
	left      int64 // withLength: body bytes left
	ck        chunks
	held      []byte // what was read and not yet judged: an incomplete head from its first byte
	out       []byte // what is passed on before reading again
	outBuf    []byte // out's storage
	srcErr    error  // the source's error, returned once the bytes read with it are passed on
	err       error  // sticky: io.EOF after a stand-in head, *Error after a bad body
	reason    Reason
	refused   atomic.Bool
}

type readState uint8

const (
	rsHead readState = iota
	rsLength
	rsChunked
	rsPass
)

// minRead: a read into a smaller buffer than this (net/http's one-byte background read)
// reads into the Reader's own, so that a head is not gathered a byte per system call.
const minRead = 512

// NewReader returns a Reader of src at the start of a connection.
func NewReader(src io.Reader) *Reader {
	d := &Reader{}
	d.Reset(src, true)
	return d
}

// Reset makes d read src from a request's first byte (connStart: the connection's first
// request, where the HTTP/2 preface may come), forgetting what it held.
func (d *Reader) Reset(src io.Reader, connStart bool) {
	d.dropHeld()
	d.dropOut()
	*d = Reader{src: src, connStart: connStart}
}

// Buffered is how many bytes d has read from its source and not yet passed on.
func (d *Reader) Buffered() int { return len(d.out) + len(d.held) }

// Drain returns what d has read and not yet passed on, and forgets it: for a server that
// hands the connection on (HTTP/2 with prior knowledge) with the bytes read so far.
func (d *Reader) Drain() []byte {
	b := append(append([]byte(nil), d.out...), d.held...)
	d.dropOut()
	d.dropHeld()
	return b
}

// Refused reports whether d refused a head or a body on this connection: the stream ends
// there, and the connection should close once its answer is written.
func (d *Reader) Refused() bool { return d.refused.Load() }

// Reason is why d refused, once Refused.
func (d *Reader) Reason() Reason {
	if !d.refused.Load() {
		return None
	}
	return d.reason
}

func (d *Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if len(d.out) > 0 {
			n := copy(p, d.out)
			if d.out = d.out[n:]; len(d.out) == 0 {
				d.dropOut()
			}
			return n, nil
		}
		if d.err != nil {
			return 0, d.err
		}
		if d.srcErr != nil {
			err := d.srcErr
			d.srcErr = nil
			return 0, d.failed(err)
		}
		if d.st == rsPass && d.held == nil {
			return d.src.Read(p)
		}
		if d.held == nil && len(p) >= minRead {
			// The common case: read into p and judge the bytes where they are.
			n, err := d.src.Read(p)
			d.srcErr = err
			if n == 0 {
				if err == nil {
					return 0, nil
				}
				continue
			}
			b, good, stop := d.advance(p[:n])
			switch stop {
			case stopHold:
				d.hold(b[good:])
			case stopRefuse:
				d.refuse()
			case stopBad:
				d.bad()
			}
			if good > 0 {
				return good, nil
			}
			continue
		}
		// Held bytes (an incomplete head) or a small p: read into d's own buffer.
		if d.held == nil {
			d.held = getBuf()[:0]
		}
		if cap(d.held)-len(d.held) < minRead {
			d.held = append(d.held, make([]byte, max(len(d.held), 4096))...)[:len(d.held)]
		}
		n, err := d.src.Read(d.held[len(d.held):cap(d.held)])
		d.srcErr = err
		if n == 0 {
			if len(d.held) == 0 {
				d.dropHeld()
			}
			if err == nil {
				return 0, nil
			}
			continue
		}
		d.held = d.held[:len(d.held)+n]
		b, good, stop := d.advance(d.held)
		if good > 0 {
			d.out = append(d.outBuffer(), b[:good]...)
		}
		rest := b[good:]
		switch stop {
		case stopHold:
			if good > 0 { // the head's first byte to the front: once a head, not once a read
				d.held = d.held[:copy(d.held, rest)]
			} else {
				d.held = b // all of it is the head, in place (no head ended, so nothing dropped)
			}
		case stopRefuse:
			d.dropHeld()
			d.refuse()
		case stopBad:
			d.dropHeld()
			d.bad()
		default:
			d.dropHeld()
		}
		if len(d.out) == 0 {
			d.dropOut()
		}
	}
}

type stop uint8

const (
	stopNone   stop = iota // all of b is good
	stopHold               // b[good:] is an incomplete head
	stopRefuse             // the head at b[good:] is refused (d.reason)
	stopBad                // the body breaks the rules at b[good] (d.reason)
)

// advance runs d's machine over b, which starts where the stream stands (at the first byte
// of an incomplete head d.h has begun, if it has). It returns b (shorter by the empty lines
// before a request line, which it drops), how many of its bytes are good to pass on, and
// what stopped it.
func (d *Reader) advance(b []byte) ([]byte, int, stop) {
	i := 0
	for i < len(b) {
		switch d.st {
		case rsPass:
			return b, len(b), stopNone
		case rsLength:
			take := min(int64(len(b)-i), d.left)
			d.left -= take
			i += int(take)
			if d.left == 0 {
				d.st = rsHead
			}
		case rsChunked:
			n, done, bad := d.ck.step(b[i:])
			i += n
			if bad {
				d.reason = BadChunk
				return b, i, stopBad
			}
			if done {
				d.st = rsHead
			}
		case rsHead:
			n, r := d.h.step(b[i:], d.connStart)
			if r != None {
				d.reason = r
				return b, i, stopRefuse
			}
			if n == 0 {
				return b, i, stopHold
			}
			if s := d.h.skip; s > 0 { // empty lines before the request line: dropped
				copy(b[i:], b[i+s:])
				b = b[:len(b)-s]
				n -= s
			}
			fr, cl := d.h.framing(), d.h.cl
			d.h = head{}
			d.connStart = false
			i += n
			switch fr {
			case withLength:
				d.st, d.left = rsLength, cl
			case chunkedBody:
				d.st, d.ck = rsChunked, chunks{}
			case preface:
				d.st = rsPass
				return b, len(b), stopNone
			}
		}
	}
	return b, i, stopNone
}

// failed is what a read returns for the source's err, after the bytes read with it.
func (d *Reader) failed(err error) error {
	if err != io.EOF {
		return err // a deadline, a reset: the caller decides; d can read on
	}
	if d.st == rsChunked {
		d.reason = BodyCut
		d.refused.Store(true)
		d.err = &Error{BodyCut}
		return d.err
	}
	d.err = io.EOF // the client stopped: mid-head, mid-body (the server sees it short), or between requests
	return io.EOF
}

func (d *Reader) hold(b []byte) {
	d.held = append(getBuf()[:0], b...)
}

// refuse passes on the stand-in head for d.reason, then the end of the stream.
func (d *Reader) refuse() {
	d.out = append(d.outBuffer(), standIn(d.reason)...)
	d.err = io.EOF
	d.refused.Store(true)
}

// bad makes every read from now on fail with d.reason.
func (d *Reader) bad() {
	d.err = &Error{d.reason}
	d.refused.Store(true)
}

func (d *Reader) outBuffer() []byte {
	if d.out != nil {
		return d.out
	}
	if d.outBuf == nil {
		d.outBuf = getBuf()
	}
	return d.outBuf[:0]
}

func (d *Reader) dropOut() {
	d.out = nil
	if d.outBuf != nil {
		putBuf(d.outBuf)
		d.outBuf = nil
	}
}

func (d *Reader) dropHeld() {
	if d.held != nil {
		putBuf(d.held)
		d.held = nil
	}
}

// bufPool holds the buffers of held heads and of what waits to be passed on, by their arrays
// (a slice put in a pool would be allocated to box it).
var bufPool = sync.Pool{New: func() any { return new([bufSize]byte) }}

const bufSize = 4096

func getBuf() []byte { return bufPool.Get().(*[bufSize]byte)[:] }

// putBuf gives b back to the pool if it is one of its buffers (one grown past it is left to
// the collector).
func putBuf(b []byte) {
	if cap(b) == bufSize {
		bufPool.Put((*[bufSize]byte)(b[:bufSize]))
	}
}

// RefusedPath is the path of the stand-in request a Reader passes on for a refused head.
const RefusedPath = "/_entry/refused"

// marker is this process's secret in a stand-in's Fenec-Door header, so that a client cannot
// send a stand-in of its own (it could only have its own request refused, but the reason
// counted would be a lie).
var marker = func() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

func standIn(r Reason) string {
	return "GET " + RefusedPath + " HTTP/1.1\r\nHost: entry\r\nConnection: close\r\nFenec-Door: " +
		marker + "." + strconv.Itoa(int(r)) + "\r\n\r\n"
}

// Refusal reports whether req is a Reader's stand-in for a refused head, and why.
func Refusal(req *http.Request) (Reason, bool) {
	if req.URL.Path != RefusedPath {
		return None, false
	}
	sec, num, ok := strings.Cut(req.Header.Get("Fenec-Door"), ".")
	if !ok || sec != marker {
		return None, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= int(None) || n >= int(numReasons) {
		return None, false
	}
	return Reason(n), true
}

// BodyReason is why reading a request body failed with err: the rule the door's *Error
// names, else BodyCut (the body ended short, or the client went away).
func BodyReason(err error) Reason {
	var de *Error
	if errors.As(err, &de) {
		return de.Reason
	}
	return BodyCut
}
