package door

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"

	"github.com/fenec/fenec-entry/internal/httpsyntax"
)

// head is what the door knows of the request head it is reading: how far its lines are
// checked, and the facts that decide its framing. The zero value is a head not yet begun.
type head struct {
	off      int // bytes of the head checked, whole lines
	searched int // bytes after off already searched for the line's LF
	skip     int // bytes of empty lines before the request line
	empty    int // those empty lines
	line     bool
	http10   bool
	preface  bool // the request line is HTTP/2's preface (PRI * HTTP/2.0)
	fields   int
	hosts    int
	hostBad  Reason // EmptyHost or BadHost, from the first Host line
	cls      int    // Content-Length lines
	cl       int64
	clBad    Reason // BadContentLength or ContentLengths
	tes      int    // Transfer-Encoding lines
	teBad    bool   // a list element that is not a coding, or empty
	chunked  int    // chunked codings
	other    bool   // a coding other than chunked
}

// framing is how a complete head's body is delimited.
type framing uint8

const (
	noBody framing = iota
	withLength
	chunkedBody
	preface // HTTP/2 with prior knowledge: not HTTP/1 from here on
)

// step checks the lines of b, a head from its first byte, from where the last call stopped.
// n > 0: the head is whole and n bytes long (its blank line included); r: the head is
// refused; both zero: the head goes on past b. b may run past the head's end.
func (h *head) step(b []byte, connStart bool) (n int, r Reason) {
	for {
		rest := b[h.off:]
		i := bytes.IndexByte(rest[h.searched:], '\n')
		if i < 0 {
			h.searched = len(rest)
			switch {
			case !h.line && len(rest) > MaxRequestLine+1:
				return 0, RequestLineTooLong
			case h.line && len(rest) > MaxFieldLine+1:
				return 0, FieldLineTooLong
			case len(b) > MaxHead:
				return 0, HeadTooLarge
			}
			return 0, None
		}
		eol := h.off + h.searched + i
		h.searched = 0
		line := b[h.off:eol]
		h.off = eol + 1
		if len(line) == 0 || line[len(line)-1] != '\r' {
			return 0, BareLF
		}
		line = line[:len(line)-1]
		if bytes.IndexByte(line, '\r') >= 0 {
			return 0, BareCR
		}
		if h.off > MaxHead {
			return 0, HeadTooLarge
		}
		if !h.line {
			if len(line) == 0 {
				if h.empty++; h.empty > maxEmptyLines {
					return 0, BadRequestLine
				}
				h.skip = h.off
				continue
			}
			if len(line) > MaxRequestLine {
				return 0, RequestLineTooLong
			}
			if r := h.requestLine(line, connStart && h.empty == 0); r != None {
				return 0, r
			}
			h.line = true
			continue
		}
		if len(line) == 0 {
			return h.off, h.finish()
		}
		if len(line) > MaxFieldLine {
			return 0, FieldLineTooLong
		}
		if h.fields++; h.fields > MaxFields {
			return 0, TooManyFields
		}
		if r := h.field(line); r != None {
			return 0, r
		}
	}
}

// h2Line is the first line of HTTP/2's connection preface (RFC 9113 section 3.4).
const h2Line = "PRI * HTTP/2.0"

func (h *head) requestLine(line []byte, connStart bool) Reason {
	if connStart && string(line) == h2Line {
		h.preface = true
		return None
	}
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 <= 0 {
		return BadRequestLine
	}
	method, rest := line[:sp1], line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 <= 0 {
		return BadRequestLine
	}
	target, version := rest[:sp2], rest[sp2+1:]
	if bytes.IndexByte(version, ' ') >= 0 {
		return BadRequestLine
	}
	if !upperToken(method) {
		return BadMethod
	}
	switch {
	case len(version) == 8 && string(version[:7]) == "HTTP/1." && '0' <= version[7] && version[7] <= '9':
		h.http10 = version[7] == '0'
	case len(version) == 8 && string(version[:5]) == "HTTP/" && isDigit(version[5]) && version[6] == '.' && isDigit(version[7]):
		return BadVersion
	default:
		return BadRequestLine
	}
	if r := methodRule(method); r != None {
		return r
	}
	return targetRule(string(method) == "OPTIONS", target)
}

// methodRule is the door's rule for a method (RFC 9110 section 9, docs/REFERENCE.md, "At the
// door"): an uppercase token, and neither CONNECT nor TRACE.
func methodRule[T string | []byte](m T) Reason {
	switch string(m) {
	case "GET", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS":
		return None
	case "CONNECT", "TRACE":
		return MethodNotAllowed
	}
	if !upperToken(m) {
		return BadMethod
	}
	return None
}

