package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// answerCases are router answers by name: what readAnswer's fast path takes, and every kind
// it must leave to http.ReadResponse.
var answerCases = []struct{ name, raw string }{
	{"length", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nFenec-Home: eu\r\nContent-Length: 5\r\n\r\nhello"},
	{"length, next answer behind", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
	{"length zero", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
	{"length with spaces", "HTTP/1.1 200 OK\r\nContent-Length:   3  \r\n\r\nabc"},
	{"no reason", "HTTP/1.1 404\r\nContent-Length: 1\r\n\r\nx"},
	{"error status", "HTTP/1.1 503 Service Unavailable\r\nFenec-Home: us\r\nContent-Length: 4\r\n\r\nbusy"},
	{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{"chunked, next answer behind", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n"},
	{"chunked with a trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-T: 1\r\n\r\nrest"},
	{"chunked, truncated", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"},
	{"chunked, no trailer end", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"},
	{"chunked, bad size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"},
	{"chunked upper case", "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\n"},
	{"chunked and length", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{"gzip, chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"},
	{"two transfer-encodings", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{"body truncated", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhi"},
	{"two equal lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi"},
	{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi!"},
	{"length list", "HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nhi"},
	{"signed length", "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nhi"},
	{"empty length", "HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n"},
	{"huge length", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n"},
	{"no length: until close", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it"},
	{"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi"},
	{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi"},
	{"no content", "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n"},
	{"not modified", "HTTP/1.1 304 Not Modified\r\n\r\n"},
	{"continue", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
	{"lower-case name", "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-a: b\r\n\r\nhi"},
	{"name with a space", "HTTP/1.1 200 OK\r\nX A: b\r\nContent-Length: 0\r\n\r\n"},
	{"space before colon", "HTTP/1.1 200 OK\r\nX-A : b\r\nContent-Length: 0\r\n\r\n"},
	{"obs-fold", "HTTP/1.1 200 OK\r\nX-A: one\r\n two\r\nContent-Length: 0\r\n\r\n"},
	{"obs-fold first", "HTTP/1.1 200 OK\r\n X-A: one\r\nContent-Length: 0\r\n\r\n"},
	{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 2\n\nhi"},
	{"bare LF in a line", "HTTP/1.1 200 OK\r\nX-A: b\nContent-Length: 2\r\n\r\nhi"},
	{"NUL in a value", "HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 0\r\n\r\n"},
	{"CR in a value", "HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n"},
	{"obs-text in a value", "HTTP/1.1 200 OK\r\nX-A: caf\xc3\xa9\r\nContent-Length: 0\r\n\r\n"},
	{"tab in a value", "HTTP/1.1 200 OK\r\nX-A:\tone\ttwo\t\r\nContent-Length: 0\r\n\r\n"},
	{"empty value", "HTTP/1.1 200 OK\r\nX-A:\r\nContent-Length: 0\r\n\r\n"},
	{"repeated name", "HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 0\r\n\r\n"},
	{"pragma", "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 0\r\n\r\n"},
	{"trailer declared", "HTTP/1.1 200 OK\r\nTrailer: X-T\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n\r\n"},
	{"status not digits", "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n"},
	{"status too long", "HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n"},
	{"status with a control byte", "HTTP/1.1 200 O\x01K\r\nContent-Length: 0\r\n\r\n"},
	{"HTTP/2 status line", "HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n"},
	{"garbage", "\x16\x03\x01\x00\x05hello\r\n\r\n"},
	{"empty", ""},
	{"head cut", "HTTP/1.1 200 OK\r\nContent-Len"},
	{"head longer than the buffer", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("b", 5000) + "\r\nContent-Length: 2\r\n\r\nhi"},
}

// answerOutcome is everything the proxy (and a pooled connection) can see of an answer read
// from raw: the head, the body with its error, and the bytes left behind for the next one.
func answerOutcome(raw []byte, method string, read func(*bufio.Reader, *http.Request) (*http.Response, error)) string {
	br := bufio.NewReaderSize(bytes.NewReader(raw), 4096)
	req, _ := http.NewRequest(method, "http://router/t/acme/x", nil)
	resp, err := read(br, req)
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "status %d %q proto %s %d.%d close %v length %d te %q nobody %v\n",
		resp.StatusCode, resp.Status, resp.Proto, resp.ProtoMajor, resp.ProtoMinor, resp.Close,
		resp.ContentLength, resp.TransferEncoding, resp.Body == http.NoBody)
	keys := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		keys = append(keys, k)
	}
	sortStrings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "header %q %q\n", k, resp.Header[k])
	}
	body, berr := io.ReadAll(resp.Body)
	fmt.Fprintf(&b, "body %q err %v\n", body, berr)
	resp.Body.Close()
	rest, _ := io.ReadAll(br)
	fmt.Fprintf(&b, "rest %q\n", rest)
	return b.String()
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestAnswerDifferential(t *testing.T) {
	for _, tc := range answerCases {
		for _, method := range []string{"GET", "HEAD"} {
			want := answerOutcome([]byte(tc.raw), method, http.ReadResponse)
			got := answerOutcome([]byte(tc.raw), method, readAnswer)
			if got != want {
				t.Errorf("%s (%s):\nreadAnswer:        %s\nhttp.ReadResponse: %s", tc.name, method, got, want)
			}
		}
	}
}

// reusingAfter is readAnswerReusing with a spare that holds an earlier answer (first read
// into it, its body to its end, as the proxy hands one back): a recycled answer must read as
// a new one, nothing of the earlier header left.
func reusingAfter(earlier string) func(*bufio.Reader, *http.Request) (*http.Response, error) {
	return func(br *bufio.Reader, req *http.Request) (*http.Response, error) {
		var spare *plainAnswer
		ebr := bufio.NewReader(strings.NewReader(earlier))
		_, pa, err := readAnswerReusing(ebr, req, &spare)
		if err != nil || pa == nil {
			panic(fmt.Sprintf("the earlier answer %q did not take the fast path: %v", earlier, err))
		}
		io.Copy(io.Discard, pa.resp.Body)
		spare = pa
		resp, _, err := readAnswerReusing(br, req, &spare)
		return resp, err
	}
}

// earlierAnswer has headers none of answerCases has, and some they have.
const earlierAnswer = "HTTP/1.1 201 Created\r\nX-Left: behind\r\nFenec-Home: us\r\nContent-Type: a/b\r\nContent-Length: 3\r\n\r\nold"

func TestAnswerDifferentialRecycled(t *testing.T) {
	for _, tc := range answerCases {
		want := answerOutcome([]byte(tc.raw), "GET", http.ReadResponse)
		got := answerOutcome([]byte(tc.raw), "GET", reusingAfter(earlierAnswer))
		if got != want {
			t.Errorf("%s, into a recycled answer:\nreadAnswerReusing: %s\nhttp.ReadResponse: %s", tc.name, got, want)
		}
	}
}

// FuzzAnswerDifferential: for any bytes, readAnswer and http.ReadResponse agree on the head,
// the body, its error and what is left for the next answer; read into a recycled answer too.
func FuzzAnswerDifferential(f *testing.F) {
	for _, tc := range answerCases {
		f.Add([]byte(tc.raw), false)
	}
	f.Fuzz(func(t *testing.T, raw []byte, head bool) {
		method := "GET"
		if head {
			method = "HEAD"
		}
		want := answerOutcome(raw, method, http.ReadResponse)
		got := answerOutcome(raw, method, readAnswer)
		if got != want {
			t.Errorf("for %q (%s):\nreadAnswer:        %s\nhttp.ReadResponse: %s", raw, method, got, want)
		}
		if !head {
			if got := answerOutcome(raw, method, reusingAfter(earlierAnswer)); got != want {
				t.Errorf("for %q, into a recycled answer:\nreadAnswerReusing: %s\nhttp.ReadResponse: %s", raw, got, want)
			}
		}
	})
}

// The fast path is taken for the answers routers send: far fewer allocations than
// http.ReadResponse for the same bytes.
func TestReadAnswerAllocations(t *testing.T) {
	raw := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nFenec-Home: eu\r\nX-Request-Id: abc123\r\nDate: Tue, 01 Dec 2026 12:00:00 GMT\r\nContent-Length: 64\r\n\r\n" + strings.Repeat("x", 64)
	req, _ := http.NewRequest("GET", "http://router/t/acme/x", nil)
	sr := strings.NewReader(raw)
	br := bufio.NewReaderSize(sr, 4096)
	measure := func(read func(*bufio.Reader, *http.Request) (*http.Response, error)) float64 {
		return testing.AllocsPerRun(200, func() {
			sr.Reset(raw)
			br.Reset(sr)
			resp, err := read(br, req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
		})
	}
	fast, std := measure(readAnswer), measure(http.ReadResponse)
	t.Logf("allocations per answer: readAnswer %.0f, http.ReadResponse %.0f", fast, std)
	// Five: the head's string, the header map (two), the values' array, the Response with its
	// body.
	if fast > 5 {
		t.Errorf("readAnswer made %.0f allocations for a plain answer (http.ReadResponse %.0f): the fast path was not taken", fast, std)
	}
	// Into a recycled answer: the head's string and the values' array only.
	var spare *plainAnswer
	recycled := testing.AllocsPerRun(200, func() {
		sr.Reset(raw)
		br.Reset(sr)
		_, pa, err := readAnswerReusing(br, req, &spare)
		if err != nil || pa == nil {
			t.Fatalf("not the fast path: %v", err)
		}
		io.Copy(io.Discard, pa.resp.Body)
		spare = pa
	})
	t.Logf("allocations per answer into a recycled one: %.0f", recycled)
	if recycled > 2 {
		t.Errorf("readAnswerReusing made %.0f allocations into a recycled answer, want 2 (the head's string, the values)", recycled)
	}
}

func BenchmarkReadAnswer(b *testing.B) {
	raw := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nFenec-Home: eu\r\nX-Request-Id: abc123\r\nDate: Tue, 01 Dec 2026 12:00:00 GMT\r\nContent-Length: 64\r\n\r\n" + strings.Repeat("x", 64)
	req, _ := http.NewRequest("GET", "http://router/t/acme/x", nil)
	for _, bc := range []struct {
		name string
		read func(*bufio.Reader, *http.Request) (*http.Response, error)
	}{{"readAnswer", readAnswer}, {"http.ReadResponse", http.ReadResponse}} {
		b.Run(bc.name, func(b *testing.B) {
			sr := strings.NewReader(raw)
			br := bufio.NewReaderSize(sr, 4096)
			b.ReportAllocs()
			for range b.N {
				sr.Reset(raw)
				br.Reset(sr)
				resp, err := bc.read(br, req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
			}
		})
	}
}

// scriptedConn returns its reads in turn, then io.EOF.
type scriptedConn struct {
	net.Conn
	reads []scriptedRead
}

type scriptedRead struct {
	data string
	err  error
}

func (s *scriptedConn) Read(p []byte) (int, error) {
	if len(s.reads) == 0 {
		return 0, io.EOF
	}
	r := s.reads[0]
	s.reads = s.reads[1:]
	return copy(p, r.data), r.err
}

// A router that resets the connection in the middle of the head: readAnswer's fast path
// meets the reset first and hands over to http.ReadResponse, which must report what a
// direct http.ReadResponse would (the socket would say EOF on the read after a reset; the
// connection's Read keeps the reset).
func TestAnswerReadErrorStays(t *testing.T) {
	for _, head := range []string{
		"HTTP/1.1 200 OK\r\nContent-",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n",
		"HTTP/1.1 200 OK\r\n",
		"HTTP/1.1 200 OK",
		"",
	} {
		read := func(f func(*bufio.Reader, *http.Request) (*http.Response, error)) error {
			nc := &scriptedConn{reads: []scriptedRead{{data: head}, {err: syscall.ECONNRESET}}}
			c := newConn(nc, nil)
			req, _ := http.NewRequest("GET", "http://router/t/acme/x", nil)
			_, err := f(c.br, req)
			return err
		}
		got, want := read(readAnswer), read(http.ReadResponse)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("reset after %q: readAnswer says %v, http.ReadResponse %v", head, got, want)
		}
	}
}

// A delivered answer's storage goes back to its connection and the next answer on it is read
// into it: each answer reaches the client with its own header only, and the connection holds
// the storage between requests (the allocations it saves are TestReadAnswerAllocations').
func TestDeliveredAnswerIsRecycled(t *testing.T) {
	answers := []map[string]string{
		{"X-One": "1", "Content-Type": "a/one"},
		{"X-Two": "2", "Content-Type": "a/two"},
		{"X-Three": "3", "X-One": "again", "Content-Type": "a/three"},
		{"Content-Type": "a/four"}, // (net/http's router would add one)
	}
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/t/acme/"))
		for k, v := range answers[i%len(answers)] {
			w.Header().Set(k, v)
		}
		w.Header().Set("Fenec-Shard", "1")
		w.Header().Set("Content-Length", "2")
		io.WriteString(w, "ok")
	}))
	defer router.Close()
	srv, h := entryFor(t, router.URL)
	rt := h.rt.Load().byID[0].routers[0]
	for i := range 2 * len(answers) {
		resp, err := srv.Client().Get(srv.URL + "/t/acme/" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		for _, k := range []string{"X-One", "X-Two", "X-Three", "Content-Type"} {
			if got, want := resp.Header.Get(k), answers[i%len(answers)][k]; got != want {
				t.Errorf("answer %d: %s = %q, want %q (the router sent %v)", i, k, got, want, answers[i%len(answers)])
			}
		}
		waitIdle(t, h)
		rt.mu.Lock()
		spare := rt.idle[0].spare
		rt.mu.Unlock()
		if spare == nil {
			t.Fatalf("answer %d: the pooled connection holds no answer to read the next into", i)
		}
	}
}
