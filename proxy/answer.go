package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strconv"

	"github.com/fenec/fenec-entry/internal/httpsyntax"
)

// readAnswer is http.ReadResponse for a router's answer head, with a fast path for the plain
// answers routers send: an HTTP/1.1 status line, canonical header names, a Content-Length or
// "Transfer-Encoding: chunked", no Connection or Trailer header, a status with a body. Such
// a head, when it is in the read buffer whole, is parsed here from one string (the header's
// names and values are its substrings): 6 allocations where http.ReadResponse makes 14
// (docs/BENCHMARKS.md). Anything else (or any doubt) is read by http.ReadResponse
// from the same unread bytes, so what is accepted, refused and how a body is framed is
// net/http's; FuzzAnswerDifferential holds the fast path to that.
func readAnswer(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	resp, _, err := readAnswerReusing(br, req, nil)
	return resp, err
}

// readAnswerReusing is readAnswer building a plain answer in *spare when it holds one (a
// connection's last answer, handed back whole: see plainAnswer), taking it (*spare = nil); pa
// is the fast path's answer (resp is &pa.resp), nil when net/http read the head.
func readAnswerReusing(br *bufio.Reader, req *http.Request, spare **plainAnswer) (resp *http.Response, pa *plainAnswer, err error) {
	if req.Method != http.MethodHead {
		for {
			b, _ := br.Peek(br.Buffered())
			if end := headEnd(b); end > 0 {
				if pa := parseAnswer(br, b[:end], req, spare); pa != nil {
					return &pa.resp, pa, nil
				}
				break
			}
			if br.Buffered() == br.Size() {
				break // a head longer than the buffer: net/http's way
			}
			if _, err := br.Peek(br.Buffered() + 1); err != nil {
				break // net/http meets the error and words it
			}
		}
	}
	resp, err = http.ReadResponse(br, req)
	return resp, nil, err
}

// headEnd is the length of the head in b up to and including its blank line ("\r\n\r\n"),
// or 0 while b holds no such line. A bare-LF head is never found: net/http reads it.
func headEnd(b []byte) int {
	i := bytes.Index(b, []byte("\r\n\r\n"))
	if i < 0 {
		return 0
	}
	return i + 4
}

// parseAnswer parses head (the status line through the blank line) if it is of the plain
// kind, and consumes it from br; nil: not plain, nothing consumed (and *spare as it was).
// spare, when not nil and holding an answer, is where the answer is built (its header map
// emptied and filled again), instead of new memory.
func parseAnswer(br *bufio.Reader, head []byte, req *http.Request, spare **plainAnswer) *plainAnswer {
	// Status line: "HTTP/1.1 NNN reason".
	nl := bytes.IndexByte(head, '\n')
	line := head[:nl]
	if len(line) < 13 || line[len(line)-1] != '\r' || string(line[:9]) != "HTTP/1.1 " {
		return nil
	}
	line = line[:len(line)-1]
	code, ok := statusCode(line[9:12])
	if !ok || (len(line) > 12 && line[12] != ' ') || code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return nil
	}
	for _, c := range line[12:] {
		if !httpsyntax.IsFieldValueByte(c) { // reason-phrase
			return nil
		}
	}
	// One string for the whole head: the header's names and values are its substrings.
	s := string(head)
	lines := bytes.Count(head, []byte("\n")) - 2 // the header's, without the status and blank lines
	var pa *plainAnswer
	var h http.Header
	if spare != nil && *spare != nil {
		pa, h = *spare, (*spare).resp.Header
		clear(h)
	} else {
		// The size hint bounded: a head of many lines of few names would otherwise make (and,
		// recycled, keep and empty each time) a map sized for lines it never holds.
		pa, h = new(plainAnswer), make(http.Header, min(lines, maxRecycledFields))
	}
	// One backing array for the values, as textproto does. Never reused: the proxy hands the
	// value slices on to the client's answer header (copyAnswerHeader).
	strs := make([]string, lines)
	length, chunked := int64(-1), false
	pos := nl + 1
	for {
		eol := pos + bytes.IndexByte(head[pos:], '\n')
		if eol < pos || eol == pos || head[eol-1] != '\r' {
			return nil // a bare LF
		}
		if eol == pos+1 {
			break // the blank line
		}
		colon := bytes.IndexByte(head[pos:eol], ':')
		if colon <= 0 {
			return nil
		}
		name := s[pos : pos+colon]
		if !httpsyntax.PlainName(name) {
			return nil
		}
		value, ok := httpsyntax.FieldValue(s[pos+colon+1 : eol-1])
		if !ok {
			return nil
		}
		switch name {
		case "Content-Length":
			if length >= 0 {
				return nil
			}
		case "Transfer-Encoding":
			if chunked {
				return nil
			}
		}
		switch name {
		case "Connection", "Trailer", "Pragma": // net/http acts on these: its way
			return nil
		case "Content-Length":
			n, ok := plainLength(value)
			if !ok {
				return nil
			}
			length = n
		case "Transfer-Encoding":
			if value != "chunked" {
				return nil
			}
			chunked = true
			pos = eol + 1
			continue // net/http takes it out of the header into TransferEncoding
		}
		httpsyntax.AddValue(h, &strs, name, value)
		pos = eol + 1
	}
	if chunked == (length >= 0) {
		return nil // neither (the body ends with the connection) or both: net/http's
	}
	br.Discard(len(head))
	if spare != nil {
		*spare = nil
	}
	*pa = plainAnswer{resp: http.Response{
		Status:     s[9:len(line)],
		StatusCode: code,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Request:    req,
	}}
	resp := &pa.resp
	switch {
	case chunked:
		h.Del("Content-Length")
		resp.ContentLength = -1
		resp.TransferEncoding = []string{"chunked"}
		resp.Body = &chunkedBody{br: br, cr: httputil.NewChunkedReader(br)}
	case length == 0:
		resp.Body = http.NoBody
	default:
		resp.ContentLength = length
		pa.body = lengthBody{br: br, n: length}
		resp.Body = &pa.body
	}
	return pa
}