func upperToken[T string | []byte](m T) bool {
	if len(m) == 0 {
		return false
	}
	for i := 0; i < len(m); i++ {
		if c := m[i]; !httpsyntax.IsTokenByte(c) || 'a' <= c && c <= 'z' {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// targetRule: an origin-form target ("/..."), an absolute http(s) URL, or "*" for OPTIONS,
// of visible ASCII only and as net/url parses a request target (its escapes valid).
func targetRule(options bool, t []byte) Reason {
	plain := true
	for _, c := range t {
		if c <= ' ' || c >= 0x7f || c == '#' {
			return BadTarget
		}
		if c == '%' {
			plain = false
		}
	}
	switch {
	case len(t) == 1 && t[0] == '*':
		if !options {
			return BadTarget
		}
		return None
	case t[0] == '/':
		if plain {
			return None
		}
		if _, err := url.ParseRequestURI(string(t)); err != nil {
			return BadTarget
		}
		return None
	}
	s := string(t)
	if !httpsyntax.HasFoldPrefix(s, "http://") && !httpsyntax.HasFoldPrefix(s, "https://") {
		return BadTarget
	}
	u, err := url.ParseRequestURI(s)
	if err != nil || u.Host == "" || !httpsyntax.ValidHost(u.Host) || u.User != nil {
		return BadTarget // userinfo: RFC 9110 section 4.2.4 has a recipient treat it as an error
	}
	return None
}

// field checks one field line (without its CRLF) and notes the facts of framing and Host.
func (h *head) field(line []byte) Reason {
	if line[0] == ' ' || line[0] == '\t' {
		return ObsFold
	}
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return BadFieldName
	}
	name := line[:colon]
	if c := name[len(name)-1]; c == ' ' || c == '\t' {
		return SpaceBeforeColon
	}
	if !httpsyntax.Token(name) {
		return BadFieldName
	}
	value := line[colon+1:]
	if !httpsyntax.ValidFieldValue(value) {
		return BadFieldValue // as net/http: no control byte but HTAB
	}
	switch len(name) {
	case 4:
		if foldEq(name, "host") {
			if h.hosts++; h.hosts == 1 {
				switch v := httpsyntax.TrimOWS(value); {
				case len(v) == 0:
					h.hostBad = EmptyHost
				case !httpsyntax.ValidHost(v):
					h.hostBad = BadHost
				}
			}
		}
	case 14:
		if foldEq(name, "content-length") {
			h.contentLength(httpsyntax.TrimOWS(value))
		}
	case 17:
		if foldEq(name, "transfer-encoding") {
			h.transferEncoding(string(httpsyntax.TrimOWS(value)))
		}
	}
	return None
}

// foldEq reports whether b is lower (ASCII lower case) in any case.
func foldEq(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if c|0x20 != lower[i] {
			return false
		}
	}
	return true
}

// maxLength is the largest Content-Length taken: 2^62, far past any body, and short of
// int64's overflow however it is added to.
const maxLength = 1 << 62

func (h *head) contentLength(v []byte) {
	h.cls++
	var n int64
	if len(v) == 0 {
		h.clBad = BadContentLength
		return
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !isDigit(c) || n > (maxLength-9)/10 {
			h.clBad = BadContentLength
			return
		}
		n = n*10 + int64(c-'0')
	}
	if h.cls > 1 && h.clBad == None {
		// RFC 9110 section 8.6 lets a recipient take several that agree; nginx refuses them,
		// and no client sends them: one framing field, said once.
		h.clBad = ContentLengths
	}
	h.cl = n
}

// transferEncoding notes a Transfer-Encoding line: a list of codings (RFC 9112 section 6.1),
// each a token with optional parameters.
func (h *head) transferEncoding(v string) {
	h.tes++
	for elem := range strings.SplitSeq(v, ",") {
		coding, _, hasParams := strings.Cut(httpsyntax.TrimOWS(elem), ";")
		if coding = httpsyntax.TrimOWS(coding); !httpsyntax.Token(coding) {
			h.teBad = true
			continue
		}
		if strings.EqualFold(coding, "chunked") && !hasParams {
			h.chunked++
			continue
		}
		h.other = true
	}
}

// finish judges a whole head: its framing, then its Host.
func (h *head) finish() Reason {
	if h.preface {
		if h.fields > 0 {
			return BadVersion
		}
		return None
	}
	if h.tes > 0 {
		switch {
		case h.http10:
			return TransferCoding10
		case h.cls > 0:
			return LengthAndChunked
		case h.teBad || h.chunked > 1:
			return BadTransferCoding
		case h.other:
			return UnknownCoding
		}
	}
	if h.clBad != None {
		return h.clBad
	}
	switch {
	case h.hosts > 1:
		return RepeatedHost
	case h.hosts == 0 && !h.http10:
		return NoHost
	case h.hostBad == BadHost, h.hostBad == EmptyHost && !h.http10:
		return h.hostBad
	}
	return None
}

// framing is how the body of a whole, accepted head is delimited.
func (h *head) framing() framing {
	switch {
	case h.preface:
		return preface
	case h.chunked == 1:
		return chunkedBody
	case h.cls > 0 && h.cl > 0:
		return withLength
	}
	return noBody
}

// Rule is the door's judgement of a request that no Reader read: an HTTP/2 request, whose
// framing is HTTP/2's own, meets the rules of a request the door can still judge from it (its
// method, its target, its number of header fields).
func Rule(r *http.Request) Reason {
	if reason := methodRule(r.Method); reason != None {
		return reason
	}
	if r.RequestURI == "*" && r.Method != http.MethodOptions {
		return BadTarget
	}
	n := 0
	for _, vv := range r.Header {
		n += len(vv)
	}
	if n > MaxFields {
		return TooManyFields
	}
	return None
}
