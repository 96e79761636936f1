package proxy

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/testutil"
)

type echoed struct {
	Method  string              `json:"method"`
	Path    string              `json:"path"`
	Tenant  string              `json:"tenant"`
	Headers map[string][]string `json:"headers"`
	BodyLen int64               `json:"body_len"`
}

func decodeEcho(t *testing.T, r result) echoed {
	t.Helper()
	var ec echoed
	if err := json.Unmarshal([]byte(r.body), &ec); err != nil {
		t.Fatalf("echo %d: %v: %s", r.status, err, r.body)
	}
	return ec
}

func (ec echoed) header(k string) []string {
	for name, v := range ec.Headers {
		if strings.EqualFold(name, k) {
			return v
		}
	}
	return nil
}

func TestHygieneThroughTheEntry(t *testing.T) {
	e := newEnv(t, withEntryToken("tok-123"))
	e.learn("acme")
	r := e.do("GET", "/t/acme/echo?set=Fenec-Verified:1&set=X-Answer:kept&set=Keep-Alive:timeout%3D1", map[string]string{
		"Authorization": "Bearer abc", "Cookie": "s=1", "Idempotency-Key": "k", "Traceparent": "00-1-2-01",
		"X-Forwarded-For": "6.6.6.6", "Forwarded": "for=6.6.6.6", "Fly-Client-Ip": "6.6.6.6",
		"Cf-Connecting-Ip": "6.6.6.6", "Fenec-Router": "evil", "Fenec-Client": "6.6.6.6 1 x",
		"Fenec-Home": "us", "X-Real-Ip": "6.6.6.6", "True-Client-Ip": "6.6.6.6",
	}, "")
	ec := decodeEcho(t, r)
	for _, k := range []string{"Authorization", "Cookie", "Idempotency-Key", "Traceparent"} {
		if ec.header(k) == nil {
			t.Errorf("%s did not reach the router", k)
		}
	}
	for _, k := range []string{"X-Forwarded-For", "Forwarded", "Fly-Client-Ip", "Cf-Connecting-Ip",
		"Fenec-Router", "X-Real-Ip", "True-Client-Ip"} {
		if v := ec.header(k); v != nil {
			t.Errorf("%s reached the router: %q", k, v)
		}
	}
	if v := ec.header("Fenec-Home"); len(v) != 1 || v[0] != "1" {
		t.Errorf("Fenec-Home at router = %q, want [1]", v)
	}
	// Fenec-Client: the entry's own, verified here independently.
	v := ec.header("Fenec-Client")
	if len(v) != 1 {
		t.Fatalf("Fenec-Client = %q", v)
	}
	parts := strings.Split(v[0], " ")
	if len(parts) != 3 || parts[0] != "127.0.0.1" {
		t.Fatalf("Fenec-Client = %q, want 127.0.0.1 <unix> <mark>", v[0])
	}
	mac := hmac.New(sha256.New, []byte("tok-123"))
	fmt.Fprintf(mac, "fenec-client %s %s", parts[0], parts[1])
	if want := base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:16]); parts[2] != want {
		t.Errorf("mark = %s, want %s", parts[2], want)
	}
	if c := e.sc.ClientMarks(); c.Named < 2 || c.BadMark != 0 || c.Stale != 0 || c.Absent != 0 {
		t.Errorf("stand-in counted %+v, want every request named", c)
	}
	// The answer: Fenec-Home, Fenec-Verified and hop-by-hop dropped.
	if r.header.Get("Fenec-Verified") != "" || r.header.Get("Fenec-Home") != "" || r.header.Get("Keep-Alive") != "" {
		t.Errorf("answer carried router-only headers: %v", r.header)
	}
	if r.header.Get("X-Answer") != "kept" || r.header.Get("Fenec-Shard") != "1" {
		t.Errorf("answer lost headers: %v", r.header)
	}
}

