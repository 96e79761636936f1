package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// reqBody is a request body as the attempts see it: kept whole in memory
// (buf, up to --body-buffer) so every router can be sent it, streamed once
// (a longer body with Content-Length), or absent.
type reqBody struct {
	kind     bodyKind
	buf      *bytes.Buffer // bodyKept
	length   int64         // Content-Length to send; -1: none
	stream   *countReader  // bodyStreamed
	reserved int64         // bytes taken from the bodyBudget, given back when the request ends
	squeezed bool          // streamed although short enough to keep: the budget was spent
}

// bodyBudget bounds the request body bytes held in memory at once across all requests
// (Config.MaxBufferedBytes): without it, --max-inflight requests of --body-buffer each could
// hold 10 GB. Safe for concurrent use.
type bodyBudget struct {
	max  int64
	used atomic.Int64
}

func (b *bodyBudget) take(n int64) bool {
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *bodyBudget) give(n int64) { b.used.Add(-n) }

type bodyKind uint8

const (
	bodyNone bodyKind = iota
	bodyKept
	bodyStreamed
)

// countReader counts what an attempt took from a streamed body: once one byte
// is gone, no other router can be sent the body.
type countReader struct {
	r   io.Reader
	n   int64
	err error // the client's read error, if its body broke off
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

var (
	errLengthRequired = errors.New("request body without length exceeds the body buffer")
	errBodyRead       = errors.New("reading the request body")
	errBodyBudget     = errors.New("no room to buffer a request body without length")
)

// needsLength: methods whose empty body is still sent with Content-Length: 0.
func needsLength(method string) bool {
	switch method {
	case "POST", "PUT", "PATCH":
		return true
	}
	return false
}

// prepareBody reads a body of at most limit bytes into memory; a longer one
// with a declared length is left to be streamed; a longer one without a
// length (chunked from the client, or h2 without content-length) is refused
// with errLengthRequired before any router is asked, since routers take no
// chunked body. Kept bytes come out of budget: a body with a length that does
// not fit is streamed like a long one; a body without a length needs room for
// limit bytes to be judged, and without it is refused with errBodyBudget.
func prepareBody(r *http.Request, limit int64, budget *bodyBudget) (reqBody, error) {
	cl := r.ContentLength
	if r.Body == nil || r.Body == http.NoBody || cl == 0 {
		if needsLength(r.Method) {
			return reqBody{kind: bodyNone, length: 0}, nil
		}
		return reqBody{kind: bodyNone, length: -1}, nil
	}
	if cl > limit {
		return reqBody{kind: bodyStreamed, length: cl, stream: &countReader{r: r.Body}}, nil
	}
	reserve := cl
	if cl < 0 {
		reserve = limit
	}
	if !budget.take(reserve) {
		if cl < 0 {
			return reqBody{}, errBodyBudget
		}
		return reqBody{kind: bodyStreamed, length: cl, stream: &countReader{r: r.Body}, squeezed: true}, nil
	}
	b, err := readBody(r, cl, limit)
	if err != nil {
		budget.give(reserve)
		return b, err
	}
	if b.kind != bodyKept {
		budget.give(reserve)
		return b, nil
	}
	budget.give(reserve - b.length) // keep only what the body holds
	b.reserved = b.length
	return b, nil
}

// readBody reads a body of at most limit bytes (cl, or unknown: -1) into a pooled buffer.
func readBody(r *http.Request, cl, limit int64) (reqBody, error) {
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	// Read at most limit+1 bytes: one more than the limit proves a body
	// without a length is too long.
	n, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1))
	if err != nil {
		releaseBody(buf)
		return reqBody{}, errors.Join(errBodyRead, err)
	}
	if n > limit {
		releaseBody(buf)
		return reqBody{}, errLengthRequired
	}
	if cl >= 0 && n != cl {
		releaseBody(buf)
		return reqBody{}, errors.Join(errBodyRead, io.ErrUnexpectedEOF)
	}
	if n == 0 && !needsLength(r.Method) {
		releaseBody(buf)
		return reqBody{kind: bodyNone, length: -1}, nil
	}
	return reqBody{kind: bodyKept, buf: buf, length: n}, nil
}

func releaseBody(buf *bytes.Buffer) {
	if buf != nil && buf.Cap() <= 4<<20 {
		bodyPool.Put(buf)
	}
}

// replayable says whether the body can still be sent to another router.
func (b *reqBody) replayable() bool {
	return b.kind != bodyStreamed || b.stream.n == 0
}

// writeTo sends the body after the head.
func (b *reqBody) writeTo(w io.Writer) error {
	switch b.kind {
	case bodyKept:
		_, err := w.Write(b.buf.Bytes())
		return err
	case bodyStreamed:
		n, err := io.Copy(w, io.LimitReader(b.stream, b.length))
		if b.stream.err != nil {
			return &clientBodyError{b.stream.err}
		}
		if err == nil && n < b.length {
			return &clientBodyError{io.ErrUnexpectedEOF}
		}
		return err // a write to the router failed
	}
	return nil
}

// broke says whether a streamed body broke off, for an attempt ended by the client's
// leaving: on the lean server a half-close ends the request's context while the body is
// still being sent, and the router connection's closing can stop the copy before it reads
// the client's end. What the client sent but the copy had not read is read now (its end
// has been seen, so the read does not wait): a body that ends short is a body that broke
// off (answered 400, as the client may still read), a whole one is a client that left.
func (b *reqBody) broke() error {
	if b.kind != bodyStreamed {
		return nil
	}
	if b.stream.err == nil && b.stream.n < b.length {
		io.Copy(io.Discard, io.LimitReader(b.stream, b.length-b.stream.n))
	}
	if b.stream.err != nil {
		return b.stream.err
	}
	if b.stream.n < b.length {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// clientBodyError: the client's body broke off while streaming it.
type clientBodyError struct{ err error }

func (e *clientBodyError) Error() string { return "client body: " + e.err.Error() }
func (e *clientBodyError) Unwrap() error { return e.err }
