package h1

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/door"
)

// The differential harness: one handler behind net/http's server and behind this one, the
// same raw bytes sent to both, and what comes back compared. Both read through the door and
// parse with http.ReadRequest's code, so a difference is in what the servers check around
// it, or in how they answer.

// echoHandler answers with what it saw: method, target, host, the body's length or its read
// error, so that a request framed differently by the two servers shows.
func echoHandler(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "body error\n")
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "%s %s host=%q body=%d te=%q\n", r.Method, r.RequestURI, r.Host, len(body), r.TransferEncoding)
}

type servers struct{ std, lean string }

func startBoth(t testing.TB, h http.Handler, newPoll func(*Server) (poller, sockets, error)) servers {
	t.Helper()
	stdLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	std := &http.Server{Handler: h, Protocols: protos, MaxHeaderBytes: door.MaxHead, // the door's limit decides
		ReadHeaderTimeout: 5 * time.Second, ErrorLog: nil}
	go std.Serve(door.Listen(stdLn, nil, 0, nil)) // as the entry serves what h1 hands it
	leanLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lean := &Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, newPoll: newPoll}
	go lean.Serve(leanLn)
	t.Cleanup(func() { std.Close(); lean.Close() })
	return servers{std: stdLn.Addr().String(), lean: leanLn.Addr().String()}
}

// exchange is what a server did with some bytes: each answer's status and body, in order,
// and whether it closed the connection before the client half-closed its side.
type exchange struct {
	answers []string
	err     string // how reading the answers ended, if not at a clean EOF
}

func (e exchange) String() string {
	return fmt.Sprintf("%q (end: %s)", e.answers, e.err)
}

// send writes raw to addr, half-closes, and reads answers until EOF (at most 5 s).
func send(t testing.TB, addr string, raw []byte) exchange {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(raw); err != nil {
		return exchange{err: "write: " + err.Error()}
	}
	c.(*net.TCPConn).CloseWrite()
	br := bufio.NewReader(c)
	var ex exchange
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				ex.err = "no end within 5 s" // a server that did not close after the client's end
			} else if err != io.EOF {
				ex.err = "read"
			}
			return ex
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		a := fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		switch {
		case resp.StatusCode >= 400 && resp.StatusCode != 404:
			// The error texts differ, and whether the client reads one before the reset
			// that closing with unread data sends is timing: the status is the contract.
			a = fmt.Sprint(resp.StatusCode)
		case err != nil:
			a += " (cut)"
		}
		ex.answers = append(ex.answers, a)
	}
}