// Once, the operator's sources of the client's address and country reached the
// router. Through the entry to a stand-in: the router sees neither, while ClientAddr and
// ClientContinent still read them (Fenec-Client carries the address; the continent chose the
// first region).
func TestStripHeadersThroughTheEntry(t *testing.T) {
	e := newEnv(t, withEntryToken("tok-strip"), withConfig(func(c *Config) {
		c.StripHeaders = []string{"x-client-ip", "X-Country"}
		c.ClientAddr = func(r *http.Request) string { return r.Header.Get("X-Client-Ip") }
		c.ClientContinent = func(r *http.Request, _ string) string {
			if r.Header.Get("X-Country") == "DE" {
				return "EU"
			}
			return ""
		}
		c.Continents = map[string]string{"EU": "eu"}
	}))
	// globex lives in us and is heard nowhere: a client in DE is sent to eu first.
	before := e.direct("eu")
	r := e.do("GET", "/t/globex/echo", map[string]string{"X-Client-Ip": "203.0.113.9", "x-country": "DE",
		"X-Country-Code": "kept"}, "")
	ec := decodeEcho(t, r)
	for _, k := range []string{"X-Client-Ip", "X-Country"} {
		if v := ec.header(k); v != nil {
			t.Errorf("%s reached the router: %q", k, v)
		}
	}
	if ec.header("X-Country-Code") == nil {
		t.Error("X-Country-Code, a header not named, did not reach the router")
	}
	if v := ec.header("Fenec-Client"); len(v) != 1 || !strings.HasPrefix(v[0], "203.0.113.9 ") {
		t.Errorf("Fenec-Client = %q, want the address ClientAddr read from X-Client-Ip", v)
	}
	if e.direct("eu") != before+1 {
		t.Error("the request did not go to eu first: ClientContinent did not see X-Country")
	}
	for _, s := range e.sc.Seen() {
		if s.Header.Get("X-Client-Ip") != "" || s.Header.Get("X-Country") != "" {
			t.Errorf("router %s saw %v", s.Router, s.Header)
		}
	}
}

func TestStripHeadersValidated(t *testing.T) {
	table, err := homes.New(homes.Config{Regions: []string{"eu"}, Origin: "test"})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://127.0.0.1:1")
	for _, bad := range []string{"", "X Country", "X-Country:", "Ä"} {
		_, err := New(Config{Regions: []Region{{Name: "eu", Routers: []*url.URL{u}}}, Homes: table,
			StripHeaders: []string{"X-Ok", bad}})
		if err == nil || !strings.Contains(err.Error(), "StripHeaders") {
			t.Errorf("StripHeaders %q: err = %v, want one naming StripHeaders", bad, err)
		}
	}
}

func TestRequestID(t *testing.T) {
	e := newEnv(t)
	e.learn("acme")
	ec := decodeEcho(t, e.do("GET", "/t/acme/echo", nil, ""))
	gen := ec.header("X-Request-Id")
	if len(gen) != 1 || gen[0] == "" {
		t.Fatalf("X-Request-Id = %q", gen)
	}
	ec2 := decodeEcho(t, e.do("GET", "/t/acme/echo", nil, ""))
	if ec2.header("X-Request-Id")[0] == gen[0] {
		t.Error("two requests got the same id")
	}
	if !strings.Contains(e.logs.String(), `"request_id":"`+gen[0]+`"`) {
		t.Error("the log line lacks the request id the router got")
	}
	ec3 := decodeEcho(t, e.do("GET", "/t/acme/echo", map[string]string{"X-Request-Id": "mine"}, ""))
	if v := ec3.header("X-Request-Id"); len(v) != 1 || v[0] != "mine" {
		t.Errorf("client's id = %q, want [mine] only", v)
	}
}