func statusCode(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// plainLength: a Content-Length of 1 to 18 decimal digits.
func plainLength(v string) (int64, bool) {
	if v == "" || len(v) > 18 {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// plainAnswer is a plain answer and its body of known length, allocated together. The
// proxy hands one back to its connection once delivered (the head written to the client, the
// body read to its end, nothing left holding the Response or its header map), and the
// connection's next answer is built in it: two of a request's allocations fewer, and the
// map's memory (docs/BENCHMARKS.md). An answer held or given up is not handed back.
type plainAnswer struct {
	resp http.Response
	body lengthBody
}

// lengthBody is an answer body of n bytes; the stream ending before them is
// io.ErrUnexpectedEOF, as net/http's body says.
type lengthBody struct {
	br     *bufio.Reader
	n      int64
	closed bool
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.br.Read(p)
	b.n -= int64(n)
	if err == io.EOF && b.n > 0 {
		err = io.ErrUnexpectedEOF
	}
	if err == nil && b.n == 0 {
		err = io.EOF
	}
	return n, err
}

// Close stops reading; the proxy closes a body only once read to its end or with its
// connection closed, so nothing is drained.
func (b *lengthBody) Close() error { b.closed = true; return nil }

// chunkedBody is a chunked answer body; after the last chunk its trailer section is read
// (and dropped, as the proxy does not forward trailers), so the connection is at the next
// answer.
type chunkedBody struct {
	br     *bufio.Reader
	cr     io.Reader
	done   bool
	closed bool
}

func (b *chunkedBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.done {
		return 0, io.EOF
	}
	n, err := b.cr.Read(p)
	if err == io.EOF {
		if terr := b.readTrailer(); terr != nil {
			return n, terr
		}
		b.done = true
	}
	return n, err
}

// readTrailer is net/http's body.readTrailer, the trailer dropped.
func (b *chunkedBody) readTrailer() error {
	buf, err := b.br.Peek(2)
	if string(buf) == "\r\n" {
		b.br.Discard(2)
		return nil
	}
	if len(buf) < 2 {
		return errTrailerEOF
	}
	if err != nil {
		return err
	}
	if !upcomingDoubleCRLF(b.br) { // an unbounded trailer is not read
		return errLongTrailer
	}
	if _, err := textproto.NewReader(b.br).ReadMIMEHeader(); err != nil {
		if err == io.EOF {
			return errTrailerEOF
		}
		return err
	}
	return nil
}

var (
	errTrailerEOF  = errors.New("http: unexpected EOF reading trailer")
	errLongTrailer = errors.New("http: suspiciously long trailer after chunked body")
)

// upcomingDoubleCRLF is net/http's seeUpcomingDoubleCRLF: the trailer's end is within
// the read buffer.
func upcomingDoubleCRLF(r *bufio.Reader) bool {
	for size := 4; ; size++ {
		buf, err := r.Peek(size)
		if bytes.HasSuffix(buf, []byte("\r\n\r\n")) {
			return true
		}
		if err != nil {
			return false
		}
	}
}

func (b *chunkedBody) Close() error { b.closed = true; return nil }
