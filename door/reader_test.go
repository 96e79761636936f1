package door

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// chunkReader yields src n bytes a read (the client's packets, cut anywhere).
type chunkReader struct {
	src []byte
	n   int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.src) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.n, len(c.src))
	copy(p, c.src[:n])
	c.src = c.src[n:]
	return n, nil
}

// readAll reads d to its end with reads of size bufSize; it returns what d passed on and the
// error that ended it.
func readAll(d *Reader, bufSize int) ([]byte, error) {
	var out []byte
	buf := make([]byte, bufSize)
	for range 1 << 20 {
		n, err := d.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return out, err
		}
	}
	return out, errors.New("no end")
}

// cuts are the ways a stream is read: whole, in small pieces, a byte at a time, and through a
// one-byte buffer (net/http's background read).
var cuts = []struct {
	name     string
	src, buf int
}{
	{"whole", 1 << 20, 4096},
	{"pieces", 7, 4096},
	{"bytes", 1, 4096},
	{"one-byte reads", 1 << 20, 1},
	{"small buffer", 3, 100},
}

// check runs raw through a Reader every way of cuts, and wants out passed on, then want:
// io.EOF, or the stand-in head for a refused reason then io.EOF (refuse), or an *Error of
// reason (body).
func check(t *testing.T, raw, out string, refuse, body Reason) {
	t.Helper()
	for _, c := range cuts {
		d := NewReader(&chunkReader{src: []byte(raw), n: c.src})
		got, err := readAll(d, c.buf)
		want := out
		switch {
		case refuse != None:
			want += standIn(refuse)
			if !errors.Is(err, io.EOF) {
				t.Errorf("%s: %q: ended with %v, want EOF after the stand-in", c.name, raw, err)
			}
			if !d.Refused() || d.Reason() != refuse {
				t.Errorf("%s: %q: Refused %v, Reason %v; want %v", c.name, raw, d.Refused(), d.Reason(), refuse)
			}
		case body != None:
			var de *Error
			if !errors.As(err, &de) || de.Reason != body {
				t.Errorf("%s: %q: ended with %v, want the body's %v", c.name, raw, err, body)
			}
			if !d.Refused() {
				t.Errorf("%s: %q: a bad body does not count as refused", c.name, raw)
			}
		default:
			if err != io.EOF {
				t.Errorf("%s: %q: ended with %v, want EOF", c.name, raw, err)
			}
			if d.Refused() {
				t.Errorf("%s: %q: refused (%v)", c.name, raw, d.Reason())
			}
		}
		if string(got) != want {
			t.Errorf("%s: %q:\npassed on %q\nwant      %q", c.name, raw, got, want)
		}
	}
}

const get = "GET /t/acme/x HTTP/1.1\r\nHost: e\r\n\r\n"

