package h1

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// plainCases are heads readPlain takes (plain true) or leaves to http.ReadRequest, by name;
// the request smuggling cases are among those it leaves.
var plainCases = []struct {
	name, raw string
	plain     bool
}{
	{"get", "GET /t/acme/items/1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n", true},
	{"a browser's get", "GET /t/acme/x?a=1&b=%20 HTTP/1.1\r\nHost: e.example\r\nConnection: keep-alive\r\n" +
		"sec-ch-ua: \"Chromium\";v=\"130\"\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n" +
		"Accept: text/html,*/*;q=0.8\r\nAccept-Encoding: gzip, deflate, br\r\nAccept-Language: en-GB,en;q=0.9\r\n" +
		"Cookie: a=b; c=d\r\nOrigin: https://app.example\r\n\r\n", true},
	{"host an IPv6 literal with a port", "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", true},
	{"repeated header", "GET / HTTP/1.1\r\nHost: e\r\nAccept: a\r\nAccept: b\r\n\r\n", true},
	{"empty value", "GET / HTTP/1.1\r\nHost: e\r\nX-A:\r\n\r\n", true},
	{"value with spaces around and inside", "GET / HTTP/1.1\r\nHost: e\r\nX-A: \t a b \t\r\n\r\n", true},
	{"obs-text in a value", "GET / HTTP/1.1\r\nHost: e\r\nX-A: caf\xc3\xa9\r\n\r\n", true},
	{"lower-case names", "GET / HTTP/1.1\r\nhost: e\r\nx-forwarded-for: 1.2.3.4\r\n\r\n", true},
	{"delete", "DELETE /t/a/1 HTTP/1.1\r\nHost: e\r\n\r\n", true},
	{"options preflight", "OPTIONS /t/a/1 HTTP/1.1\r\nHost: e\r\nOrigin: https://a\r\nAccess-Control-Request-Method: PUT\r\n\r\n", true},
	{"target with an empty query", "GET /a? HTTP/1.1\r\nHost: e\r\n\r\n", true},
	{"target with a query of a question mark", "GET /a?? HTTP/1.1\r\nHost: e\r\n\r\n", true},
	{"target with a question mark ending its query", "GET /a?b? HTTP/1.1\r\nHost: e\r\n\r\n", true},
	{"target with a bad escape in its query", "GET /a?q=%zz&r HTTP/1.1\r\nHost: e\r\n\r\n", true},
	{"target starting with two slashes", "GET //x/y HTTP/1.1\r\nHost: e\r\n\r\n", true},
	{"target with the path's kept punctuation", "GET /~u/a-b_c.d;e=f@g:h$i&j+k,l HTTP/1.1\r\nHost: e\r\n\r\n", true},
	{"target with bytes a path escapes", "GET /a*b!c'(d)\"e<f>g HTTP/1.1\r\nHost: e\r\n\r\n", true},
	{"target with a star", "GET /a*b HTTP/1.1\r\nHost: e\r\n\r\n", true},
	{"target with a fragment", "GET /a#frag?x HTTP/1.1\r\nHost: e\r\n\r\n", true},
	{"target with an escape", "GET /a%2Fb%41 HTTP/1.1\r\nHost: e\r\n\r\n", true},
	{"target of a slash", "GET / HTTP/1.1\r\nHost: e\r\n\r\n", true},
	{"pipelined: only the first head", "GET /a HTTP/1.1\r\nHost: e\r\n\r\nGET /b HTTP/1.1\r\nHost: e\r\n\r\n", true},

	{"content-length", "POST /t/a HTTP/1.1\r\nHost: e\r\nContent-Length: 5\r\n\r\nhello", false},
	{"content-length 0", "POST /t/a HTTP/1.1\r\nHost: e\r\nContent-Length: 0\r\n\r\n", false},
	{"duplicate content-length", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", false},
	{"conflicting content-length", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", false},
	{"transfer-encoding with content-length", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", false},
	{"transfer-encoding other than chunked", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: gzip\r\n\r\nxx", false},
	{"chunk-size overflow", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff1\r\nx\r\n0\r\n\r\n", false},
	{"obs-fold", "GET / HTTP/1.1\r\nHost: e\r\nX-A: one\r\n two\r\n\r\n", false},
	{"obs-fold of host", "GET / HTTP/1.1\r\nHost: e\r\n f\r\n\r\n", false},
	{"bare LF", "GET / HTTP/1.1\nHost: e\n\n", false},
	{"bare LF in a header", "GET / HTTP/1.1\r\nHost: e\nX-A: 1\r\n\r\n", false},
	{"bare CR", "GET / HTTP/1.1\r\nHost: e\rX-A: 1\r\n\r\n", false},
	{"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nhOST: b\r\n\r\n", false},
	{"no host", "GET / HTTP/1.1\r\nX-A: 1\r\n\r\n", false},
	{"malformed host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", false},
	{"host of bytes net/http takes, not a host and port", "GET / HTTP/1.1\r\nHost: a:b\r\n\r\n", false},
	{"host an unclosed IPv6 literal", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", false},
	{"space before colon", "GET / HTTP/1.1\r\nHost: e\r\nX-A : 1\r\n\r\n", false},
	{"NUL in a value", "GET / HTTP/1.1\r\nHost: e\r\nX-A: a\x00b\r\n\r\n", false},
	{"DEL in a value", "GET / HTTP/1.1\r\nHost: e\r\nX-A: a\x7fb\r\n\r\n", false},
	{"expect", "GET / HTTP/1.1\r\nHost: e\r\nExpect: 100-continue\r\n\r\n", false},
	{"connection close", "GET / HTTP/1.1\r\nHost: e\r\nConnection: close\r\n\r\n", false},
	{"connection upgrade", "GET / HTTP/1.1\r\nHost: e\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", false},
	{"pragma", "GET / HTTP/1.1\r\nHost: e\r\nPragma: no-cache\r\n\r\n", false},
	{"trailer", "GET / HTTP/1.1\r\nHost: e\r\nTrailer: X-A\r\n\r\n", false},
	{"HTTP/1.0", "GET / HTTP/1.0\r\nHost: e\r\n\r\n", false},
	{"absolute form", "GET http://a/x HTTP/1.1\r\nHost: b\r\n\r\n", false},
	{"CONNECT", "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"lower-case method", "get / HTTP/1.1\r\nHost: e\r\n\r\n", false},
	{"two spaces", "GET  / HTTP/1.1\r\nHost: e\r\n\r\n", false},
	{"bad escape in the target", "GET /%zz HTTP/1.1\r\nHost: e\r\n\r\n", false},
	{"empty lines first", "\r\n\r\nGET / HTTP/1.1\r\nHost: e\r\n\r\n", false},
	{"head not whole yet", "GET / HTTP/1.1\r\nHost: e\r\n", false},
}

// readBoth runs readPlain and, when it takes the head, http.ReadRequest and net/http's
// server's checks on the same bytes, and fails unless both read the same request.
func readBoth(t *testing.T, raw []byte) (plain bool) {
	t.Helper()
	plain = readBothInto(t, raw, nil)
	// Into a session's memory that holds an earlier request (its header map, values and URL):
	// the same answer, nothing of the earlier request left.
	var st plainStore
	ebr := bufio.NewReaderSize(strings.NewReader(earlierRequest), 4096)
	ebr.Peek(1)
	if _, ok := readPlainInto(ebr, &reqCtx{}, &st); !ok {
		t.Fatalf("the earlier request %q was not plain", earlierRequest)
	}
	if again := readBothInto(t, raw, &st); again != plain {
		t.Errorf("%q: plain %v, but %v into a session's memory", raw, plain, again)
	}
	return plain
}

// earlierRequest has headers and a query the cases mostly do not.
const earlierRequest = "GET /earlier/one?left=behind HTTP/1.1\r\nHost: earlier\r\nX-Left: 1\r\nX-Left: 2\r\nAccept: a/b\r\nCookie: c=d\r\nX-A: b\r\n\r\n"

func readBothInto(t *testing.T, raw []byte, st *plainStore) (plain bool) {
	t.Helper()
	br := bufio.NewReaderSize(bytes.NewReader(raw), 4096)
	br.Peek(1) // one read, as a woken connection's
	ctx := &reqCtx{}
	got, plain := readPlainInto(br, ctx, st)
	if !plain {
		if br.Buffered() != min(len(raw), 4096) {
			t.Fatalf("%q: declined, but consumed %d bytes", raw, min(len(raw), 4096)-br.Buffered())
		}
		return false
	}
	sbr := bufio.NewReaderSize(bytes.NewReader(raw), 4096)
	want, err := http.ReadRequest(sbr)
	if err != nil {
		t.Fatalf("%q: readPlain took it, http.ReadRequest refused it: %v", raw, err)
	}
	if status, msg := checkRequest(want); status != "" {
		t.Fatalf("%q: readPlain took it, net/http's server answers %s %s", raw, status, msg)
	}
	if got.Context() != context.Context(ctx) {
		t.Errorf("%q: the request's context is not the one given", raw)
	}
	if got.Body != http.NoBody || want.Body != http.NoBody {
		t.Errorf("%q: bodies %T and %T, want http.NoBody", raw, got.Body, want.Body)
	}
	type fields struct {
		Method, Proto, Host, RequestURI string
		Major, Minor                    int
		URL                             any
		Header                          http.Header
		ContentLength                   int64
		Close                           bool
		TE                              []string
		Trailer                         http.Header
		Rest                            int
	}
	of := func(r *http.Request, br *bufio.Reader) fields {
		rest, _ := io.ReadAll(br)
		return fields{r.Method, r.Proto, r.Host, r.RequestURI, r.ProtoMajor, r.ProtoMinor, *r.URL, r.Header,
			r.ContentLength, r.Close, r.TransferEncoding, r.Trailer, len(rest)}
	}
	if g, w := of(got, br), of(want, sbr); !reflect.DeepEqual(g, w) {
		t.Errorf("%q:\nreadPlain:        %+v\nhttp.ReadRequest: %+v", raw, g, w)
	}
	return true
}

func TestReadPlain(t *testing.T) {
	for _, tc := range plainCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := readBoth(t, []byte(tc.raw)); got != tc.plain {
				t.Errorf("plain %v, want %v", got, tc.plain)
			}
		})
	}
}

// FuzzPlainRequest: whatever readPlain takes, http.ReadRequest takes with the same result and
// net/http's server would serve; whatever it declines is left unread.
func FuzzPlainRequest(f *testing.F) {
	for _, tc := range plainCases {
		f.Add([]byte(tc.raw))
	}
	for _, tc := range diffCases {
		f.Add([]byte(tc.raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		readBoth(t, raw)
	})
}

// The fast path's allocations (docs/BENCHMARKS.md): a browser's head, against
// http.ReadRequest's.
func BenchmarkReadPlain(b *testing.B) {
	raw := plainCases[1].raw
	r := strings.NewReader(raw)
	br := bufio.NewReaderSize(r, 4096)
	ctx := &reqCtx{}
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			r.Reset(raw)
			br.Reset(r)
			br.Peek(1)
			if _, ok := readPlain(br, ctx); !ok {
				b.Fatal("not plain")
			}
		}
	})
	b.Run("http.ReadRequest", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			r.Reset(raw)
			br.Reset(r)
			req, err := http.ReadRequest(br)
			if err != nil {
				b.Fatal(err)
			}
			req.WithContext(ctx)
		}
	})
}