// diffCases are requests by name, the request smuggling cases among them.
var diffCases = []struct{ name, raw string }{
	{"get", "GET /t/acme/x HTTP/1.1\r\nHost: e\r\n\r\n"},
	{"two pipelined", "GET /a HTTP/1.1\r\nHost: e\r\n\r\nGET /b HTTP/1.1\r\nHost: e\r\n\r\n"},
	{"post with length", "POST /t/a HTTP/1.1\r\nHost: e\r\nContent-Length: 5\r\n\r\nhello"},
	{"chunked", "POST /t/a HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{"duplicate equal content-length", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello"},
	{"conflicting content-length", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"},
	{"content-length list", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 5, 5\r\n\r\nhello"},
	{"negative content-length", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: -1\r\n\r\n"},
	{"plus content-length", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: +5\r\n\r\nhello"},
	{"transfer-encoding with content-length", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{"transfer-encoding other than chunked", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: gzip\r\n\r\nxx"},
	{"transfer-encoding gzip, chunked", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"},
	{"transfer-encoding twice", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{"transfer-encoding on HTTP/1.0", "POST / HTTP/1.0\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{"chunk-size overflow", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff1\r\nx\r\n0\r\n\r\n"},
	{"chunk-size not hex", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nx\r\n0\r\n\r\n"},
	{"chunk with bare LF", "POST / HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\n0\n\n"},
	{"obs-fold", "GET / HTTP/1.1\r\nHost: e\r\nX-A: one\r\n two\r\n\r\n"},
	{"obs-fold first header", "GET / HTTP/1.1\r\n X-A: one\r\nHost: e\r\n\r\n"},
	{"bare LF", "GET / HTTP/1.1\nHost: e\n\n"},
	{"bare CR", "GET / HTTP/1.1\rHost: e\r\r\n\r\n"},
	{"missing host", "GET / HTTP/1.1\r\n\r\n"},
	{"missing host on HTTP/1.0", "GET / HTTP/1.0\r\n\r\n"},
	{"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"},
	{"two hosts, other case", "GET / HTTP/1.1\r\nHost: a\r\nhOST: b\r\n\r\n"},
	{"malformed host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n"},
	{"host with a slash", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"},
	{"absolute form", "GET http://a/x HTTP/1.1\r\nHost: b\r\n\r\n"},
	{"space before colon", "GET / HTTP/1.1\r\nHost: e\r\nX-A : 1\r\n\r\n"},
	{"header name with a space", "GET / HTTP/1.1\r\nHost: e\r\nX A: 1\r\n\r\n"},
	{"NUL in a value", "GET / HTTP/1.1\r\nHost: e\r\nX-A: a\x00b\r\n\r\n"},
	{"DEL in a value", "GET / HTTP/1.1\r\nHost: e\r\nX-A: a\x7fb\r\n\r\n"},
	{"HTTP/2.0 request line", "GET / HTTP/2.0\r\nHost: e\r\n\r\n"},
	{"HTTP/0.9", "GET /\r\n\r\n"},
	{"HTTP/1.2", "GET / HTTP/1.2\r\nHost: e\r\n\r\n"},
	{"lower-case version", "GET / http/1.1\r\nHost: e\r\n\r\n"},
	{"no target", "GET HTTP/1.1\r\nHost: e\r\n\r\n"},
	{"field line too long", "GET / HTTP/1.1\r\nHost: e\r\nX-Big: " + strings.Repeat("a", 20000) + "\r\n\r\n"},
	{"head too large", "GET / HTTP/1.1\r\nHost: e\r\n" + strings.Repeat("X-Big: "+strings.Repeat("a", 8000)+"\r\n", 9) + "\r\n"},
	{"expect 100-continue", "POST / HTTP/1.1\r\nHost: e\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi"},
	{"expect other", "POST / HTTP/1.1\r\nHost: e\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\nhi"},
	{"expect 100-continue, then a no-break space", "POST / HTTP/1.1\r\nHost: e\r\nExpect: 100-continue\xc2\xa0\r\nContent-Length: 2\r\n\r\nhi"},
	{"expect 100-continue after another token", "POST / HTTP/1.1\r\nHost: e\r\nExpect: x 100-continue\r\nContent-Length: 2\r\n\r\nhi"},
	{"expect 100-continue in a list", "POST / HTTP/1.1\r\nHost: e\r\nExpect: x, 100-continue\r\nContent-Length: 2\r\n\r\nhi"},
	{"HTTP/1.0 close", "GET / HTTP/1.0\r\n\r\nGET /again HTTP/1.0\r\n\r\n"},
	{"HTTP/1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /again HTTP/1.0\r\n\r\n"},
	{"connection close", "GET / HTTP/1.1\r\nHost: e\r\nConnection: close\r\n\r\nGET /again HTTP/1.1\r\nHost: e\r\n\r\n"},
	{"body shorter than its length", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 10\r\n\r\nhi"},
	{"garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"},
	{"CRLF after a POST body", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 2\r\n\r\nhi\r\nGET /next HTTP/1.1\r\nHost: e\r\n\r\n"},
	{"two CRLFs after a POST body", "POST / HTTP/1.1\r\nHost: e\r\nContent-Length: 2\r\n\r\nhi\r\n\r\nGET /next HTTP/1.1\r\nHost: e\r\n\r\n"},
	{"CRLF after a GET", "GET / HTTP/1.1\r\nHost: e\r\n\r\n\r\nGET /next HTTP/1.1\r\nHost: e\r\n\r\n"},
	{"HTTP/1.0 keep-alive after another token", "GET / HTTP/1.0\r\nConnection: 0 keep-alive\r\n\r\nGET /again HTTP/1.0\r\n\r\n"},
	{"HTTP/1.0 keep-alive, then garbage", "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n0000"},
	{"HTTP/1.1 close after another token", "GET / HTTP/1.1\r\nHost: e\r\nConnection: x close\r\n\r\nGET /again HTTP/1.1\r\nHost: e\r\n\r\n"},
	{"host with an empty continuation", "GET / HTTP/1.1\r\nHost: e\r\n \r\n\r\n"},
	{"host with a continuation", "GET / HTTP/1.1\r\nHost: e\r\n f\r\n\r\n"},
	{"host empty, then a continuation", "GET / HTTP/1.1\r\nHost:\r\n e\r\n\r\n"},
	{"a bad byte before the limit, the limit read ahead", "GET / HTTP/1.1\r\nHost: e\r\nX-Big: " + strings.Repeat("a", 5900) + "\x01\r\n" + strings.Repeat("X-C: d\r\n", 100) + "\r\n"},
	{"empty lines first", "\r\n\r\nGET / HTTP/1.1\r\nHost: e\r\n\r\n"},
	{"CONNECT without host", "CONNECT a:443 HTTP/1.1\r\n\r\n"},
	{"lower-case method", "get / HTTP/1.1\r\nHost: e\r\n\r\n"},
	{"method with a slash", "G/T / HTTP/1.1\r\nHost: e\r\n\r\n"},
	{"NUL in the target", "GET /a\x00b HTTP/1.1\r\nHost: e\r\n\r\n"},
}

func TestDifferential(t *testing.T) { eachPoller(t, testDifferential) }

func testDifferential(t *testing.T, pk testPoller) {
	srv := startBoth(t, http.HandlerFunc(echoHandler), pk.newPoll)
	for _, tc := range diffCases {
		t.Run(tc.name, func(t *testing.T) {
			std, lean := send(t, srv.std, []byte(tc.raw)), send(t, srv.lean, []byte(tc.raw))
			if std.String() != lean.String() {
				t.Errorf("net/http: %v\nh1:       %v", std, lean)
			}
		})
	}
}

// FuzzDifferential: for any bytes, both servers give the same answers (statuses, and bodies of
// the answers the handler wrote) in the same order.
func FuzzDifferential(f *testing.F) {
	for _, tc := range diffCases {
		f.Add([]byte(tc.raw))
	}
	srv := startBoth(f, http.HandlerFunc(echoHandler), nil)
	f.Fuzz(func(t *testing.T, raw []byte) {
		if bytes.HasPrefix(raw, []byte("PRI")) {
			return // HTTP/2: handed to Fallback, not compared here
		}
		std, lean := send(t, srv.std, raw), send(t, srv.lean, raw)
		if std.String() != lean.String() {
			t.Errorf("for %q\nnet/http: %v\nh1:       %v", raw, std, lean)
		}
	})
}

// A handler's header values are written as net/http writes them: CR and LF as spaces, SP and
// HTAB trimmed, nothing else (a no-break space, a vertical tab are the value's).
func TestHeaderValuesAsNetHTTP(t *testing.T) {
	values := []string{"a", " a\t", "a\r\nb", "a\r\n", "a\u00a0", "\u00a0a", "a\x0b", "\x0ca", "a\u0085"}
	srv := startBoth(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i, v := range values {
			w.Header().Set(fmt.Sprintf("X-V%d", i), v)
		}
	}), nil)
	lines := func(addr string) []string {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: e\r\n\r\n")
		br := bufio.NewReader(c)
		var out []string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: %v after %q", addr, err, out)
			}
			if line == "\r\n" {
				return out
			}
			if strings.HasPrefix(line, "X-V") {
				out = append(out, line)
			}
		}
	}
	std, lean := lines(srv.std), lines(srv.lean)
	slices.Sort(std)
	slices.Sort(lean)
	if len(std) != len(values) || !slices.Equal(std, lean) {
		t.Errorf("net/http writes %q\nh1 writes       %q", std, lean)
	}
}

// The status line is written as net/http writes it, for codes with a text and without.
func TestStatusLineAsNetHTTP(t *testing.T) { eachPoller(t, testStatusLineAsNetHTTP) }

func testStatusLineAsNetHTTP(t *testing.T, pk testPoller) {
	srv := startBoth(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		w.WriteHeader(code)
	}), pk.newPoll)
	statusLine := func(addr string, code int) string {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET /%d HTTP/1.1\r\nHost: e\r\n\r\n", code)
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatalf("status %d: %v", code, err)
		}
		return line
	}
	for _, code := range []int{200, 204, 299, 404, 503, 599, 999} {
		if std, lean := statusLine(srv.std, code), statusLine(srv.lean, code); std != lean {
			t.Errorf("status %d: net/http writes %q, h1 %q", code, std, lean)
		}
	}
}
