package conformance

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestReadRequest(t *testing.T) {
	const h = "Host: x\r\n"
	tests := []struct {
		name, in string
		state    string // complete, malformed, aborted
		body     string
		reason   string // a substring of the malformed reason
	}{
		{"get", "GET /a HTTP/1.1\r\n" + h + "\r\n", "complete", "", ""},
		{"cl", "POST /a HTTP/1.1\r\n" + h + "Content-Length: 5\r\n\r\nhello", "complete", "hello", ""},
		{"chunked", "POST /a HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n5;a=\"b c\"\r\nhello\r\n1 ; x = y\r\n!\r\n0\r\nT: 1\r\n\r\n", "complete", "hello!", ""},
		{"chunked-upper", "POST /a HTTP/1.1\r\n" + h + "transfer-encoding: CHUNKED\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n", "complete", "0123456789", ""},
		{"http10-no-host", "GET /a HTTP/1.0\r\n\r\n", "complete", "", ""},
		{"options-star", "OPTIONS * HTTP/1.1\r\n" + h + "\r\n", "complete", "", ""},
		{"absolute", "GET http://x/a HTTP/1.1\r\n" + h + "\r\n", "complete", "", ""},
		{"te-list", "POST /a HTTP/1.1\r\n" + h + "Transfer-Encoding: , chunked,\r\n\r\n0\r\n\r\n", "complete", "", ""},
		{"cl-zeros", "POST /a HTTP/1.1\r\n" + h + "Content-Length: 0000000000000000000005\r\n\r\nhello", "complete", "hello", ""},
		{"obs-text", "GET /a HTTP/1.1\r\n" + h + "X: \xff\r\n\r\n", "complete", "", ""},
		{"cl-te", "POST /a HTTP/1.1\r\n" + h + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "malformed", "", "both"},
		{"te-te", "POST /a HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", "malformed", "", "twice"},
		{"te-x", "POST /a HTTP/1.1\r\n" + h + "Transfer-Encoding: xchunked\r\n\r\n", "malformed", "", "Transfer-Encoding"},
		{"te-10", "POST /a HTTP/1.0\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "malformed", "", "HTTP/1.0"},
		{"cl-cl", "POST /a HTTP/1.1\r\n" + h + "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello", "malformed", "", "twice"},
		{"cl-list", "POST /a HTTP/1.1\r\n" + h + "Content-Length: 5, 5\r\n\r\nhello", "malformed", "", "Content-Length"},
		{"cl-plus", "POST /a HTTP/1.1\r\n" + h + "Content-Length: +5\r\n\r\nhello", "malformed", "", "Content-Length"},
		{"no-host", "GET /a HTTP/1.1\r\n\r\n", "malformed", "", "Host"},
		{"two-hosts", "GET /a HTTP/1.1\r\n" + h + h + "\r\n", "malformed", "", "Host"},
		{"bad-host", "GET /a HTTP/1.1\r\nHost: a b\r\n\r\n", "malformed", "", "Host"},
		{"bare-lf", "GET /a HTTP/1.1\n" + h + "\r\n", "malformed", "", "bare LF"},
		{"bare-cr", "GET /a HTTP/1.1\r\nX: a\rb\r\n" + h + "\r\n", "malformed", "", "bare CR"},
		{"obs-fold", "GET /a HTTP/1.1\r\n" + h + "X: a\r\n b\r\n\r\n", "malformed", "", "obs-fold"},
		{"space-colon", "GET /a HTTP/1.1\r\n" + h + "X : a\r\n\r\n", "malformed", "", "field name"},
		{"nul-value", "GET /a HTTP/1.1\r\n" + h + "X: a\x00\r\n\r\n", "malformed", "", "0x0"},
		{"double-sp", "GET  /a HTTP/1.1\r\n" + h + "\r\n", "malformed", "", "words"},
		{"method", "G(T /a HTTP/1.1\r\n" + h + "\r\n", "malformed", "", "method"},
		{"version", "GET /a HTTP/1.2\r\n" + h + "\r\n", "malformed", "", "version"},
		{"star-get", "GET * HTTP/1.1\r\n" + h + "\r\n", "malformed", "", "*"},
		{"fragment", "GET /a#b HTTP/1.1\r\n" + h + "\r\n", "malformed", "", "fragment"},
		{"leading-crlf", "\r\nGET /a HTTP/1.1\r\n" + h + "\r\n", "malformed", "", "empty line"},
		{"chunk-0x", "POST /a HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n", "malformed", "", "chunk line"},
		{"chunk-no-crlf", "POST /a HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n5\r\nhelloX0\r\n\r\n", "malformed", "", "CRLF after"},
		{"chunk-overflow", "POST /a HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n10000000000000005\r\nhello\r\n0\r\n\r\n", "malformed", "", "digits"},
		{"chunk-bad-trailer", "POST /a HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n0\r\nX Y: 1\r\n\r\n", "malformed", "", "trailer"},
		{"cl-eof", "POST /a HTTP/1.1\r\n" + h + "Content-Length: 10\r\n\r\nhello", "aborted", "", ""},
		{"chunk-eof", "POST /a HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", "aborted", "", ""},
		{"head-eof", "GET /a HTTP/1.1\r\n" + h, "aborted", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := ReadRequest(bufio.NewReader(strings.NewReader(tt.in)), nil)
			if req == nil {
				t.Fatalf("no request, err %v", err)
			}
			var m *MalformedError
			state := "complete"
			switch {
			case errors.As(err, &m):
				state = "malformed"
				if !strings.Contains(m.Reason, tt.reason) {
					t.Errorf("reason %q, want it to contain %q", m.Reason, tt.reason)
				}
			case err != nil:
				state = "aborted"
			}
			if state != tt.state {
				t.Fatalf("state %s (err %v), want %s", state, err, tt.state)
			}
			if state == "complete" && string(req.Body) != tt.body {
				t.Errorf("body %q, want %q", req.Body, tt.body)
			}
		})
	}
}

