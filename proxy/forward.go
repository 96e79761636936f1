package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/fenec/fenec-entry/door"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/clock"
)

const homesSourceLocal = homes.SourceLocal

// forward asks regions and routers in plan order until one attempt's outcome
// says to answer, or every region has failed. It sets x.result and x.status.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, x *exchange) {
	var buf [maxRegions]uint8
	order := h.plan(x, r, buf[:])
	var held *heldAnswer // a router's 5xx kept while other regions are asked

	for _, reg := range order {
		rr := x.rt.byID[reg]
		n := len(rr.routers)
		if n == 0 {
			continue // its DNS names resolved to nothing: no attempt, no mark
		}
		rs := rr.st
		start := rr.start()
		x.region = int(reg)
		nextRegion := false
		for i := 0; i < n && !nextRegion; i++ {
			rt := rr.routers[(start+i)%n]
			x.router = rt
			staleRetried := false
			for {
				at := h.attempt(r, x, rt, staleRetried)
				// A streamed body that is gone makes any request one that
				// cannot be sent again.
				act := decide(at.out, x.retryable && x.body.replayable(), staleRetried)
				h.logAttempt(r, x, rt, at, act)
				switch act {
				case actDeliver:
					h.answered(rs, rt, at.shard)
					h.deliver(w, r, x, at)
					return
				case actRetrySame:
					staleRetried = true
					continue
				case actNextRegion:
					h.answered(rs, rt, true)
					held = holdAnswer(at, h.cfg.AnswerTimeout)
					nextRegion = true
				case actMayHaveRun:
					// This region's next request starts at its next router;
					// the region is asked last by plain writes until one of
					// its routers answers.
					rs.lastGood.Store(rr.routers[(start+i+1)%n])
					h.markRegion(rs, x.requestID(r))
					h.setReach(rs, reachFailed, "request")
					h.writeError(w, r, x, entryMayHaveRun)
					return
				case actStop:
					var cbe *clientBodyError
					if errors.As(at.err, &cbe) {
						// The client's streamed body broke off: the router's request was
						// cut (its connection closed), and the client is told.
						h.refuseAtDoor(w, r, x, door.BodyReason(cbe.err))
						return
					}
					if err := x.body.broke(); err != nil {
						h.refuseAtDoor(w, r, x, door.BodyReason(err))
						return
					}
					x.result = resCanceled
					return
				}
				break // actNextRouter, actNextRegion
			}
		}
		if !nextRegion {
			// No router of the region answered this request.
			h.markRegion(rs, x.requestID(r))
			h.setReach(rs, reachFailed, "request")
		}
	}
	if held != nil {
		held.deliver(w)
		x.result, x.status = resAnswer, held.status
		return
	}
	h.writeError(w, r, x, entryNoRegionReachable)
}

func (x *exchange) requestID(r *http.Request) string {
	if x.head.requestID != "" {
		return x.head.requestID
	}
	return r.Header.Get("X-Request-Id")
}

// answered records that a router of rs answered on this entry's own connection: it is where
// the region's next request starts, the region's marks are cleared, and the region is reached
// from here.
func (h *Handler) answered(rs *regionState, rt *router, shard bool) {
	if !shard {
		return // not a Fenec router's answer (a proxy in front of it)
	}
	if rs.lastGood.Load() != rt {
		rs.lastGood.Store(rt)
	}
	h.clearRegion(rs)
	h.setReach(rs, reachAnswered, "request")
}

// attemptResult is one attempt's outcome and, when an answer head came back,
// the answer and its connection.
type attemptResult struct {
	out   outcome
	err   error
	resp  *http.Response
	pa    *plainAnswer // resp's storage when the fast path read it, for recycle
	c     *conn
	stop  stopper // stops the cancellation hook; false if it already closed c
	shard bool
	home  string
}

