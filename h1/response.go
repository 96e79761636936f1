package h1

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fenec/fenec-entry/internal/clock"
	"github.com/fenec/fenec-entry/internal/httpsyntax"
)

// response is the http.ResponseWriter (and http.Flusher) of one request. Like net/http's, it
// holds up to bufferBeforeHead bytes of body before it writes the head, so that a short answer
// whose handler set no Content-Length gets one instead of chunked framing.
type response struct {
	srv         *Server
	ss          *session // the connection's; its writer is bw (nil while released)
	bw          *bufio.Writer
	req         *http.Request
	header      http.Header
	status      int
	wroteHeader bool // WriteHeader was called (final status chosen)
	wroteHead   bool // the head is on the wire (in bw)
	closeAfter  bool // the connection closes after this answer
	// wants10KeepAlive and wantsClose are net/http's readings of the request's Connection
	// header, made before the handler runs.
	wants10KeepAlive, wantsClose bool
	chunked                      bool
	bodyAllowed                  bool
	contentLen                   int64 // from the header; -1: none
	written                      int64
	pending                      []byte // body held before the head is written
	pendingBuf                   [bufferBeforeHead]byte
	failed                       bool // a write to the client failed: the connection is done
}

const bufferBeforeHead = 2048 // net/http's bufferBeforeChunkingSize

// responses are reused: a response with its 2 KiB hold and its header map is most of what
// serving a request allocates. A response goes back only once its handler has returned and
// the answer is finished (never after a panic).
var responses = sync.Pool{New: func() any { return &response{header: make(http.Header, 8)} }}

func newResponse(srv *Server, ss *session, req *http.Request) *response {
	w := responses.Get().(*response)
	w.reset(srv, ss, req)
	// As net/http: the keep-alive an HTTP/1.0 client asks for is looked for with its looser
	// token match (httpsyntax.LooseToken), whatever req.Close says; the decision is made with
	// the head.
	conn := req.Header.Get("Connection")
	w.wants10KeepAlive = req.ProtoMajor == 1 && req.ProtoMinor == 0 && httpsyntax.LooseToken(conn, "keep-alive")
	w.wantsClose = req.Close || httpsyntax.LooseToken(conn, "close")
	return w
}

// reset makes w a new answer to req, its header empty. Field by field: a struct literal would
// zero the 2 KiB hold too, 1% of the entry's CPU (TestResponseResetClearsEveryField).
func (w *response) reset(srv *Server, ss *session, req *http.Request) {
	clear(w.header)
	w.srv, w.ss, w.bw, w.req = srv, ss, ss.bw, req
	w.status, w.wroteHeader, w.wroteHead, w.closeAfter = 0, false, false, false
	w.wants10KeepAlive, w.wantsClose = false, false
	w.chunked, w.bodyAllowed, w.failed = false, false, false
	w.contentLen, w.written = -1, 0
	w.pending = w.pendingBuf[:0]
}

// release gives w back for another request; w must not be used after.
func (w *response) release() {
	w.req, w.bw, w.ss, w.srv = nil, nil, nil, nil
	responses.Put(w)
}

// ReleaseWriteBuffer gives the connection's 4 KiB writer back while nothing is held in it, for
// a handler about to wait long between writes (the proxy, when an event stream pauses): an
// open stream then holds no write buffer while it waits. The next write takes one again.
func (w *response) ReleaseWriteBuffer() {
	if w.bw != nil && w.bw.Buffered() == 0 && w.wroteHead {
		w.ss.releaseWriter()
		w.bw = nil
	}
}

// writer makes sure w has the connection's writer (taken again after ReleaseWriteBuffer).
func (w *response) writer() *bufio.Writer {
	if w.bw == nil {
		w.bw = w.ss.acquireWriter()
	}
	return w.bw
}

func (w *response) Header() http.Header { return w.header }

func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic("h1: invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		// An interim answer: written at once; the final one follows.
		w.writer()
		w.bw.WriteString("HTTP/1.1 " + strconv.Itoa(code) + " " + http.StatusText(code) + "\r\n")
		writeHeaderLines(w.bw, w.header)
		w.bw.WriteString("\r\n")
		w.bw.Flush()
		return
	}
	w.wroteHeader = true
	w.status = code
	w.bodyAllowed = code != http.StatusNoContent && code != http.StatusNotModified && w.req.Method != http.MethodHead
	if cl := w.header.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			w.contentLen = n
		} else {
			w.header.Del("Content-Length")
		}
	}
}

func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.failed {
		return 0, errWriteFailed
	}
	if !w.bodyAllowed {
		return 0, http.ErrBodyNotAllowed
	}
	if w.contentLen >= 0 && w.written+int64(len(p)) > w.contentLen {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	w.writer()
	if !w.wroteHead {
		if len(w.pending)+len(p) <= bufferBeforeHead {
			w.pending = append(w.pending, p...)
			return len(p), nil
		}
		w.writeHead(false)
	}
	return w.writeBody(p)
}

var errWriteFailed = &writeError{}

type writeError struct{}

func (*writeError) Error() string { return "h1: writing to the client failed" }