func TestPathDecoding(t *testing.T) {
	e := newEnv(t)
	for _, p := range []string{"/t/acme%2F_replication", "/t/acme/%5Freplication"} {
		r := e.do("GET", p, nil, "")
		if r.header.Get("Fenec-Shard") != "1" {
			t.Errorf("%s: %d %s", p, r.status, r.body)
		}
	}
	if _, ok := e.homes.Lookup("acme"); !ok {
		t.Error("acme not learned from /t/acme%2F_replication")
	}
	for _, p := range []string{"/t//items", "/t/", "/t/ac%00me/x", "/t/" + strings.Repeat("x", 256)} {
		seen := len(e.sc.Seen())
		r := e.do("GET", p, map[string]string{"Origin": "https://app.example"}, "")
		if r.status != 400 || errCode(t, r) != codeBadPath {
			t.Errorf("%s: %d %s, want 400 bad_path", p, r.status, r.body)
		}
		if len(e.sc.Seen()) != seen {
			t.Errorf("%s reached a router", p)
		}
	}
	// Outside /t/: routed like a tenant heard nowhere, teaches nothing.
	r := e.do("GET", "/status", nil, "")
	if r.header.Get("Fenec-Shard") != "1" {
		t.Errorf("/status not routed: %d", r.status)
	}
	if e.homes.Len() != 1 {
		t.Errorf("homes = %d, want only acme", e.homes.Len())
	}
	if r := e.do("GET", "/_entry/health", nil, ""); r.status != 200 || r.header.Get("Fenec-Shard") != "" {
		t.Errorf("/_entry/health: %d %v", r.status, r.header)
	}
}

// Once, /t/acme/items/1%00 (a NUL after the tenant) reached the router. A NUL
// anywhere in the decoded path, outside /t/ too, is 400 bad_path from the entry itself, for
// every method, and no router sees the request. The stand-in refuses such a path as well, so
// what shows that the entry answered is the stand-ins' record of requests seen (and an answer
// without Fenec-Shard).
func TestNULNeverReachesARouter(t *testing.T) {
	e := newEnv(t)
	e.learn("acme")
	paths := []string{"/t/acme/items/1%00", "/t/acme/%00", "/t/acme/it%00ems/1", "/t/acme%00/items",
		"/items/1%00", "/_standin/ledger%00", "/t%00", "/%00"}
	requests := []struct {
		method string
		hdr    map[string]string
		body   string
	}{
		{"GET", nil, ""},
		{"POST", nil, "x"},
		{"PUT", map[string]string{"Idempotency-Key": "nul-1"}, "x"},
	}
	seen, applied := len(e.sc.Seen()), len(e.sc.Ledger())
	for _, p := range paths {
		for _, rq := range requests {
			r := e.do(rq.method, p, rq.hdr, rq.body)
			if r.status != 400 || errCode(t, r) != codeBadPath || r.header.Get("Fenec-Shard") != "" {
				t.Errorf("%s %s: %d %v %s, want the entry's own 400 bad_path", rq.method, p, r.status, r.header, r.body)
			}
		}
	}
	if got := e.sc.Seen()[seen:]; len(got) != 0 {
		t.Errorf("routers saw %d requests, want none; first: %s %q", len(got), got[0].Method, got[0].Path)
	}
	for _, s := range e.sc.Seen() {
		if strings.IndexByte(s.Path, 0) >= 0 {
			t.Errorf("router %s saw %s %q", s.Router, s.Method, s.Path)
		}
	}
	if n := len(e.sc.Ledger()) - applied; n != 0 {
		t.Errorf("%d writes applied, want none", n)
	}
	// The control: the same request without the NUL reaches a router.
	if r := e.do("GET", "/t/acme/items/1", nil, ""); r.header.Get("Fenec-Shard") != "1" {
		t.Fatalf("/t/acme/items/1: %d %s, want a router's answer", r.status, r.body)
	}
	if len(e.sc.Seen()) == seen {
		t.Error("the control request was not seen either: the record of requests seen is not working")
	}
}