// attempt sends the request to one router and reads the answer head.
func (h *Handler) attempt(r *http.Request, x *exchange, rt *router, fresh bool) attemptResult {
	ctx := r.Context()
	x.tries++
	c, err := rt.get(ctx, fresh, !x.retryable)
	if err != nil {
		return attemptResult{out: classifyFailure(err, ctx.Err() != nil, false), err: err}
	}
	c.read = 0
	// The client going away closes the router connection at once, before or
	// after the answer head, so the router sees it.
	stop := afterFunc(ctx, c.closeFn)
	// The system's clock, not Config.Clock: the kernel enforces the deadline, and the
	// upstream histogram and the latency sample measure real work from the same reading.
	sent := clock.System.Now()
	c.answerDeadline(sent, h.cfg.AnswerTimeout)

	bw := getWriter(c)
	if dropped := writeHead(bw, &x.head, r.Header); dropped > 0 && x.tries == 1 {
		h.met.m.UnderscoreDrops.Add(float64(dropped))
	}
	err = x.body.writeTo(bw)
	if err == nil {
		err = c.flushRequest(bw)
	}
	var resp *http.Response
	var pa *plainAnswer
	if err == nil {
		resp, pa, err = readAnswerHead(c.br, r, &c.spare)
	}
	c.pending = nil // sent by the first read; never left for a later one
	putWriter(bw)
	if err != nil {
		stop.Stop()
		c.nc.Close()
		return attemptResult{out: classifyFailure(err, ctx.Err() != nil, c.reused && c.read == 0), err: err}
	}
	took := clock.System.Now().Sub(sent)
	rt.reg.upstream.Observe(took.Seconds())
	rt.reg.lat.observe(took, h.cfg.Clock.Now().UnixNano())
	// Once the head has arrived there is no time limit (streams, held writes): the deadline
	// is lifted before the body is read from the socket (conn.Read); a body that came with
	// the head leaves it for the connection's next request.
	c.inBody = true
	at := attemptResult{resp: resp, pa: pa, c: c, stop: stop}
	if v := resp.Header["Fenec-Shard"]; len(v) > 0 && v[0] == "1" {
		at.shard = true
	}
	if v := resp.Header["Fenec-Home"]; len(v) > 0 {
		at.home = v[0]
	}
	at.out = classifyAnswer(resp.StatusCode, at.shard, at.home != "")
	return at
}

// stopper stops a function waiting for a context's end (context.AfterFunc's stop).
type stopper interface{ Stop() bool }

type stopFunc func() bool

func (f stopFunc) Stop() bool { return f() }

// onCanceler is a context that schedules its own functions for its end, returning a stopper
// that costs no allocation (h1's request context does, without the cancelCtx and closure
// context.AfterFunc adds around it, and without the func value AfterFunc's stop would be).
type onCanceler interface {
	OnCancel(func()) interface{ Stop() bool }
}

// afterFunc is context.AfterFunc, calling ctx's own OnCancel directly when it has one.
func afterFunc(ctx context.Context, f func()) stopper {
	if a, ok := ctx.(onCanceler); ok {
		return a.OnCancel(f)
	}
	return stopFunc(context.AfterFunc(ctx, f))
}

// readAnswerHead reads the answer head, skipping interim 1xx answers; spare as
// readAnswerReusing's.
func readAnswerHead(br *bufio.Reader, r *http.Request, spare **plainAnswer) (*http.Response, *plainAnswer, error) {
	for {
		resp, pa, err := readAnswerReusing(br, r, spare)
		if err != nil {
			return nil, nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, pa, nil
		}
	}
}

// recycle hands a delivered answer's storage back to its connection, for the connection's
// next answer; the caller uses neither at.resp nor its header after. A header map grown
// beyond an ordinary answer's is left to the collector (emptying a map costs its size).
func (at *attemptResult) recycle() {
	if at.pa != nil && at.c != nil && len(at.pa.resp.Header) <= maxRecycledFields {
		at.c.spare = at.pa
	}
	at.pa, at.resp = nil, nil
}

// maxRecycledFields: see recycle.
const maxRecycledFields = 16

// finishConn returns a connection whose answer was read to its end to the
// pool, or closes it.
func (at *attemptResult) finishConn(reusable bool) {
	if at.c == nil {
		return
	}
	if at.stop.Stop() && reusable {
		at.c.reused = false
		at.c.rt.put(at.c)
	} else {
		at.c.nc.Close()
	}
	at.c = nil
}

// discard gives up an answer not handed to the client: the connection is
// closed first, so closing the body cannot read an endless stream to its end.
func (at *attemptResult) discard() {
	at.finishConn(false)
	if at.resp != nil {
		at.resp.Body.Close()
	}
}

