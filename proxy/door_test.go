package proxy

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fenec/fenec-entry/door"
)

// serveThroughDoor reads raw as a server does, through the door, and has h answer each
// request in turn; it returns the answers.
func serveThroughDoor(t *testing.T, h http.Handler, raw string) []*httptest.ResponseRecorder {
	t.Helper()
	br := bufio.NewReader(door.NewReader(strings.NewReader(raw)))
	var out []*httptest.ResponseRecorder
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return out
		}
		req.RemoteAddr = "192.0.2.9:1234"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		out = append(out, w)
	}
}

// A head the door refused reaches the handler as its stand-in: answered with the reason's
// JSON error, the connection closed after it, counted by reason, logged at debug, and no
// router asked.
func TestDoorRefusalAnswered(t *testing.T) {
	e := newEnv(t)
	answers := serveThroughDoor(t, e.h, "GET /t/acme/items/1 HTTP/1.1\r\nHost: e\r\nHost: f\r\n\r\n")
	if len(answers) != 1 {
		t.Fatalf("%d answers, want 1", len(answers))
	}
	w := answers[0]
	var b errorBody
	json.Unmarshal(w.Body.Bytes(), &b)
	if w.Code != 400 || b.Error != "bad_request" || b.Message != door.RepeatedHost.Message() || b.RequestID == "" {
		t.Errorf("answer %d %+v", w.Code, b)
	}
	if w.Header().Get("Connection") != "close" {
		t.Error("the refusal does not close the connection")
	}
	if got := promtest.ToFloat64(e.h.met.refused[door.RepeatedHost]); got != 1 {
		t.Errorf("refused{reason=repeated_host} = %v", got)
	}
	if got := promtest.ToFloat64(e.h.met.requests[door.CodeBadRequest]); got != 1 {
		t.Errorf("requests{outcome=bad_request} = %v", got)
	}
	if n := e.direct("eu") + e.direct("us"); n != 0 {
		t.Errorf("%d router requests", n)
	}
	if logs := e.logs.String(); !strings.Contains(logs, `"refused":"repeated_host"`) || strings.Contains(logs, door.RefusedPath) {
		t.Errorf("the log line names no reason, or the stand-in's path: %s", logs)
	}
}

// The regression this pins: a write whose chunked body was malformed was answered 200 with an
// empty body (the handler returned without a word, and net/http sent its implicit 200), and
// no router ever saw it. Over a plain net/http server, with no door: whatever server reads
// the body, a body that fails is answered 400, and the ledger stays empty.
func TestMalformedChunkedWriteIs400(t *testing.T) {
	e := newEnv(t)
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(e.srv.URL, "http://"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "POST /t/acme/items HTTP/1.1\r\nHost: e\r\nTransfer-Encoding: chunked\r\nIdempotency-Key: k1\r\n\r\n"+
		"5_0\r\n{\"a\":1}\r\n0\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	var b errorBody
	json.NewDecoder(resp.Body).Decode(&b)
	resp.Body.Close()
	if resp.StatusCode != 400 || b.Error != "bad_request" {
		t.Errorf("answer %d %+v, want 400 bad_request", resp.StatusCode, b)
	}
	if a := e.applies("acme"); len(a) != 0 {
		t.Errorf("applied: %+v", a)
	}
	if n := e.direct("eu") + e.direct("us"); n != 0 {
		t.Errorf("%d router requests", n)
	}
}

// A client that went away before any answer (here it half-closed while its request was held
// at the router) gets no answer, not the server's implicit empty 200.
func TestCanceledGetsNoAnswer(t *testing.T) {
	e := newEnv(t)
	e.fault("eu", 0, "slow=3000")
	e.fault("eu", 1, "slow=3000")
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(e.srv.URL, "http://"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /t/acme/items/1 HTTP/1.1\r\nHost: e\r\n\r\n")
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading: %v", err)
	}
	if len(got) != 0 {
		t.Errorf("a client gone before the answer read %q", got)
	}
}

// OPTIONS * asks about the server: the entry answers it, and no router is asked.
func TestOptionsStar(t *testing.T) {
	e := newEnv(t)
	answers := serveThroughDoor(t, e.h, "OPTIONS * HTTP/1.1\r\nHost: e\r\n\r\n")
	if len(answers) != 1 || answers[0].Code != 204 || answers[0].Header().Get("Allow") == "" {
		t.Fatalf("answers %+v", answers)
	}
	if n := e.direct("eu") + e.direct("us"); n != 0 {
		t.Errorf("%d router requests", n)
	}
}
