package proxy

import (
	"io"
	"net/http"
	"time"

	"github.com/fenec/fenec-entry/internal/clock"
)

// maxHeld bounds the body of a router's 5xx kept while other regions are
// asked; a longer one is cut there (it is an error page, not data).
const maxHeld = 64 << 10

// heldAnswer is a router's own 5xx without Fenec-Home (outShard5xx) for a
// retryable request: the next region is asked, and if none answers better
// the client gets this answer rather than the entry's no_region_reachable,
// since a router did answer.
type heldAnswer struct {
	status int
	header http.Header
	body   []byte
}

// holdAnswer reads the answer's body, up to maxHeld, within timeout (the answer timeout):
// the deadline of the answer head was lifted for streams, and a router that stalls its
// error page must not stall the failover to the next region. A body cut short by the
// deadline or an error is kept as far as it came, like one cut at maxHeld.
func holdAnswer(at attemptResult, timeout time.Duration) *heldAnswer {
	hd := &heldAnswer{status: at.resp.StatusCode, header: at.resp.Header}
	if at.c != nil {
		// The system's clock: the kernel enforces the deadline. It replaces the head's (and
		// the connection is not pooled after).
		at.c.deadline = time.Time{}
		at.c.nc.SetReadDeadline(clock.System.Now().Add(timeout))
	}
	hd.body, _ = io.ReadAll(io.LimitReader(at.resp.Body, maxHeld))
	at.discard()
	return hd
}

func (hd *heldAnswer) deliver(w http.ResponseWriter) {
	dst := w.Header()
	copyAnswerHeader(dst, hd.header)
	dst.Del("Content-Length")
	w.WriteHeader(hd.status)
	w.Write(hd.body)
}