// An answer's body is copied through a 4 KiB buffer first, and through a 32 KiB one from the
// first read that fills the small one: a short answer or an event stream (whose events are
// small, and which holds its buffer for its whole life) touches 4 KiB, not 32.
var (
	smallBufPool = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}
	copyBufPool  = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
)

// deliver hands an answer to the client: learns the home it names, copies
// the headers less hygiene, and streams the body, flushing each read but the last, so an
// event reaches the client as the router sends it.
func (h *Handler) deliver(w http.ResponseWriter, r *http.Request, x *exchange, at attemptResult) {
	resp := at.resp
	x.status = resp.StatusCode
	x.result = resAnswer
	if at.home != "" && x.tenant != "" {
		if reg, ok := x.rt.byName[at.home]; ok {
			h.homes.Learn(x.tenant, reg)
			if reg != x.region {
				h.met.m.Relays.Inc()
				// Relayed: a router of the home region answered (through
				// another region's router), which clears its marks too. A
				// router's own 5xx naming the home says the opposite.
				if resp.StatusCode < 500 {
					h.clearRegion(x.rt.byID[reg].st)
				}
			}
		} else {
			h.met.m.UnknownHome.Inc()
		}
	}
	dst := w.Header()
	copyAnswerHeader(dst, resp.Header)
	w.WriteHeader(resp.StatusCode)

	if resp.Body == http.NoBody {
		resp.Body.Close()
		reusable := !resp.Close
		at.recycle()
		at.finishConn(reusable)
		return
	}
	h.streaming.Add(1)
	defer h.streaming.Add(-1)
	bp, pool := smallBufPool.Get().(*[]byte), &smallBufPool
	defer func() { pool.Put(bp) }()
	buf := *bp
	flusher, _ := w.(http.Flusher)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				// The client is gone: close the router connection too.
				x.result = resCanceled
				at.discard()
				return
			}
			if flusher != nil && rerr != io.EOF {
				// Not after the last read: the answer ends as the handler returns, and
				// HTTP/2 then sends its head and body with END_STREAM, where a flush first
				// costs an extra frame and write.
				flusher.Flush()
			}
			if n == len(buf) && pool == &smallBufPool { // a bulk answer
				smallBufPool.Put(bp)
				bp, pool = copyBufPool.Get().(*[]byte), &copyBufPool
				buf = *bp
			}
		}
		if rerr == io.EOF {
			resp.Body.Close()
			reusable := !resp.Close
			at.recycle()
			at.finishConn(reusable)
			return
		}
		if rerr != nil {
			at.discard()
			if r.Context().Err() != nil {
				x.result = resCanceled
				return
			}
			// The router broke off mid-answer: abort the client's
			// connection so it cannot take a cut answer for a whole one.
			x.result = resAborted
			h.finish(x, r, x.requestID(r), resAborted, x.status)
			panic(http.ErrAbortHandler)
		}
		if streamPaused(resp, n, len(buf), at.c.br) && pool == &smallBufPool {
			// An event stream spends its life waiting for the next event: it waits holding
			// no copy buffer (4 KiB of every open stream), in the connection's own reader,
			// and the client's server gives back its empty write buffer too where it can (h1:
			// 4 KiB more). What the wait meets (data, the end, an error) the next Read meets
			// again.
			smallBufPool.Put(bp)
			if rb, ok := w.(writeBufferReleaser); ok {
				rb.ReleaseWriteBuffer()
			}
			at.c.br.Peek(1)
			bp = smallBufPool.Get().(*[]byte)
			buf = *bp
		}
	}
}

// writeBufferReleaser is a ResponseWriter that can give its write buffer back while nothing
// is held in it (h1's), taking one again at the next write.
type writeBufferReleaser interface{ ReleaseWriteBuffer() }

// streamPaused reports whether an answer of no announced length (a stream: chunked, or to the
// connection's end) has handed on all it had: the read before got less than the buffer and
// nothing is buffered, so the next read would wait for the router. An answer of known length
// never waits here: its last read may end with its last byte, and nothing more would come.
func streamPaused(resp *http.Response, n, bufLen int, br *bufio.Reader) bool {
	return resp.ContentLength < 0 && n < bufLen && br.Buffered() == 0
}