func TestCORS(t *testing.T) {
	e := newEnv(t, withCORS("https://app.example"))
	e.learn("acme")
	seen := len(e.sc.Seen())
	r := e.do("OPTIONS", "/t/acme/items", map[string]string{
		"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "content-type, idempotency-key"}, "")
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		r.header.Get("Access-Control-Allow-Methods") != corsMethods ||
		r.header.Get("Access-Control-Allow-Headers") != "content-type, idempotency-key" ||
		r.header.Get("Access-Control-Max-Age") != "600" || r.header.Get("Vary") != "Origin" {
		t.Errorf("preflight: %d %v", r.status, r.header)
	}
	if len(e.sc.Seen()) != seen {
		t.Error("preflight reached a router")
	}
	// A router's answer: its own CORS headers, exactly one set.
	r = e.do("GET", "/t/acme/items/1", map[string]string{"Origin": "https://app.example"}, "")
	if v := r.header.Values("Access-Control-Allow-Origin"); len(v) != 1 {
		t.Errorf("router answer has %d Access-Control-Allow-Origin: %q", len(v), v)
	}
	// The entry's own error: CORS headers from the entry.
	r = e.do("GET", "/t//x", map[string]string{"Origin": "https://app.example"}, "")
	if v := r.header.Values("Access-Control-Allow-Origin"); len(v) != 1 || v[0] != "https://app.example" {
		t.Errorf("entry error ACAO = %q", v)
	}
	r = e.do("GET", "/t//x", map[string]string{"Origin": "https://evil.example"}, "")
	if v := r.header.Values("Access-Control-Allow-Origin"); len(v) != 0 {
		t.Errorf("entry error for a foreign origin has ACAO %q", v)
	}
}

func TestBodies(t *testing.T) {
	e := newEnv(t, withConfig(func(c *Config) { c.BodyBuffer = 1024 }))
	e.learn("acme")
	t.Run("longer than the buffer with a length is streamed", func(t *testing.T) {
		body := strings.Repeat("b", 4096)
		ec := decodeEcho(t, e.do("POST", "/t/acme/echo", nil, body))
		if ec.BodyLen != 4096 {
			t.Errorf("router got %d bytes, want 4096", ec.BodyLen)
		}
	})
	t.Run("chunked within the buffer goes with a length", func(t *testing.T) {
		req, _ := http.NewRequest("POST", e.srv.URL+"/t/acme/echo", struct{ *strings.Reader }{strings.NewReader("small")})
		req.ContentLength = -1
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ec echoed
		json.NewDecoder(resp.Body).Decode(&ec)
		if ec.BodyLen != 5 || ec.header("Content-Length") == nil || ec.header("Transfer-Encoding") != nil {
			t.Errorf("router got %d bytes, headers %v", ec.BodyLen, ec.Headers)
		}
	})
	t.Run("chunked past the buffer is 411", func(t *testing.T) {
		seen := len(e.sc.Seen())
		req, _ := http.NewRequest("POST", e.srv.URL+"/t/acme/items", struct{ *strings.Reader }{strings.NewReader(strings.Repeat("c", 2000))})
		req.ContentLength = -1
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 411 {
			t.Errorf("got %d, want 411", resp.StatusCode)
		}
		if len(e.sc.Seen()) != seen {
			t.Error("a router was asked")
		}
	})
	t.Run("streamed POST that may have run is not re-sent", func(t *testing.T) {
		e.fault("eu", 0, "reset_after_request")
		e.fault("eu", 1, "reset_after_request")
		before := len(e.applies("acme"))
		r := e.do("POST", "/t/acme/items", map[string]string{"Idempotency-Key": "big"}, strings.Repeat("d", 4096))
		if r.status != 502 || errCode(t, r) != codeMayHaveRun {
			t.Errorf("got %d %s: a streamed body cannot be sent twice", r.status, r.body)
		}
		if n := len(e.applies("acme")) - before; n != 1 {
			t.Errorf("applies = %d, want 1", n)
		}
		e.fault("eu", 0, "ok")
		e.fault("eu", 1, "ok")
	})
}

func TestOverloaded(t *testing.T) {
	e := newEnv(t, withConfig(func(c *Config) { c.MaxInflight = 1 }))
	e.learn("acme")
	held := make(chan error, 1)
	go func() {
		// Not e.do: it may call t.Fatal, which must not run outside the test's goroutine.
		req, _ := http.NewRequest("POST", e.srv.URL+"/t/acme/items", strings.NewReader("x"))
		req.Header.Set("Fenec-Wait", "2")
		resp, err := e.srv.Client().Do(req) // bounded by testRequestTimeout
		if err == nil {
			resp.Body.Close()
		}
		held <- err
	}()
	testutil.Eventually(t, 5*time.Second, "held write in flight", func() bool {
		for _, s := range e.sc.Seen() {
			if s.Method == "POST" {
				return e.h.Inflight() == 1
			}
		}
		return false
	})
	r := e.do("GET", "/t/acme/items/1", nil, "")
	if r.status != 503 || errCode(t, r) != codeOverloaded {
		t.Errorf("got %d %s, want 503 overloaded", r.status, r.body)
	}
	if err := <-held; err != nil {
		t.Errorf("the held write: %v", err)
	}
}

// Logs never carry the entry token, Authorization, a cookie or a body.
func TestLogsCarryNoSecrets(t *testing.T) {
	e := newEnv(t, withEntryToken("TOKEN-PLANTED-42"))
	e.learn("acme")
	e.fault("eu", 0, "reset_after_request")
	for _, m := range []string{"POST", "GET"} {
		e.do(m, "/t/acme/items", map[string]string{"Authorization": "Bearer AUTH-PLANTED-42",
			"Cookie": "session=COOKIE-PLANTED-42"}, "BODY-PLANTED-42")
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "may_have_run") {
		t.Fatalf("expected the failure in the logs:\n%s", logs)
	}
	for _, s := range []string{"TOKEN-PLANTED", "AUTH-PLANTED", "COOKIE-PLANTED", "BODY-PLANTED"} {
		if strings.Contains(logs, s) {
			t.Errorf("logs carry %s", s)
		}
	}
}

// Kept request bodies share one memory budget: a body with a length that finds no room is
// streamed to one router instead; one without a length is refused 503 overloaded; the budget
// is given back when each request ends.
func TestBodyBudget(t *testing.T) {
	e := newEnv(t, withConfig(func(c *Config) { c.BodyBuffer = 1024; c.MaxBufferedBytes = 64 }))
	e.learn("acme")
	ec := decodeEcho(t, e.do("POST", "/t/acme/echo", nil, strings.Repeat("k", 32)))
	if ec.BodyLen != 32 || promtest.ToFloat64(e.h.met.m.BodiesSqueezed) != 0 {
		t.Fatalf("a body within the budget: router got %d bytes", ec.BodyLen)
	}
	ec = decodeEcho(t, e.do("POST", "/t/acme/echo", nil, strings.Repeat("s", 100)))
	if ec.BodyLen != 100 || promtest.ToFloat64(e.h.met.m.BodiesSqueezed) != 1 {
		t.Errorf("over the budget: router got %d bytes, squeezed %v; want streamed", ec.BodyLen, promtest.ToFloat64(e.h.met.m.BodiesSqueezed))
	}
	req, _ := http.NewRequest("POST", e.srv.URL+"/t/acme/items", struct{ *strings.Reader }{strings.NewReader("c")})
	req.ContentLength = -1
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("chunked body with no room for --body-buffer: %d, want 503 overloaded", resp.StatusCode)
	}
	testutil.Eventually(t, 2*time.Second, "budget given back", func() bool { return e.h.budget.used.Load() == 0 })
}

// The debug line of a request names its fields as the reference lists them, and its duration
// carries its unit in its name: "duration_ms" (zerolog writes a duration as a number of
// milliseconds, which a bare "duration" would not say).
func TestRequestLogLine(t *testing.T) {
	e := newEnv(t)
	if r := e.do("GET", "/t/acme/items/1", nil, ""); r.status == 0 || r.status >= 500 {
		t.Fatalf("GET: %d, want the router's answer", r.status)
	}
	var line map[string]any
	for _, l := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(l, `"message":"request"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line == nil {
		t.Fatalf("no request line in %s", e.logs)
	}
	for _, k := range []string{"method", "path", "tenant", "region", "router", "status", "outcome", "duration_ms", "request_id"} {
		if _, ok := line[k]; !ok {
			t.Errorf("the request line has no %q: %v", k, line)
		}
	}
	if _, ok := line["duration_ms"].(float64); !ok {
		t.Errorf("duration_ms = %v, want a number of milliseconds", line["duration_ms"])
	}
}
