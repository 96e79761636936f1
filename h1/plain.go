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
// about a third of http.ReadRequest's allocations (docs/BENCHMARKS.md, issue 10).
//
// ok false: not plain, nothing consumed; http.ReadRequest then reads the same bytes, so what is
// refused and how is net/http's. What readPlain accepts, http.ReadRequest accepts with the same
// result (FuzzPlainRequest holds it to that), and net/http's server would check nothing more
// (checkRequest's checks are made here).
func readPlain(br *bufio.Reader, ctx context.Context) (req *http.Request, ok bool) {
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
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, false
	}
	lines := bytes.Count(head, []byte("\n")) - 2 // the header's
	h := make(http.Header, lines)
	strs := make([]string, lines) // one backing array for the values, as textproto does
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
			if name = textproto.CanonicalMIMEHeaderKey(name); !validFieldName(name) {
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
			if hosts++; hosts > 1 || !validHost(value) {
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