// readPlainInto into a session's memory makes two allocations for a plain request: the head's
// string and the Request (WithContext's); the header map (two), the values and the URL are the
// session's. Without it, six.
func TestReadPlainIntoAllocations(t *testing.T) {
	raw := "GET /t/acme/items/1?x=1 HTTP/1.1\r\nHost: e.example\r\nUser-Agent: bench\r\nAccept: */*\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n"
	sr := strings.NewReader(raw)
	br := bufio.NewReaderSize(sr, 4096)
	ctx := &reqCtx{}
	var st plainStore
	measure := func(st *plainStore) float64 {
		return testing.AllocsPerRun(200, func() {
			sr.Reset(raw)
			br.Reset(sr)
			br.Peek(1)
			if _, ok := readPlainInto(br, ctx, st); !ok {
				t.Fatal("not plain")
			}
		})
	}
	into, fresh := measure(&st), measure(nil)
	t.Logf("allocations per plain request: %.0f into a session's memory, %.0f without", into, fresh)
	if into > 2 {
		t.Errorf("readPlainInto made %.0f allocations into a session's memory, want 2 (the head's string, the Request)", into)
	}
}

// A head with more header lines than maxKeptFields is read into new memory: the session's map
// and array stay at their size (a megabyte of head must not be kept by a pooled session).
func TestReadPlainIntoKeepsNoBigHead(t *testing.T) {
	var st plainStore
	small := "GET /a HTTP/1.1\r\nHost: e\r\nX-A: 1\r\n\r\n"
	var big strings.Builder
	big.WriteString("GET /b HTTP/1.1\r\nHost: e\r\n")
	for i := range maxKeptFields + 100 {
		fmt.Fprintf(&big, "X-F%d: %d\r\n", i, i)
	}
	big.WriteString("\r\n")
	for _, raw := range []string{small, big.String(), small} {
		br := bufio.NewReaderSize(strings.NewReader(raw), 64<<10)
		br.Peek(1)
		req, ok := readPlainInto(br, &reqCtx{}, &st)
		if !ok {
			t.Fatalf("%.40q... not plain", raw)
		}
		if n := len(req.Header); n != strings.Count(raw, "\r\n")-3 {
			t.Errorf("%.40q...: %d header fields", raw, n)
		}
		if len(st.header) > maxKeptFields || cap(st.vals) > maxKeptFields {
			t.Fatalf("after %.40q...: the session keeps a map of %d fields and an array of %d", raw, len(st.header), cap(st.vals))
		}
	}
}