// A row a rule of docs/REFERENCE.md, "At the door", as the door reads it.
var headRows = []struct {
	name string
	head string
	want Reason
}{
	// accepted
	{"get", get, None},
	{"http/1.0 without host", "GET / HTTP/1.0\r\n\r\n", None},
	{"http/1.0 with an empty host", "GET / HTTP/1.0\r\nHost:\r\n\r\n", None},
	{"options star", "OPTIONS * HTTP/1.1\r\nHost: e\r\n\r\n", None},
	{"absolute form", "GET http://e/t/acme HTTP/1.1\r\nHost: e\r\n\r\n", None},
	{"escapes", "GET /t/acme%2Fx?a=%zz HTTP/1.1\r\nHost: e\r\n\r\n", None},
	{"chunked in capitals", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\n", None},
	{"value with tabs and obs-text", "GET / HTTP/1.1\r\nHost: e\r\nX-A:\t\xe9t\xe9 \t\r\n\r\n", None},
	{"underscore name (the proxy drops it)", "GET / HTTP/1.1\r\nHost: e\r\nFenec_Client: x\r\n\r\n", None},
	{"extension method", "M-SEARCH / HTTP/1.1\r\nHost: e\r\n\r\n", None},
	{"100 fields", "GET / HTTP/1.1\r\nHost: e\r\n" + strings.Repeat("X-A: b\r\n", 99) + "\r\n", None},
	{"request line of 8 KiB", "GET /" + strings.Repeat("a", MaxRequestLine-len("GET / HTTP/1.1")) + " HTTP/1.1\r\nHost: e\r\n\r\n", None},
	{"field line of 16 KiB", "GET / HTTP/1.1\r\nHost: e\r\nX-A: " + strings.Repeat("a", MaxFieldLine-len("X-A: ")) + "\r\n\r\n", None},
	{"http/1.9", "GET / HTTP/1.9\r\nHost: e\r\n\r\n", None},
	{"host with a port", "GET / HTTP/1.1\r\nHost: e.example:8080\r\n\r\n", None},
	{"host an IPv6 literal with a port", "GET / HTTP/1.1\r\nHost: [2001:db8::1]:80\r\n\r\n", None},
	{"host an IPv4 address, empty port", "GET / HTTP/1.1\r\nHost: 192.0.2.1:\r\n\r\n", None},
	{"host with an escape", "GET / HTTP/1.1\r\nHost: a%41b\r\n\r\n", None},

	// 400: the request line
	{"no version (HTTP/0.9)", "GET /\r\n\r\n", BadRequestLine},
	{"two spaces", "GET  / HTTP/1.1\r\nHost: e\r\n\r\n", BadRequestLine},
	{"tab for space", "GET\t/ HTTP/1.1\r\nHost: e\r\n\r\n", BadRequestLine},
	{"space after the version", "GET / HTTP/1.1 \r\nHost: e\r\n\r\n", BadRequestLine},
	{"leading space", " GET / HTTP/1.1\r\nHost: e\r\n\r\n", BadRequestLine},
	{"lowercase method", "get / HTTP/1.1\r\nHost: e\r\n\r\n", BadMethod},
	{"mixed-case method", "Get / HTTP/1.1\r\nHost: e\r\n\r\n", BadMethod},
	{"method with a non-token byte", "G@T / HTTP/1.1\r\nHost: e\r\n\r\n", BadMethod},
	{"lowercase version", "GET / http/1.1\r\nHost: e\r\n\r\n", BadRequestLine},
	{"version 2.0", "GET / HTTP/2.0\r\nHost: e\r\n\r\n", BadVersion},
	{"version 0.9", "GET / HTTP/0.9\r\nHost: e\r\n\r\n", BadVersion},
	{"version 1.10", "GET / HTTP/1.10\r\nHost: e\r\n\r\n", BadRequestLine},
	{"star for GET", "GET * HTTP/1.1\r\nHost: e\r\n\r\n", BadTarget},
	{"authority form for GET", "GET e:443 HTTP/1.1\r\nHost: e\r\n\r\n", BadTarget},
	{"other scheme", "GET ftp://e/ HTTP/1.1\r\nHost: e\r\n\r\n", BadTarget},
	{"absolute form with userinfo", "GET http://u@e/ HTTP/1.1\r\nHost: e\r\n\r\n", BadTarget},
	{"absolute form without host", "GET http:///x HTTP/1.1\r\nHost: e\r\n\r\n", BadTarget},
	{"fragment", "GET /a#b HTTP/1.1\r\nHost: e\r\n\r\n", BadTarget},
	{"bad escape in the path", "GET /t/%zz HTTP/1.1\r\nHost: e\r\n\r\n", BadTarget},
	{"non-ascii target", "GET /\xe9 HTTP/1.1\r\nHost: e\r\n\r\n", BadTarget},
	{"control byte in the target", "GET /\x01 HTTP/1.1\r\nHost: e\r\n\r\n", BadTarget},
	{"too many empty lines first", strings.Repeat("\r\n", maxEmptyLines+1) + get, BadRequestLine},

	// 400: the lines of the head
	{"bare LF after the request line", "GET / HTTP/1.1\nHost: e\r\n\r\n", BareLF},
	{"bare LF after a field", "GET / HTTP/1.1\r\nHost: e\n\r\n", BareLF},
	{"bare LF ends the head", "GET / HTTP/1.1\r\nHost: e\r\n\n", BareLF},
	{"bare CR in a value", "GET / HTTP/1.1\r\nHost: e\r\nX-A: a\rb\r\n\r\n", BareCR},
	{"bare CR in the request line", "GET /\r HTTP/1.1\r\nHost: e\r\n\r\n", BareCR},
	{"obs-fold", "GET / HTTP/1.1\r\nHost: e\r\nX-A: a\r\n b\r\n\r\n", ObsFold},
	{"obs-fold with a tab", "GET / HTTP/1.1\r\nHost: e\r\nX-A: a\r\n\tb\r\n\r\n", ObsFold},
	{"folded transfer-encoding", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n", ObsFold},
	{"whitespace before the first field", "GET / HTTP/1.1\r\n Host: e\r\n\r\n", ObsFold},
	{"space before colon", "GET / HTTP/1.1\r\nHost : e\r\n\r\n", SpaceBeforeColon},
	{"tab before colon", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding\t: chunked\r\n\r\n", SpaceBeforeColon},
	{"no colon", "GET / HTTP/1.1\r\nHost: e\r\nX-A\r\n\r\n", BadFieldName},
	{"empty name", "GET / HTTP/1.1\r\nHost: e\r\n: a\r\n\r\n", BadFieldName},
	{"non-token name", "GET / HTTP/1.1\r\nHost: e\r\nX(A): a\r\n\r\n", BadFieldName},
	{"space inside a name", "GET / HTTP/1.1\r\nHost: e\r\nX A: a\r\n\r\n", BadFieldName},
	{"NUL in a value", "GET / HTTP/1.1\r\nHost: e\r\nX-A: a\x00b\r\n\r\n", BadFieldValue},
	{"DEL in a value", "GET / HTTP/1.1\r\nHost: e\r\nX-A: a\x7fb\r\n\r\n", BadFieldValue},
	{"vertical tab in transfer-encoding", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: \x0bchunked\r\n\r\n", BadFieldValue},
	{"no host", "GET / HTTP/1.1\r\n\r\n", NoHost},
	{"empty host", "GET / HTTP/1.1\r\nHost:\r\n\r\n", EmptyHost},
	{"blank host", "GET / HTTP/1.1\r\nHost:  \r\n\r\n", EmptyHost},
	{"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", RepeatedHost},
	{"two hosts on 1.0", "GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n", RepeatedHost},
	{"bad host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", BadHost},
	{"host with a slash", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", BadHost},
	{"host with a port that is not digits", "GET / HTTP/1.1\r\nHost: a:abc\r\n\r\n", BadHost},
	{"host with two colons", "GET / HTTP/1.1\r\nHost: a:1:2\r\n\r\n", BadHost},
	{"host with userinfo", "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", BadHost},
	{"unclosed IPv6 literal", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", BadHost},
	{"IPv4 in brackets", "GET / HTTP/1.1\r\nHost: [127.0.0.1]\r\n\r\n", BadHost},
	{"a port alone", "GET / HTTP/1.1\r\nHost: :80\r\n\r\n", BadHost},
	{"a bad escape in the host", "GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n", BadHost},

	// 400: the framing of the body
	{"content-length with a plus", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: +5\r\n\r\n", BadContentLength},
	{"negative content-length", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: -1\r\n\r\n", BadContentLength},
	{"content-length list", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 5, 5\r\n\r\n", BadContentLength},
	{"hex content-length", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 0x5\r\n\r\n", BadContentLength},
	{"content-length with a space inside", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 1 0\r\n\r\n", BadContentLength},
	{"empty content-length", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length:\r\n\r\n", BadContentLength},
	{"overflowing content-length", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 99999999999999999999\r\n\r\n", BadContentLength},
	{"content-lengths that differ", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", ContentLengths},
	{"content-lengths that agree", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n", ContentLengths},
	{"content-length and chunked", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", LengthAndChunked},
	{"chunked and content-length", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", LengthAndChunked},
	{"chunked twice in a list", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", BadTransferCoding},
	{"chunked on two lines", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", BadTransferCoding},
	{"empty transfer-encoding", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding:\r\n\r\n", BadTransferCoding},
	{"quoted chunked", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: \"chunked\"\r\n\r\n", BadTransferCoding},
	{"empty list element", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked,\r\n\r\n", BadTransferCoding},
	{"transfer-encoding on 1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", TransferCoding10},
	{"gzip, chunked", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", UnknownCoding},
	{"identity", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: identity\r\n\r\n", UnknownCoding},
	{"xchunked", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: xchunked\r\n\r\n", UnknownCoding},
	{"chunked with a parameter", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked;q=1\r\n\r\n", UnknownCoding},

	// 405
	{"CONNECT", "CONNECT e:443 HTTP/1.1\r\nHost: e:443\r\n\r\n", MethodNotAllowed},
	{"TRACE", "TRACE / HTTP/1.1\r\nHost: e\r\n\r\n", MethodNotAllowed},

	// 414, 431
	{"request line over 8 KiB", "GET /" + strings.Repeat("a", MaxRequestLine) + " HTTP/1.1\r\nHost: e\r\n\r\n", RequestLineTooLong},
	{"request line of 100 KB, no end", "GET /" + strings.Repeat("a", 100000), RequestLineTooLong},
	{"field line over 16 KiB", "GET / HTTP/1.1\r\nHost: e\r\nX-A: " + strings.Repeat("a", MaxFieldLine) + "\r\n\r\n", FieldLineTooLong},
	{"field value of 100 KB, no end", "GET / HTTP/1.1\r\nHost: e\r\nX-A: " + strings.Repeat("a", 100000), FieldLineTooLong},
	{"head over 64 KiB", "GET / HTTP/1.1\r\nHost: e\r\n" + strings.Repeat("X-A: "+strings.Repeat("a", 1000)+"\r\n", 70) + "\r\n", HeadTooLarge},
	{"101 fields", "GET / HTTP/1.1\r\nHost: e\r\n" + strings.Repeat("X-A: b\r\n", 100) + "\r\n", TooManyFields},
	{"10,000 fields", "GET / HTTP/1.1\r\nHost: e\r\n" + strings.Repeat("X: b\r\n", 10000) + "\r\n", TooManyFields},
}

func TestHeads(t *testing.T) {
	for _, row := range headRows {
		t.Run(row.name, func(t *testing.T) {
			if row.want == None {
				check(t, row.head, row.head, None, None)
				// A refused request after it: the good one goes through first, whole.
				check(t, row.head+"get / HTTP/1.1\r\n\r\n", row.head, BadMethod, None)
				return
			}
			check(t, row.head, "", row.want, None)
			// After a good request on the same connection: that one whole, then the stand-in.
			check(t, get+row.head, get, row.want, None)
			if row.want.Status() == http.StatusOK {
				t.Fatalf("reason %v has no refusal status", row.want)
			}
		})
	}
}

// Empty lines before a request line are dropped (RFC 9112 section 2.2: net/http would refuse
// them); the request then goes through as sent.
func TestEmptyLinesDropped(t *testing.T) {
	check(t, "\r\n\r\n"+get, get, None, None)
	check(t, get+"\r\n"+get, get+get, None, None)
	check(t, "\n"+get, "", BareLF, None)
}

var bodyRows = []struct {
	name string
	body string // after a chunked POST's head
	good string // what goes through before the error
	want Reason
}{
	{"one chunk", "5\r\nhello\r\n0\r\n\r\n", "", None},
	{"chunks in hex", "a\r\n0123456789\r\nA\r\n0123456789\r\n0\r\n\r\n", "", None},
	{"leading zeros", "0005\r\nhello\r\n000\r\n\r\n", "", None},
	{"extensions", "5;a=b;c\r\nhello\r\n0;d=\"e \\\" f\"\r\n\r\n", "", None},
	{"extension with BWS", "5; a = b\r\nhello\r\n0\r\n\r\n", "", None},
	{"space between a size and its extension", "5 ;a\r\nhello\r\n0\r\n\r\n", "5", BadChunk},
	{"a trailer naming the framing", "0\r\nContent-Length: 5\r\n\r\n", "0\r\nContent-Length", BadChunk},
	{"a trailer past 4 KiB", "0\r\nX-T: " + strings.Repeat("v", 4100) + "\r\n\r\n", "0\r\nX-T: " + strings.Repeat("v", 4090), BadChunk},
	{"too much that is not data", strings.Repeat("1;"+strings.Repeat("e", 900)+"\r\nx\r\n", 20), strings.Repeat("1;"+strings.Repeat("e", 900)+"\r\nx\r\n", 18) + "1;" + strings.Repeat("e", 900) + "\r", BadChunk},
	{"quoted extension then BWS and another", "5;a=\"b\" ;c\r\nhello\r\n0\r\n\r\n", "", None},
	{"a trailer of 4 KiB", "0\r\nX-T: " + strings.Repeat("v", 4000) + "\r\n\r\n", "", None},
	{"name then BWS then CR", "5;a \r\nhello\r\n0\r\n\r\n", "5;a ", BadChunk},
	{"trailer", "5\r\nhello\r\n0\r\nX-T: v\r\nX-U:\r\n\r\n", "", None},
	{"empty body", "0\r\n\r\n", "", None},

	{"size with an underscore", "5_0\r\n" + strings.Repeat("a", 50) + "\r\n0\r\n\r\n", "5", BadChunk},
	{"size in 0x", "0x5\r\nhello\r\n0\r\n\r\n", "0", BadChunk},
	{"size with a plus", "+5\r\nhello\r\n0\r\n\r\n", "", BadChunk},
	{"size after a space", " 5\r\nhello\r\n0\r\n\r\n", "", BadChunk},
	{"size then a space", "5 \r\nhello\r\n0\r\n\r\n", "5", BadChunk},
	{"no size", "\r\nhello\r\n0\r\n\r\n", "", BadChunk},
	{"overflowing size", "ffffffffffffffffff\r\n", "fffffffffffffff", BadChunk},
	{"size past 2^62", "4000000000000001\r\n", "400000000000000", BadChunk},
	{"size with a bare LF", "5\nhello\r\n0\r\n\r\n", "5", BadChunk},
	{"size with a bare CR", "5\rhello\r\n0\r\n\r\n", "5\r", BadChunk},
	{"empty extension", "5;\r\nhello\r\n0\r\n\r\n", "5;", BadChunk},
	{"unterminated quoted extension", "5;a=\"b\r\nhello\r\n0\r\n\r\n", "5;a=\"b", BadChunk},
	{"extension value then a space", "5;a=b \r\nhello\r\n0\r\n\r\n", "5;a=b ", BadChunk},
	{"data longer than its size", "5\r\nhello!\r\n0\r\n\r\n", "5\r\nhello", BadChunk},
	{"no CRLF after the data", "5\r\nhello0\r\n\r\n", "5\r\nhello", BadChunk},
	{"LF alone after the data", "5\r\nhello\n0\r\n\r\n", "5\r\nhello", BadChunk},
	{"CR alone after the data", "5\r\nhello\r0\r\n\r\n", "5\r\nhello\r", BadChunk},
	{"folded trailer", "0\r\nX-T: v\r\n w\r\n\r\n", "0\r\nX-T: v\r\n", BadChunk},
	{"trailer without a colon", "0\r\nX-T\r\n\r\n", "0\r\nX-T", BadChunk},
	{"trailer with a NUL", "0\r\nX-T: a\x00\r\n\r\n", "0\r\nX-T: a", BadChunk},
	{"bare LF ends the body", "0\r\n\n", "0\r\n", BadChunk},
	{"a line too long", strings.Repeat("0", maxChunkLine+1), strings.Repeat("0", 16), BadChunk},
	{"no last chunk", "5\r\nhello\r\n", "5\r\nhello\r\n", BodyCut},
	{"stops mid-data", "5\r\nhel", "5\r\nhel", BodyCut},
	{"stops before the final CRLF", "0\r\n", "0\r\n", BodyCut},
}

func TestChunkedBodies(t *testing.T) {
	const post = "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\n"
	for _, row := range bodyRows {
		t.Run(row.name, func(t *testing.T) {
			if row.want == None {
				check(t, post+row.body+get, post+row.body+get, None, None)
				return
			}
			if row.want == BodyCut { // the stream ends there
				check(t, post+row.body, post+row.good, None, row.want)
				return
			}
			check(t, post+row.body+get, post+row.good, None, row.want)
		})
	}
}

func TestContentLengthBody(t *testing.T) {
	post := "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 5\r\n\r\n"
	// The body's bytes are not a head, however they look.
	check(t, post+"GET /"+get, post+"GET /"+get, None, None)
	// A short body: the stream ends, the server sees it short.
	check(t, post+"hel", post+"hel", None, None)
}

// The HTTP/2 preface as the first bytes turns the door off; anywhere else it is refused.
func TestPreface(t *testing.T) {
	const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	frames := "\x00\x00\x00\x04\x00\x00\x00\x00\x00 not HTTP/1 \r\n"
	check(t, preface+frames, preface+frames, None, None)
	check(t, "PRI * HTTP/2.0\r\nX: y\r\n\r\n", "", BadVersion, None)
	check(t, get+preface, get, BadVersion, None)
}

// A server reading through the door (here net/http's own parser over it) reads the stand-in
// as a request that Refusal names, after the requests before it.
func TestStandInParses(t *testing.T) {
	raw := get + "GET / HTTP/1.1\r\nHost: e\r\nHost: f\r\n\r\n"
	br := bufio.NewReader(NewReader(strings.NewReader(raw)))
	first, err := http.ReadRequest(br)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := Refusal(first); ok {
		t.Fatal("the good request reads as a refusal")
	}
	second, err := http.ReadRequest(br)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := Refusal(second); !ok || r != RepeatedHost {
		t.Fatalf("Refusal = %v, %v; want %v", r, ok, RepeatedHost)
	}
	if !second.Close {
		t.Error("the stand-in does not close the connection")
	}
	if _, err := http.ReadRequest(br); err != io.EOF {
		t.Fatalf("after the stand-in: %v, want EOF", err)
	}
	// A client's own stand-in, without the marker, is a plain request.
	forged, _ := http.ReadRequest(bufio.NewReader(strings.NewReader(
		"GET " + RefusedPath + " HTTP/1.1\r\nHost: e\r\nFenec-Door: 00.5\r\n\r\n")))
	if _, ok := Refusal(forged); ok {
		t.Error("a client's stand-in without the marker reads as a refusal")
	}
}

func TestBodyReason(t *testing.T) {
	if r := BodyReason(&Error{BadChunk}); r != BadChunk {
		t.Errorf("BodyReason(bad chunk) = %v", r)
	}
	if r := BodyReason(io.ErrUnexpectedEOF); r != BodyCut {
		t.Errorf("BodyReason(unexpected EOF) = %v", r)
	}
}

// What the door holds between requests: nothing once the request is passed on.
func TestBuffered(t *testing.T) {
	d := NewReader(&chunkReader{src: []byte(get + "GET / HT"), n: 1 << 20})
	buf := make([]byte, 4096)
	n, err := d.Read(buf)
	if err != nil || string(buf[:n]) != get {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	if d.Buffered() != len("GET / HT") {
		t.Fatalf("Buffered = %d, want the next head's %d bytes", d.Buffered(), len("GET / HT"))
	}
	if got := d.Drain(); !bytes.Equal(got, []byte("GET / HT")) || d.Buffered() != 0 {
		t.Fatalf("Drain = %q, then Buffered %d", got, d.Buffered())
	}
}

// Every reason has a status, a code of section 8 and a message.
func TestReasons(t *testing.T) {
	codes := map[string]bool{CodeBadRequest: true, CodeNotImplemented: true, CodeMethodNotAllowed: true,
		CodeURITooLong: true, CodeHeadersTooLarge: true}
	labels := map[string]bool{}
	for _, r := range Reasons() {
		if r.Status() < 400 || !codes[r.Code()] || r.Message() == "" || labels[r.Label()] {
			t.Errorf("reason %d: status %d, code %q, message %q, label %q", r, r.Status(), r.Code(), r.Message(), r.Label())
		}
		labels[r.Label()] = true
	}
}

// Rule judges what can be judged of a request no Reader read (HTTP/2's).
func TestRule(t *testing.T) {
	many := http.Header{}
	for i := range MaxFields + 1 {
		many.Add("X-A", strings.Repeat("b", i%3+1))
	}
	for _, tc := range []struct {
		method, uri string
		header      http.Header
		want        Reason
	}{
		{"GET", "/t/acme/x", http.Header{"X-A": {"b"}}, None},
		{"OPTIONS", "*", nil, None},
		{"PURGE", "/t/acme/x", nil, None},
		{"TRACE", "/t/acme/x", nil, MethodNotAllowed},
		{"CONNECT", "e:443", nil, MethodNotAllowed},
		{"get", "/t/acme/x", nil, BadMethod},
		{"GET", "*", nil, BadTarget},
		{"GET", "/t/acme/x", many, TooManyFields},
	} {
		r := &http.Request{Method: tc.method, RequestURI: tc.uri, Header: tc.header}
		if got := Rule(r); got != tc.want {
			t.Errorf("%s %s (%d fields): %v, want %v", tc.method, tc.uri, len(tc.header["X-A"]), got, tc.want)
		}
	}
}