func TestParseChunkLine(t *testing.T) {
	tests := []struct {
		in   string
		size int64
		ok   bool
	}{
		{"5", 5, true}, {"a", 10, true}, {"00ff", 255, true}, {"5;a", 5, true}, {"5;a=b;c=\"d;e\"", 5, true},
		{"5 ; a = b", 5, true}, {"5\t;a=b", 5, true}, {`5;a="x\"y"`, 5, true},
		{"", 0, false}, {"x", 0, false}, {"+5", 0, false}, {" 5", 0, false}, {"5 ", 0, false}, {"5;", 0, false},
		{"5;=b", 0, false}, {"5;a=", 0, false}, {`5;a="b`, 0, false}, {"5_0", 0, false}, {"5 5", 0, false},
		{"1000000000000000", 0, false},
	}
	for _, tt := range tests {
		size, err := parseChunkLine([]byte(tt.in))
		if (err == nil) != tt.ok || tt.ok && size != tt.size {
			t.Errorf("parseChunkLine(%q) = %d, %v; want %d ok=%v", tt.in, size, err, tt.size, tt.ok)
		}
	}
}

func TestParseResponse(t *testing.T) {
	tests := []struct {
		name, in      string
		atEOF, noBody bool
		status, n     int
		garbage       bool
	}{
		{"cl", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1", false, false, 200, 40, false},
		{"cl-short", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok", false, false, 0, 0, false},
		{"chunked", "HTTP/1.1 400 Bad\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", false, false, 400, 60, false},
		{"continue", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200", false, false, 100, 25, false},
		{"head", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", false, true, 200, 38, false},
		{"to-close", "HTTP/1.0 400 Bad\r\n\r\nbad request", true, false, 400, 31, false},
		{"to-close-open", "HTTP/1.0 400 Bad\r\n\r\nbad request", false, false, 0, 0, false},
		{"partial", "HTTP/1.", false, false, 0, 0, false},
		{"http09", "ok", false, false, 0, 0, true},
		{"garbage", "<html>hello</html>", false, false, 0, 0, true},
	}
	for _, tt := range tests {
		status, n, err := parseResponse([]byte(tt.in), tt.atEOF, tt.noBody)
		if (err != nil) != tt.garbage || status != tt.status || n != tt.n {
			t.Errorf("%s: got %d, %d, %v; want %d, %d, garbage=%v", tt.name, status, n, err, tt.status, tt.n, tt.garbage)
		}
	}
}

func TestScore(t *testing.T) {
	key := "t.case"
	p := PathsFor(key)
	ok := func(body string) Record {
		return Record{State: "complete", Kind: "conf", Keys: []string{key}, Body: body}
	}
	smuggled := Record{State: "complete", Kind: "smuggled", Keys: []string{key}}
	bad := Record{State: "malformed", Reason: "both Content-Length and Transfer-Encoding", Keys: []string{key}}
	aborted := Record{State: "aborted", Keys: []string{key}}
	other := Record{State: "complete", Kind: "conf", Keys: []string{"t.other"}}
	refuse := &Case{Expect: MustRefuse}
	accept := &Case{Expect: MustAccept, Bodies: []string{"hello"}}
	accept2 := &Case{Expect: MustAccept, Bodies: []string{"hello", ""}}
	norm := &Case{Expect: RefuseOrNormalize, Bodies: []string{"{SR}"}, MustClose: true}
	tests := []struct {
		name string
		c    *Case
		res  Result
		recs []Record
		pass bool
		why  string
	}{
		{"refuse-400", refuse, Result{Statuses: []int{400}, Closed: true}, []Record{other}, true, ""},
		{"refuse-close", refuse, Result{Closed: true}, nil, true, ""},
		{"refuse-400-aborted-upstream", refuse, Result{Statuses: []int{400}}, []Record{aborted}, true, ""},
		{"refuse-but-200", refuse, Result{Statuses: []int{200}}, nil, false, "answered 200"},
		{"refuse-but-forwarded", refuse, Result{Statuses: []int{502}}, []Record{ok("")}, false, "forwarded"},
		{"refuse-but-malformed", refuse, Result{Statuses: []int{502}}, []Record{bad}, false, "malformed"},
		{"refuse-hang", refuse, Result{Hung: true}, nil, false, "hang"},
		{"refuse-smuggled", refuse, Result{Statuses: []int{400}}, []Record{smuggled}, false, "smuggled"},
		{"refuse-two-answers", refuse, Result{Statuses: []int{400, 400}}, nil, false, "2 answers"},
		{"accept", accept, Result{Statuses: []int{200}}, []Record{ok("hello")}, true, ""},
		{"accept-wrong-body", accept, Result{Statuses: []int{200}}, []Record{ok("hell")}, false, "body differs"},
		{"accept-refused", accept, Result{Statuses: []int{400}, Closed: true}, nil, false, "answered 400"},
		{"accept-not-forwarded", accept, Result{Statuses: []int{200}}, nil, false, "upstream saw 0"},
		{"accept-pipeline", accept2, Result{Statuses: []int{200, 200}}, []Record{ok(""), ok("hello")}, true, ""},
		{"accept-pipeline-one", accept2, Result{Statuses: []int{200}, Hung: true}, []Record{ok("hello")}, false, "hang"},
		{"accept-garbage", accept, Result{Garbage: `"ok"`}, []Record{ok("hello")}, false, "not HTTP/1"},
		{"norm-refused", norm, Result{Statuses: []int{400}, Closed: true}, nil, true, ""},
		{"norm-forwarded", norm, Result{Statuses: []int{200}, Closed: true}, []Record{ok(p.Expand("{SR}"))}, true, ""},
		{"norm-kept-open", norm, Result{Statuses: []int{200}}, []Record{ok(p.Expand("{SR}"))}, false, "MUST close"},
		{"norm-malformed", norm, Result{Statuses: []int{502}, Closed: true}, []Record{bad}, false, "malformed"},
		{"norm-smuggled", norm, Result{Statuses: []int{200}, Closed: true}, []Record{ok(""), smuggled}, false, "smuggled"},
		{"norm-wrong-body", norm, Result{Statuses: []int{200}, Closed: true}, []Record{ok("")}, false, "body differs"},
	}
	for _, tt := range tests {
		v := Score(tt.c, key, tt.res, tt.recs)
		if v.Pass == nil || *v.Pass != tt.pass || !strings.Contains(v.Why, tt.why) {
			t.Errorf("%s: pass %v why %q; want %v, %q", tt.name, v.Pass != nil && *v.Pass, v.Why, tt.pass, tt.why)
		}
	}
	if v := Score(&Case{Expect: Info}, key, Result{Statuses: []int{200}}, []Record{ok("")}); v.Pass != nil {
		t.Errorf("an info case was scored")
	}
}

func TestCasesWellFormed(t *testing.T) {
	ids := map[string]bool{}
	cs, err := Cases("")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) < 150 || len(cs) > 250 {
		t.Errorf("%d cases, want 150-250", len(cs))
	}
	idRE := regexp.MustCompile(`^[a-z0-9.-]+$`)
	p := PathsFor("x.y")
	for _, c := range cs {
		if ids[c.ID] || !idRE.MatchString(c.ID) {
			t.Errorf("case id %q: repeated or not [a-z0-9.-]", c.ID)
		}
		ids[c.ID] = true
		raw := p.Expand(c.Raw)
		if strings.Contains(raw, "{") && strings.ContainsAny(raw, "}") && regexp.MustCompile(`\{[A-Z]+\}`).MatchString(raw) {
			t.Errorf("%s: a placeholder left in %q", c.ID, raw[:min(80, len(raw))])
		}
		if !strings.Contains(raw, p.P) && !strings.Contains(raw, "x/t/acme/conf/x.y") {
			t.Errorf("%s: the case path is not in the request", c.ID)
		}
		if c.Category == "" || c.What == "" || c.Expect == "" {
			t.Errorf("%s: category, what or expect missing", c.ID)
		}
	}
	// The {CL} a case writes is its body's length.
	got := p.Expand("POST {P} HTTP/1.1\r\nContent-Length: {CL}\r\n\r\nhello")
	if !strings.Contains(got, "Content-Length: 5\r\n") {
		t.Errorf("{CL}: %q", got)
	}
	got = p.Expand("POST {P} HTTP/1.1\r\nContent-Length: {CL}\r\nT: c\n\r\n0\r\n\r\nab")
	if !strings.Contains(got, "Content-Length: 7\r\n") {
		t.Errorf("{CL} after a bare-LF line: %q", got)
	}
}

// pipe is a net/http-free pass-through: it copies bytes both ways, one upstream connection
// per client connection, as the dumbest possible proxy.
func pipe(t *testing.T, upstream string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() {
				defer wg.Done()
				io.Copy(u, c)
				u.(*net.TCPConn).CloseWrite()
			}()
			go func() {
				defer wg.Done()
				io.Copy(c, u)
				c.Close()
				u.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

func TestEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	u, err := StartUpstream("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	addr := pipe(t, u.Addr())
	smuggle := &Case{ID: "x-smuggle", Category: "x", Expect: MustAccept, What: "GET then a pipelined smuggled path", Raw: "GET {P} HTTP/1.1\r\nHost: a\r\n\r\n{SR}"}
	cases, err := Cases(`^(v-get|v-head|v-post-chunked|v-pipeline-post-get|v-expect-100|v-connection-close|te-plain-clte|ho-missing)$`)
	if cases = append(cases, smuggle); err != nil || len(cases) != 9 {
		t.Fatalf("%d cases, %v", len(cases), err)
	}
	outs, err := Run(ctx, []string{"pipe"}, map[string]string{"pipe": addr}, cases, u)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // case: "" to pass, else a substring of why it fails
		"v-get": "", "v-head": "", "v-post-chunked": "", "v-pipeline-post-get": "", "v-expect-100": "", "v-connection-close": "",
		"te-plain-clte": "malformed framing", "ho-missing": "malformed framing", "x-smuggle": "smuggled",
	}
	for _, o := range outs {
		v := o.Results["pipe"]
		w := want[o.Case.ID]
		if v.Pass == nil || *v.Pass != (w == "") || !strings.Contains(v.Why, w) {
			t.Errorf("%s: %s — %s; want pass=%v %q", o.Case.ID, v.Did, v.Why, w == "", w)
		}
	}
	if o := outs[4]; o.Case.ID != "v-expect-100" || o.Client["pipe"].Interim != 1 {
		t.Errorf("v-expect-100: %+v, want one 100 Continue", o.Client["pipe"])
	}
	s := Summary(outs, []string{"pipe"})
	if !strings.Contains(s, "scored 9 cases: pipe 6") {
		t.Errorf("summary:\n%s", s)
	}
	if pc := PerCase(outs, []string{"pipe"}); !strings.Contains(pc, "| v-get | must-accept |") {
		t.Errorf("per-case table:\n%s", pc)
	}
}

// A line of cases.txt: quoted fields with spaces and escapes, repeated bodies, flags, and the
// repeats expanded innermost first; a field it does not know is an error.
func TestParseCase(t *testing.T) {
	c, err := parseCase(`x-1 misc refuse-or-normalize what="two words" raw="GET {P}\x00 {R:2:a{R:3:b}}" body="" body="{F:2}" half nobody close watch=X_A ref="RFC 1"`)
	if err != nil {
		t.Fatal(err)
	}
	want := &Case{ID: "x-1", Category: "misc", Expect: RefuseOrNormalize, What: "two words", Raw: "GET {P}\x00 abbbabbb",
		Bodies: []string{"", "X-F0: v0\r\nX-F1: v1\r\n"}, HalfClose: true, NoBody: true, MustClose: true, Watch: "X_A", Ref: "RFC 1"}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("parseCase:\n got %+v\nwant %+v", c, want)
	}
	if _, err := parseCase(`x-2 misc info what="a" colour="red"`); err == nil {
		t.Error("an unknown field: want an error")
	}
}