func (w *response) writeBody(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if w.chunked {
		w.bw.WriteString(strconv.FormatInt(int64(len(p)), 16))
		w.bw.WriteString("\r\n")
	}
	n, err := w.bw.Write(p)
	if w.chunked && err == nil {
		_, err = w.bw.WriteString("\r\n")
	}
	if err != nil {
		w.failed = true
		w.closeAfter = true
	}
	return n, err
}

// Flush writes the head and what is held, and flushes to the client.
func (w *response) Flush() {
	w.writer()
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.wroteHead {
		w.writeHead(false)
	}
	if err := w.bw.Flush(); err != nil {
		w.failed = true
		w.closeAfter = true
	}
}

// writeHead writes the status line and the header; final: the handler has returned, so the
// body held is all of it.
func (w *response) writeHead(final bool) {
	w.wroteHead = true
	h := w.header
	if w.bodyAllowed {
		if _, ok := h["Content-Type"]; !ok && len(w.pending) > 0 && !hasTE(h) {
			h.Set("Content-Type", http.DetectContentType(w.pending))
		}
	}
	switch {
	case w.contentLen >= 0:
	case !w.bodyAllowed:
		if w.req.Method == http.MethodHead && final && len(w.pending) > 0 {
			h.Set("Content-Length", strconv.Itoa(len(w.pending)))
		}
	case final:
		w.contentLen = int64(len(w.pending))
		if w.status != http.StatusNoContent && w.status != http.StatusNotModified {
			h.Set("Content-Length", strconv.FormatInt(w.contentLen, 10))
		}
	case w.req.ProtoAtLeast(1, 1):
		w.chunked = true
		h.Del("Content-Length")
	}
	// net/http's rule: an HTTP/1.0 client's keep-alive is kept when the answer's end is
	// known (a length, HEAD, or no body); otherwise HTTP/1.0, or a request asking to close,
	// closes (HTTP/1.0 without a length: the end of the body is the close).
	keep10 := w.wants10KeepAlive && (w.req.Method == http.MethodHead || w.contentLen >= 0 || !w.bodyAllowed)
	if !keep10 && (!w.req.ProtoAtLeast(1, 1) || w.wantsClose) {
		w.closeAfter = true
	}
	if httpsyntax.ListHasToken(h["Connection"], "close") || w.srv.closing() {
		w.closeAfter = true // asked for, or the server shuts down
	}
	bw := w.bw
	bw.WriteString("HTTP/1.1 ")
	writeStatus(bw, w.status)
	if text := http.StatusText(w.status); text != "" {
		bw.WriteByte(' ')
		bw.WriteString(text)
	} else {
		bw.WriteString(" status code ")
		writeStatus(bw, w.status)
	}
	bw.WriteString("\r\n")
	if _, ok := h["Date"]; !ok {
		bw.WriteString("Date: ")
		bw.WriteString(httpDate())
		bw.WriteString("\r\n")
	}
	writeHeaderLines(bw, h)
	if w.chunked {
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if w.closeAfter && !httpsyntax.ListHasToken(h["Connection"], "close") {
		bw.WriteString("Connection: close\r\n")
	} else if keep10 && !w.closeAfter {
		if _, set := h["Connection"]; !set {
			bw.WriteString("Connection: keep-alive\r\n") // an HTTP/1.0 client that asked for it
		}
	}
	bw.WriteString("\r\n")
	if len(w.pending) > 0 && w.bodyAllowed {
		p := w.pending
		w.pending = w.pending[:0]
		w.writeBody(p)
	}
}

func hasTE(h http.Header) bool { _, ok := h["Transfer-Encoding"]; return ok }

// finish ends the answer after the handler returned.
func (w *response) finish() {
	w.writer()
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.wroteHead {
		w.writeHead(true)
	}
	if w.chunked {
		w.bw.WriteString("0\r\n\r\n")
	}
	if w.contentLen >= 0 && w.written != w.contentLen && w.bodyAllowed {
		w.closeAfter = true // the client would wait for bytes that never come
	}
}

// writeHeaderLines writes h as header lines, less what the server writes itself. Keys that
// are not valid field names are dropped and CR and LF in values become spaces, as net/http
// does.
func writeHeaderLines(bw *bufio.Writer, h http.Header) {
	for k, vv := range h {
		if k == "Transfer-Encoding" || !httpsyntax.Token(k) {
			continue
		}
		for _, v := range vv {
			bw.WriteString(k)
			bw.WriteString(": ")
			if strings.ContainsAny(v, "\r\n") {
				v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
			}
			bw.WriteString(httpsyntax.TrimOWS(v))
			bw.WriteString("\r\n")
		}
	}
}

// httpDate is the Date header's value, made at most once a second.
func httpDate() string {
	now := clock.System.Now()
	sec := now.Unix()
	if d := cachedDate.Load(); d != nil && d.sec == sec {
		return d.text
	}
	d := &dateText{sec: sec, text: now.UTC().Format(http.TimeFormat)}
	cachedDate.Store(d)
	return d.text
}

type dateText struct {
	sec  int64
	text string
}

var cachedDate atomic.Pointer[dateText]

// writeStatus writes a status code (100 to 999, as WriteHeader holds it to) as three digits:
// strconv.Itoa makes a string for any number past 99, one allocation an answer.
func writeStatus(bw *bufio.Writer, code int) {
	bw.WriteByte(byte('0' + code/100))
	bw.WriteByte(byte('0' + code/10%10))
	bw.WriteByte(byte('0' + code%10))
}
