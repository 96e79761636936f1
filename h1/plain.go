package h1

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/fenec/fenec-entry/internal/httpsyntax"
)

// readPlain parses a plain request head, the kind nearly every client sends for a request
// without a body, when it is whole in br's buffer: "METHOD /target HTTP/1.1", CRLF line ends,
// exactly one valid Host line, header names of token characters, no line folding, and none of
// the headers net/http acts on while it reads a request (Content-Length, Transfer-Encoding,
// Trailer, Pragma, Expect, a Connection other than keep-alive). Such a head is read from one
// string: the names and values are its substrings, the request is built with ctx, and it costs
// about a third of http.ReadRequest's allocations (docs/BENCHMARKS.md).
//
// ok false: not plain, nothing consumed; http.ReadRequest then reads the same bytes, so what is
// refused and how is net/http's. What readPlain accepts, http.ReadRequest accepts with the same
// result (FuzzPlainRequest holds it to that), and net/http's server would check nothing more
// (checkRequest's checks are made here).
func readPlain(br *bufio.Reader, ctx context.Context) (req *http.Request, ok bool) {
	return readPlainInto(br, ctx, nil)
}

// plainStore is memory a connection's session keeps from request to request for readPlain:
// the header map, the values' array and the URL of the last request it read, which h1 no
// longer uses once that request's answer is finished (a handler must not keep the Request
// past its return: see Server). Three of a request's allocations fewer, and the map's memory
// (docs/BENCHMARKS.md).
type plainStore struct {
	header http.Header
	vals   []string
	url    url.URL
}

// maxKeptFields bounds what a session keeps: a head with more header lines (a megabyte of
// head can hold a hundred thousand) is read into new memory, left to the collector, so a
// pooled session never holds more than a map and an array of this many fields.
const maxKeptFields = 64

// release drops what st holds of the last request (a pooled session keeps no head alive).
func (st *plainStore) release() {
	clear(st.header)
	clear(st.vals)
	st.url = url.URL{}
}

// readPlainInto is readPlain building the request in st's memory when st is not nil.
func readPlainInto(br *bufio.Reader, ctx context.Context, st *plainStore) (req *http.Request, ok bool) {
	b, _ := br.Peek(br.Buffered())
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return nil, false
	}
	head := b[:end+4]
	nl := bytes.IndexByte(head, '\n')
	// The request line: method, target, version, each separated by one space.
	line := head[:nl]
	if len(line) < 15 || line[len(line)-1] != '\r' || !bytes.HasSuffix(line, []byte(" HTTP/1.1\r")) {
		return nil, false
	}
	line = line[:len(line)-len(" HTTP/1.1\r")]
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 || len(line)-sp < 2 || line[sp+1] != '/' {
		return nil, false // also CONNECT's authority form and the absolute form: net/http's
	}
	for _, c := range line[:sp] {
		if c < 'A' || c > 'Z' {
			return nil, false
		}
	}
	for _, c := range line[sp+1:] {
		if c <= ' ' || c >= 0x7f {
			return nil, false
		}
	}
	// One string for the whole head: method, target, names and values are its substrings.
	s := string(head)
	method := s[:sp]
	if method == "CONNECT" || method == "PRI" {
		return nil, false
	}
	target := s[sp+1 : len(line)]
	var u *url.URL
	if st != nil && simpleTarget(target, &st.url) {
		u = &st.url
	} else {
		var err error
		if u, err = url.ParseRequestURI(target); err != nil {
			return nil, false
		}
	}
	lines := bytes.Count(head, []byte("\n")) - 2 // the header's
	var h http.Header
	var strs []string // one backing array for the values, as textproto does
	if st != nil && lines <= maxKeptFields {
		if st.header == nil {
			st.header = make(http.Header, lines)
		}
		h = st.header
		clear(h)
		if cap(st.vals) < lines {
			st.vals = make([]string, lines)
		}
		strs = st.vals[:lines]
	} else {
		h, strs = make(http.Header, lines), make([]string, lines)
	}
	host, hosts := "", 0
	pos := nl + 1
	for {
		eol := pos + bytes.IndexByte(head[pos:], '\n')
		if eol <= pos || head[eol-1] != '\r' {
			return nil, false // a bare LF
		}
		if eol == pos+1 {
			break // the blank line
		}
		colon := bytes.IndexByte(head[pos:eol], ':')
		if colon <= 0 {
			return nil, false // no name, or a folded line (it starts with SP or HTAB)
		}
		name := s[pos : pos+colon]
		if !httpsyntax.PlainName(name) {
			if name = textproto.CanonicalMIMEHeaderKey(name); !httpsyntax.Token(name) {
				return nil, false
			}
		}
		value, ok := httpsyntax.FieldValue(s[pos+colon+1 : eol-1])
		if !ok {
			return nil, false
		}
		switch name {
		case "Content-Length", "Transfer-Encoding", "Trailer", "Pragma", "Expect":
			return nil, false
		case "Connection":
			if !strings.EqualFold(value, "keep-alive") {
				return nil, false
			}
		case "Host":
			if hosts++; hosts > 1 || !httpsyntax.ValidHost(value) {
				return nil, false
			}
			host = value
			pos = eol + 1
			continue // http.ReadRequest takes it out of the header into Host
		}
		httpsyntax.AddValue(h, &strs, name, value)
		pos = eol + 1
	}
	if hosts != 1 {
		return nil, false
	}
	br.Discard(len(head))
	r := http.Request{
		Method:     method,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Body:       http.NoBody,
		Host:       host,
		RequestURI: target,
	}
	return r.WithContext(ctx), true
}

// simpleTarget sets *u to what url.ParseRequestURI(target) returns for an origin-form target
// whose path has only bytes the URL package leaves as they are (pathKeeps: so Path is the path
// as sent, RawPath empty, nothing to unescape), whatever its query; false for any other target,
// u then unchanged. FuzzPlainRequest holds it to url.ParseRequestURI.
func simpleTarget(target string, u *url.URL) bool {
	path, query, hasQuery := strings.Cut(target, "?")
	if path == "" || path[0] != '/' {
		return false
	}
	for i := 0; i < len(path); i++ {
		if !pathKeeps[path[i]] {
			return false
		}
	}
	*u = url.URL{Path: path, RawQuery: query, ForceQuery: hasQuery && query == ""}
	return true
}

// pathKeeps: the bytes the URL package does not escape in a path, learnt from it (a URL whose
// path is "/" and the byte escapes to the same).
var pathKeeps = func() (t [256]bool) {
	for c := 0x21; c < 0x7f; c++ {
		p := "/" + string(rune(c))
		if c != '%' && c != '?' && c != '#' && (&url.URL{Path: p}).EscapedPath() == p {
			t[c] = true
		}
	}
	return t
}()
