package main

import (
	"fmt"
	"strconv"
	"strings"
)

// Expect is what a case requires of a target.
type Expect string

const (
	// MustRefuse: a 4xx/5xx answer or a close without answer, and nothing of the case
	// reaches the upstream.
	MustRefuse Expect = "must-refuse"
	// MustAccept: exactly the request(s) the client framed reach the upstream, with their
	// bodies, and each is answered 2xx.
	MustAccept Expect = "must-accept"
	// RefuseOrNormalize: refused as above, or forwarded as exactly the request(s) the client
	// framed, well framed, with the bodies the client framed.
	RefuseOrNormalize Expect = "refuse-or-normalize"
	// Info: reported, not scored.
	Info Expect = "info"
)

// Case is one request (or a few) sent on a fresh connection.
type Case struct {
	ID       string
	Category string
	What     string // what it sends, in short
	Expect   Expect
	Ref      string // where the requirement or the attack comes from
	// Raw is the bytes sent. Placeholders: {P} the case's path, {S} its smuggled path,
	// {SR} a complete request for {S}, {SRX} the length of {SR} in hex, {TECL} the length
	// of "{SRX}\r\n", {CL} the length of everything after the first "\r\n\r\n".
	Raw       string
	Then      string   // sent after 100 Continue, or after 1 s without it
	HalfClose bool     // shut the write side once everything is sent
	Requests  int      // requests the client framed (default 1)
	Bodies    []string // the bodies the upstream must see, placeholders as Raw (default: empty)
	NoBody    bool     // answers carry no body (HEAD)
	MustClose bool     // a 2xx answer must be followed by the target closing the connection
	Watch     string   // a header name: report whether the upstream saw it
}

func (c *Case) requests() int { return max(1, c.Requests) }

// Paths are the case's attributable paths.
type Paths struct{ P, S string }

// PathsFor is the paths of case key (target.caseid).
func PathsFor(key string) Paths {
	return Paths{P: "/t/acme/conf/" + key, S: "/t/acme/smuggled/" + key}
}

// Expand fills the placeholders of a template.
func (p Paths) Expand(s string) string {
	sr := "GET " + p.S + " HTTP/1.1\r\nHost: localhost\r\n\r\n"
	srx := strconv.FormatInt(int64(len(sr)), 16)
	s = strings.NewReplacer("{P}", p.P, "{SRX}", srx, "{SR}", sr, "{S}", p.S,
		"{TECL}", strconv.Itoa(len(srx)+2)).Replace(s)
	return strings.Replace(s, "{CL}", strconv.Itoa(len(s)-bodyStart(s)), 1)
}

// bodyStart is where the body starts: after the first empty line (LF or CRLF ended).
func bodyStart(s string) int {
	i := strings.IndexByte(s, '\n') + 1
	for i > 0 && i < len(s) {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			break
		}
		if line := s[i : i+j]; line == "" || line == "\r" {
			return i + j + 1
		}
		i += j + 1
	}
	return len(s)
}

const host = "Host: localhost\r\n"

// Builders of common requests. extra is header lines, each ending in \r\n.
func get(extra string) string { return "GET {P} HTTP/1.1\r\n" + host + extra + "\r\n" }
func post(extra, body string) string {
	return "POST {P} HTTP/1.1\r\n" + host + extra + "Content-Length: {CL}\r\n\r\n" + body
}
func postTE(extra, body string) string {
	return "POST {P} HTTP/1.1\r\n" + host + extra + "Transfer-Encoding: chunked\r\n\r\n" + body
}

const hello = "5\r\nhello\r\n0\r\n\r\n"

// Cases is the whole list, in report order.
func Cases() []*Case {
	var cs []*Case
	add := func(c *Case) { cs = append(cs, c) }
	cat := ""
	a := func(id string, e Expect, what, raw string, opts ...func(*Case)) {
		c := &Case{ID: id, Category: cat, Expect: e, What: what, Raw: raw}
		for _, o := range opts {
			o(c)
		}
		add(c)
	}
	body := func(b ...string) func(*Case) { return func(c *Case) { c.Bodies = b; c.Requests = len(b) } }
	ref := func(r string) func(*Case) { return func(c *Case) { c.Ref = r } }
	closes := func(c *Case) { c.MustClose = true }
	half := func(c *Case) { c.HalfClose = true }
	watch := func(h string) func(*Case) { return func(c *Case) { c.Watch = h } }

	// ---- valid: plainly valid requests that must be forwarded ----
	cat = "valid"
	a("v-get", MustAccept, "GET", get(""))
	a("v-head", MustAccept, "HEAD", "HEAD {P} HTTP/1.1\r\n"+host+"\r\n", func(c *Case) { c.NoBody = true })
	a("v-get-query", MustAccept, "GET with a query", "GET {P}?a=1&b=%20x HTTP/1.1\r\n"+host+"\r\n")
	a("v-post-cl", MustAccept, "POST CL: 5 hello", post("", "hello"), body("hello"))
	a("v-post-cl0", MustAccept, "POST CL: 0", post("", ""), body(""))
	a("v-options-path", MustAccept, "OPTIONS /path", strings.Replace(get(""), "GET", "OPTIONS", 1))
	a("v-post-chunked", MustAccept, "POST chunked hello", postTE("", hello), body("hello"))
	a("v-chunked-multi", MustAccept, "chunked in 3 chunks", postTE("", "5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n"), body("hello world"))
	a("v-chunked-upper-hex", MustAccept, "chunk size B", postTE("", "B\r\nhello world\r\n0\r\n\r\n"), body("hello world"))
	a("v-chunked-leading-zeros", MustAccept, "chunk size 005, last 000", postTE("", "005\r\nhello\r\n000\r\n\r\n"), body("hello"))
	a("v-chunked-ext", MustAccept, "chunk ext 5;a=b", postTE("", "5;a=b\r\nhello\r\n0\r\n\r\n"), body("hello"), ref("RFC 9112 7.1.1"))
	a("v-chunked-ext-quoted", MustAccept, `chunk ext 5;a="b c"`, postTE("", "5;a=\"b c\"\r\nhello\r\n0\r\n\r\n"), body("hello"), ref("RFC 9112 7.1.1"))
	a("v-chunked-ext-name-only", MustAccept, "chunk ext 5;a", postTE("", "5;a\r\nhello\r\n0\r\n\r\n"), body("hello"), ref("RFC 9112 7.1.1"))
	a("v-chunked-ext-last", MustAccept, "last chunk 0;x=y", postTE("", "5\r\nhello\r\n0;x=y\r\n\r\n"), body("hello"), ref("RFC 9112 7.1.1"))
	a("v-chunked-trailer", MustAccept, "chunked with a trailer", postTE("", "5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n"), body("hello"), ref("RFC 9112 7.1.2"))
	a("v-pipeline-get-get", MustAccept, "two pipelined GETs", "GET {P}?n=1 HTTP/1.1\r\n"+host+"\r\nGET {P}?n=2 HTTP/1.1\r\n"+host+"\r\n", body("", ""), ref("RFC 9112 9.3.2"))
	a("v-pipeline-post-get", MustAccept, "pipelined POST CL then GET", "POST {P}?n=1 HTTP/1.1\r\n"+host+"Content-Length: 5\r\n\r\nhelloGET {P}?n=2 HTTP/1.1\r\n"+host+"\r\n", body("hello", ""), ref("RFC 9112 9.3.2"))
	a("v-pipeline-chunked-get", MustAccept, "pipelined POST chunked then GET", "POST {P}?n=1 HTTP/1.1\r\n"+host+"Transfer-Encoding: chunked\r\n\r\n"+hello+"GET {P}?n=2 HTTP/1.1\r\n"+host+"\r\n", body("hello", ""), ref("RFC 9112 9.3.2"))
	a("v-expect-100", MustAccept, "Expect: 100-continue, body after 100", "POST {P} HTTP/1.1\r\n"+host+"Expect: 100-continue\r\nContent-Length: 5\r\n\r\n", body("hello"), func(c *Case) { c.Then = "hello" }, ref("RFC 9110 10.1.1"))
	a("v-expect-100-eager", MustAccept, "Expect: 100-continue, body at once", post("Expect: 100-continue\r\n", "hello"), body("hello"), ref("RFC 9110 10.1.1"))
	a("v-http10-get", MustAccept, "HTTP/1.0 GET", "GET {P} HTTP/1.0\r\n"+host+"\r\n")
	a("v-http10-post", MustAccept, "HTTP/1.0 POST CL", "POST {P} HTTP/1.0\r\n"+host+"Content-Length: 5\r\n\r\nhello", body("hello"))
	a("v-absolute-form", MustAccept, "GET http://localhost/path", "GET http://localhost{P} HTTP/1.1\r\n"+host+"\r\n", ref("RFC 9112 3.2.2: a server MUST accept the absolute-form"))
	a("v-field-ows", MustAccept, "X-A:b and X-B:   c  ", get("X-A:b\r\nX-B:   c  \r\n"), ref("RFC 9112 5.1"))
	a("v-field-empty-value", MustAccept, "X-A: (empty value)", get("X-A:\r\n"))
	a("v-cl-ows", MustAccept, "Content-Length:   5   (OWS)", "POST {P} HTTP/1.1\r\n"+host+"Content-Length:   5   \r\n\r\nhello", body("hello"))
	a("v-cl-leading-zeros", MustAccept, "Content-Length: 005", "POST {P} HTTP/1.1\r\n"+host+"Content-Length: 005\r\n\r\nhello", body("hello"))
	a("v-connection-close", MustAccept, "GET with Connection: close", get("Connection: close\r\n"), closes)
	a("v-header-4k", MustAccept, "a 4 KiB header value", get("X-Big: "+strings.Repeat("a", 4096)+"\r\n"))
	a("v-body-1m", MustAccept, "POST CL 1 MB", post("", strings.Repeat("0123456789", 100000)), body(strings.Repeat("0123456789", 100000)))
	a("v-chunked-256", MustAccept, "chunked, 256 chunks of 1 KiB", postTE("", strings.Repeat("400\r\n"+strings.Repeat("x", 1024)+"\r\n", 256)+"0\r\n\r\n"), body(strings.Repeat("x", 256<<10)))
	a("v-host-ipv6", MustAccept, "Host: [::1]:80", "GET {P} HTTP/1.1\r\nHost: [::1]:80\r\n\r\n")

	// ---- request line (RFC 9112 section 3) ----
	cat = "request-line"
	rl := func(id string, e Expect, what, line string, opts ...func(*Case)) {
		a(id, e, what, line+"\r\n"+host+"X-Case: {P}\r\n\r\n", opts...)
	}
	r93 := ref("RFC 9112 3")
	rl("rl-method-lower", RefuseOrNormalize, "get (lowercase method)", "get {P} HTTP/1.1", ref("RFC 9110 9.1: methods are case-sensitive"))
	rl("rl-method-unknown", RefuseOrNormalize, "FOO method", "FOO {P} HTTP/1.1", ref("RFC 9110 9.1"))
	for _, m := range []struct{ id, m string }{{"paren", "G(T"}, {"nul", "G\x00T"}, {"del", "G\x7fT"}, {"utf8", "G\xc3\xa9T"}, {"slash", "GE/T"}} {
		rl("rl-method-"+m.id, MustRefuse, fmt.Sprintf("method %q", m.m), m.m+" {P} HTTP/1.1", ref("RFC 9112 3.1: method = token"))
	}
	rl("rl-leading-sp", RefuseOrNormalize, "SP before the method", " GET {P} HTTP/1.1", r93)
	rl("rl-double-sp", RefuseOrNormalize, "GET<SP><SP>/path", "GET  {P} HTTP/1.1", r93)
	rl("rl-tab-sep", RefuseOrNormalize, "TAB as separators", "GET\t{P}\tHTTP/1.1", r93)
	rl("rl-vt-sep", RefuseOrNormalize, "VT as a separator", "GET\x0b{P} HTTP/1.1", r93)
	rl("rl-trailing-sp", RefuseOrNormalize, "SP before the CRLF", "GET {P} HTTP/1.1 ", r93)
	rl("rl-bare-cr-sep", RefuseOrNormalize, "bare CR as a separator", "GET {P}\rHTTP/1.1", ref("RFC 9112 2.2: bare CR invalid or replaced by SP"))
	rl("rl-bare-cr-end", RefuseOrNormalize, "CR CR LF ending", "GET {P} HTTP/1.1\r", ref("RFC 9112 2.2"))
	a("rl-bare-lf-end", RefuseOrNormalize, "request line ends in bare LF", "GET {P} HTTP/1.1\n"+host+"\r\n", ref("RFC 9112 2.2: MAY accept bare LF"))
	a("rl-leading-crlf", RefuseOrNormalize, "CRLF before the request line", "\r\n"+get(""), ref("RFC 9112 2.2: SHOULD ignore a leading CRLF"))
	rl("rl-space-in-target", MustRefuse, "GET /a b HTTP/1.1", "GET {P} x HTTP/1.1", r93)
	rl("rl-nul-in-target", MustRefuse, "NUL in the target", "GET {P}\x00x HTTP/1.1", r93)
	rl("rl-del-in-target", MustRefuse, "DEL in the target", "GET {P}\x7fx HTTP/1.1", r93)
	rl("rl-nonascii-target", RefuseOrNormalize, "0xff in the target", "GET {P}\xff HTTP/1.1", r93)
	rl("rl-fragment", RefuseOrNormalize, "target with #fragment", "GET {P}#f HTTP/1.1", ref("RFC 9112 3.2: no fragment in request-target"))
	rl("rl-no-slash", MustRefuse, "target without the leading /", "GET x{P} HTTP/1.1", ref("RFC 9112 3.2"))
	rl("rl-empty-target", MustRefuse, "GET HTTP/1.1 (no target)", "GET HTTP/1.1", r93)
	rl("rl-star-get", MustRefuse, "GET *", "GET * HTTP/1.1", ref("RFC 9112 3.2.4: * only for OPTIONS"))
	rl("rl-options-star", Info, "OPTIONS *", "OPTIONS * HTTP/1.1", ref("RFC 9112 3.2.4"))
	rl("rl-connect-origin", MustRefuse, "CONNECT /path", "CONNECT {P} HTTP/1.1", ref("RFC 9112 3.2.3: CONNECT takes the authority-form"))
	rl("rl-connect-authority", Info, "CONNECT localhost:80", "CONNECT localhost:80 HTTP/1.1", ref("RFC 9110 9.3.6"))
	rl("rl-absolute-https", RefuseOrNormalize, "GET https://localhost/path", "GET https://localhost{P} HTTP/1.1", ref("RFC 9112 3.2.2"))
	rl("rl-absolute-scheme", RefuseOrNormalize, "GET foo://localhost/path", "GET foo://localhost{P} HTTP/1.1", ref("RFC 9112 3.2.2"))
	rl("rl-absolute-userinfo", RefuseOrNormalize, "GET http://u@localhost/path", "GET http://u@localhost{P} HTTP/1.1", ref("RFC 9110 4.2.4: userinfo SHOULD be an error"))
	rl("rl-version-1.2", RefuseOrNormalize, "HTTP/1.2", "GET {P} HTTP/1.2", ref("RFC 9110 2.5"))
	for _, v := range []struct{ id, v string }{{"2.0", "HTTP/2.0"}, {"01.1", "HTTP/01.1"}, {"1.10", "HTTP/1.10"}, {"lower", "http/1.1"}, {"1.1.1", "HTTP/1.1.1"}, {"suffix", "HTTP/1.1x"}, {"https", "HTTPS/1.1"}} {
		rl("rl-version-"+v.id, MustRefuse, v.v, "GET {P} "+v.v, ref("RFC 9112 2.3: HTTP-version = \"HTTP/\" DIGIT \".\" DIGIT"))
	}
	rl("rl-version-0.9", Info, "HTTP/0.9 with headers", "GET {P} HTTP/0.9", ref("RFC 9112 C.1"))
	a("rl-http09", Info, "GET /path (no version)", "GET {P}\r\n", ref("RFC 9112 C.1"))
	a("rl-head-eof", MustRefuse, "head cut short, then EOF", "GET {P} HTTP/1.1\r\n"+host, half, ref("RFC 9112 8: incomplete message"))

	// ---- header fields (RFC 9112 section 5, RFC 9110 section 5) ----
	cat = "header-syntax"
	hs := func(id string, e Expect, what, lines string, opts ...func(*Case)) {
		a(id, e, what, get(lines), opts...)
	}
	r51 := ref("RFC 9112 5.1: MUST 400 whitespace before the colon")
	r55 := ref("RFC 9110 5.5: CR, LF, NUL in a value: reject or replace with SP")
	rn := ref("RFC 9110 5.1: field-name = token")
	hs("hs-space-before-colon", MustRefuse, "X-A : b", "X-A : b\r\n", r51)
	hs("hs-tab-before-colon", MustRefuse, "X-A<TAB>: b", "X-A\t: b\r\n", r51)
	hs("hs-no-colon", RefuseOrNormalize, "a field line without a colon", "X-A b\r\n", rn)
	hs("hs-empty-name", RefuseOrNormalize, ": b (empty name)", ": b\r\n", rn)
	hs("hs-space-in-name", RefuseOrNormalize, "X A: b", "X A: b\r\n", rn)
	for _, n := range []struct{ id, n string }{{"paren", "X(A"}, {"at", "X@A"}, {"nul", "X\x00A"}, {"utf8", "X\xc3\xa9A"}} {
		hs("hs-name-"+n.id, RefuseOrNormalize, fmt.Sprintf("field name %q", n.n), n.n+": b\r\n", rn)
	}
	a("hs-ws-first-line", RefuseOrNormalize, "whitespace-led line right after the request line", "GET {P} HTTP/1.1\r\n X-A: b\r\n"+host+"\r\n", ref("RFC 9112 2.2: reject or ignore the line"))
	hs("hs-obs-fold", RefuseOrNormalize, "obs-fold X-A: a CRLF SP b", "X-A: a\r\n b\r\n", ref("RFC 9112 5.2: 400 or replace obs-fold with SP"))
	hs("hs-obs-fold-tab", RefuseOrNormalize, "obs-fold with TAB", "X-A: a\r\n\tb\r\n", ref("RFC 9112 5.2"))
	hs("hs-value-nul", RefuseOrNormalize, "NUL in a value", "X-A: a\x00b\r\n", r55)
	hs("hs-value-cr", RefuseOrNormalize, "bare CR in a value", "X-A: a\rb\r\n", r55)
	hs("hs-value-bare-lf", RefuseOrNormalize, "a field line ending in bare LF", "X-A: a\nX-B: b\r\n", ref("RFC 9112 2.2"))
	hs("hs-value-ctl", RefuseOrNormalize, "0x01 in a value", "X-A: a\x01b\r\n", ref("RFC 9110 5.5: field-vchar"))
	hs("hs-value-del", RefuseOrNormalize, "DEL in a value", "X-A: a\x7fb\r\n", ref("RFC 9110 5.5"))
	hs("hs-value-obs-text", RefuseOrNormalize, "0xff in a value (obs-text)", "X-A: a\xffb\r\n", ref("RFC 9110 5.5"))
	a("hs-all-bare-lf", RefuseOrNormalize, "every line ends in bare LF", "GET {P} HTTP/1.1\nHost: localhost\nX-A: b\n\n", ref("RFC 9112 2.2"))
	a("hs-end-bare-lf", RefuseOrNormalize, "head ends CRLF LF", "GET {P} HTTP/1.1\r\n"+host+"\n", ref("RFC 9112 2.2"))
	hs("hs-ws-line-at-end", RefuseOrNormalize, "a line of one SP before the empty line", " \r\n", ref("RFC 9112 5.2"))
	hs("hs-underscore-xff", Info, "X_Forwarded_For: 1.2.3.4 (underscore)", "X_Forwarded_For: 1.2.3.4\r\n", watch("X_Forwarded_For"))

	// ---- Host (RFC 9112 section 3.2) ----
	cat = "host"
	rh := ref("RFC 9112 3.2: MUST 400 a missing, repeated or invalid Host")
	hostReq := func(hostLines string) string { return "GET {P} HTTP/1.1\r\n" + hostLines + "\r\n" }
	a("ho-missing", MustRefuse, "HTTP/1.1 without Host", hostReq(""), rh)
	a("ho-dup-same", MustRefuse, "Host twice, same value", hostReq(host+host), rh)
	a("ho-dup-diff", MustRefuse, "Host twice, different values", hostReq(host+"Host: example.com\r\n"), rh)
	for _, h := range []struct{ id, v string }{{"space", "local host"}, {"slash", "local/host"}, {"userinfo", "u@localhost"}, {"bad-port", "localhost:abc"}, {"ipv6-open", "[::1"}, {"nul", "local\x00host"}} {
		a("ho-"+h.id, MustRefuse, fmt.Sprintf("Host: %q", h.v), hostReq("Host: "+h.v+"\r\n"), rh)
	}
	a("ho-empty", RefuseOrNormalize, "Host: (empty)", hostReq("Host:\r\n"), ref("RFC 9110 7.2: empty Host when no authority"))
	a("ho-comma", RefuseOrNormalize, "Host: a,b", hostReq("Host: a,b\r\n"), ref("RFC 3986 reg-name allows ,"))
	a("ho-empty-port", RefuseOrNormalize, "Host: localhost:", hostReq("Host: localhost:\r\n"), ref("RFC 3986 port = *DIGIT"))
	a("ho-absolute-no-host", MustRefuse, "absolute-form, no Host", "GET http://localhost{P} HTTP/1.1\r\n\r\n", rh)
	a("ho-absolute-other-host", RefuseOrNormalize, "absolute-form, Host differs", "GET http://localhost{P} HTTP/1.1\r\nHost: example.com\r\n\r\n", ref("RFC 9112 3.2.2: Host is replaced by the target's authority"))
	a("ho-http10-no-host", RefuseOrNormalize, "HTTP/1.0 without Host", "GET {P} HTTP/1.0\r\n\r\n", ref("RFC 9112 3.2"))

	// ---- Content-Length (RFC 9112 section 6.3, RFC 9110 section 8.6) ----
	cat = "content-length"
	rcl := ref("RFC 9112 6.3: invalid Content-Length MUST 400 and close")
	clReq := func(lines, body string) string { return "POST {P} HTTP/1.1\r\n" + host + lines + "\r\n" + body }
	for _, v := range []struct{ id, v string }{{"plus", "+5"}, {"minus", "-1"}, {"hex", "0x5"}, {"inner-space", "0 5"}, {"decimal", "5.0"}, {"empty", ""}, {"alpha", "abc"}, {"vt", "\x0b5"}, {"list-diff", "5, 6"}, {"list-empty-elem", "5,"}} {
		a("cl-"+v.id, MustRefuse, fmt.Sprintf("Content-Length: %q", v.v), clReq("Content-Length: "+v.v+"\r\n", "hello"), rcl)
	}
	a("cl-overflow", MustRefuse, "Content-Length: 99999999999999999999", clReq("Content-Length: 99999999999999999999\r\n", "hello"), ref("RFC 9112 6.3: prevent integer overflow"))
	a("cl-overflow-wrap", MustRefuse, "Content-Length: 2^64+5", clReq("Content-Length: 18446744073709551621\r\n", "hello"), ref("RFC 9112 6.3"))
	a("cl-dup-diff", MustRefuse, "Content-Length: 5 and Content-Length: 6 lines", clReq("Content-Length: 5\r\nContent-Length: 6\r\n", "hello"), rcl)
	a("cl-dup-diff-zero", MustRefuse, "Content-Length: 0 and 5 lines", clReq("Content-Length: 0\r\nContent-Length: 5\r\n", "hello"), rcl)
	a("cl-space-before-colon", MustRefuse, "Content-Length : 5", clReq("Content-Length : 5\r\n", "hello"), r51)
	a("cl-list-same", RefuseOrNormalize, "Content-Length: 5, 5", clReq("Content-Length: 5, 5\r\n", "hello"), body("hello"), ref("RFC 9110 8.6: reject or use the one value"))
	a("cl-list-same-nosp", RefuseOrNormalize, "Content-Length: 5,5", clReq("Content-Length: 5,5\r\n", "hello"), body("hello"), ref("RFC 9110 8.6"))
	a("cl-dup-same", RefuseOrNormalize, "Content-Length: 5 twice", clReq("Content-Length: 5\r\nContent-Length: 5\r\n", "hello"), body("hello"), ref("RFC 9110 8.6"))
	a("cl-obs-fold", RefuseOrNormalize, "Content-Length: CRLF SP 5", clReq("Content-Length:\r\n 5\r\n", "hello"), body("hello"), ref("RFC 9112 5.2"))
	a("cl-nul-after", RefuseOrNormalize, "Content-Length: 5<NUL>", clReq("Content-Length: 5\x00\r\n", "hello"), body("hello"), r55)
	a("cl-long-zeros", RefuseOrNormalize, "Content-Length: 0000000000000000000005", clReq("Content-Length: 0000000000000000000005\r\n", "hello"), body("hello"), ref("RFC 9110 8.6: 1*DIGIT"))
	a("cl-underscore", RefuseOrNormalize, "Content_Length: 0 beside Content-Length: 5", clReq("Content_Length: 0\r\nContent-Length: 5\r\n", "hello"), body("hello"), watch("Content_Length"))
	a("cl-underscore-only", RefuseOrNormalize, "Content_Length: 5, no Content-Length, no body", clReq("Content_Length: 5\r\n", ""), body(""), watch("Content_Length"))
	a("cl-get-body", RefuseOrNormalize, "GET with CL: 5 hello", "GET {P} HTTP/1.1\r\n"+host+"Content-Length: 5\r\n\r\nhello", body("hello"), ref("RFC 9110 9.3.1"))
	a("cl-get-smuggle", RefuseOrNormalize, "GET whose CL body is a request (CL.0)", "GET {P} HTTP/1.1\r\n"+host+"Content-Length: {CL}\r\n\r\n{SR}", body("{SR}"), ref("PortSwigger: CL.0 desync"))
	a("cl-head-smuggle", RefuseOrNormalize, "HEAD whose CL body is a request", "HEAD {P} HTTP/1.1\r\n"+host+"Content-Length: {CL}\r\n\r\n{SR}", body("{SR}"), func(c *Case) { c.NoBody = true }, ref("PortSwigger: CL.0 desync"))
	a("cl-short-eof", MustRefuse, "CL: 10 with 5 bytes, then EOF", clReq("Content-Length: 10\r\n", "hello"), half, ref("RFC 9112 8: incomplete message"))
	a("cl-bad-then-request", MustRefuse, "GET with CL: abc, then a request", "GET {P} HTTP/1.1\r\n"+host+"Content-Length: abc\r\n\r\n{SR}", rcl)

	// ---- Transfer-Encoding (RFC 9112 section 6, desync research) ----
	cat = "transfer-encoding"
	type teVariant struct {
		id, lines, kind string // kind: chunked, lenient, invalid, notte
	}
	variants := []teVariant{
		{"plain", "Transfer-Encoding: chunked\r\n", "chunked"},
		{"upper-value", "Transfer-Encoding: CHUNKED\r\n", "chunked"},
		{"lower-name", "transfer-encoding: chunked\r\n", "chunked"},
		{"tab-ows", "Transfer-Encoding:\tchunked\r\n", "chunked"},
		{"no-ows", "Transfer-Encoding:chunked\r\n", "chunked"},
		{"empty-elem", "Transfer-Encoding: , chunked\r\n", "lenient"},
		{"trailing-comma", "Transfer-Encoding: chunked,\r\n", "lenient"},
		{"identity-chunked", "Transfer-Encoding: identity, chunked\r\n", "lenient"},
		{"nul-before", "Transfer-Encoding: \x00chunked\r\n", "lenient"},
		{"cr-after", "Transfer-Encoding: chunked\r\r\n", "lenient"},
		{"obs-fold", "Transfer-Encoding:\r\n chunked\r\n", "lenient"},
		{"dup-chunked", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "lenient"},
		{"bare-lf-before", "X-A: b\nTransfer-Encoding: chunked\r\n", "lenient"},
		{"bare-lf-after", "Transfer-Encoding: chunked\n", "lenient"},
		{"space-colon", "Transfer-Encoding : chunked\r\n", "invalid"},
		{"xchunked", "Transfer-Encoding: xchunked\r\n", "invalid"},
		{"chunked-identity", "Transfer-Encoding: chunked, identity\r\n", "invalid"},
		{"quoted", "Transfer-Encoding: \"chunked\"\r\n", "invalid"},
		{"vt-before", "Transfer-Encoding:\x0bchunked\r\n", "invalid"},
		{"nul-middle", "Transfer-Encoding: chu\x00nked\r\n", "invalid"},
		{"dup-chunked-identity", "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n", "invalid"},
		{"empty", "Transfer-Encoding:\r\n", "invalid"},
		{"identity", "Transfer-Encoding: identity\r\n", "invalid"},
		{"underscore", "Transfer_Encoding: chunked\r\n", "notte"},
	}
	rte := ref("RFC 9112 6.1/6.3; PortSwigger TE.TE obfuscation; defparam/smuggler")
	for _, v := range variants {
		te := "POST {P} HTTP/1.1\r\n" + host + v.lines + "\r\n" + hello
		clte := "POST {P} HTTP/1.1\r\n" + host + "Content-Length: {CL}\r\n" + v.lines + "\r\n0\r\n\r\n{SR}"
		tecl := "POST {P} HTTP/1.1\r\n" + host + "Content-Length: {TECL}\r\n" + v.lines + "\r\n{SRX}\r\n{SR}\r\n0\r\n\r\n"
		show := strings.TrimSuffix(strings.ReplaceAll(v.lines, "\r\n", " "), " ")
		show = strconv.Quote(show)
		switch v.kind {
		case "chunked", "lenient":
			e := MustAccept
			if v.kind == "lenient" {
				e = RefuseOrNormalize
			}
			a("te-"+v.id, e, show+" alone", te, body("hello"), rte)
			a("te-"+v.id+"-clte", RefuseOrNormalize, show+" with CL (CL.TE probe)", clte, body(""), closes, rte)
			if v.id == "plain" || v.id == "obs-fold" || v.id == "dup-chunked" || v.id == "tab-ows" {
				a("te-"+v.id+"-tecl", RefuseOrNormalize, show+" with CL (TE.CL probe)", tecl, body("{SR}"), closes, rte)
			}
		case "invalid":
			a("te-"+v.id, MustRefuse, show+" alone", te, rte)
			a("te-"+v.id+"-clte", MustRefuse, show+" with CL (CL.TE probe)", clte, rte)
		case "notte":
			a("te-"+v.id+"-clte", RefuseOrNormalize, show+" with CL (framed by CL)", clte, body("0\r\n\r\n{SR}"), watch("Transfer_Encoding"), rte)
		}
	}
	a("te-ws-first-line-clte", RefuseOrNormalize, "whitespace-led TE line right after the request line, with CL", "POST {P} HTTP/1.1\r\n Transfer-Encoding: chunked\r\n"+host+"Content-Length: {CL}\r\n\r\n0\r\n\r\n{SR}", body("0\r\n\r\n{SR}"), ref("RFC 9112 2.2: reject or ignore the line"))
	a("te-http10", RefuseOrNormalize, "HTTP/1.0 with TE: chunked", "POST {P} HTTP/1.0\r\n"+host+"Transfer-Encoding: chunked\r\n\r\n"+hello, body("hello"), closes, ref("RFC 9112 6.1: TE on HTTP/1.0 is faulty framing"))
	a("te-http10-clte", RefuseOrNormalize, "HTTP/1.0 with TE and CL (CL.TE probe)", "POST {P} HTTP/1.0\r\n"+host+"Content-Length: {CL}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{SR}", body(""), closes, ref("RFC 9112 6.1"))
	a("te-get", RefuseOrNormalize, "GET with TE: chunked body", "GET {P} HTTP/1.1\r\n"+host+"Transfer-Encoding: chunked\r\n\r\n"+hello, body("hello"), ref("RFC 9110 9.3.1"))
	a("te-connection-te", RefuseOrNormalize, "Connection: Transfer-Encoding with TE: chunked", postTE("Connection: Transfer-Encoding\r\n", hello), body("hello"), ref("hop-by-hop field abuse"))
	a("te-cl-first", RefuseOrNormalize, "TE: chunked before CL (CL.TE probe)", "POST {P} HTTP/1.1\r\n"+host+"Transfer-Encoding: chunked\r\nContent-Length: {CL}\r\n\r\n0\r\n\r\n{SR}", body(""), closes, rte)

	// ---- chunked body (RFC 9112 section 7.1) ----
	cat = "chunked"
	rch := ref("RFC 9112 7.1: chunk = chunk-size [ chunk-ext ] CRLF chunk-data CRLF")
	bad := func(id, what, b string, opts ...func(*Case)) {
		a("ch-"+id, MustRefuse, what, postTE("", b), append([]func(*Case){rch}, opts...)...)
	}
	ron := func(id, what, b, want string) {
		a("ch-"+id, RefuseOrNormalize, what, postTE("", b), body(want), rch)
	}
	bad("size-underscore", "chunk size 5_0", "5_0\r\nhello\r\n0\r\n\r\n")
	bad("size-0x", "chunk size 0x5", "0x5\r\nhello\r\n0\r\n\r\n")
	bad("size-plus", "chunk size +5", "+5\r\nhello\r\n0\r\n\r\n")
	bad("size-minus", "chunk size -5", "-5\r\nhello\r\n0\r\n\r\n")
	bad("size-leading-sp", "chunk size ' 5'", " 5\r\nhello\r\n0\r\n\r\n")
	bad("size-trailing-sp", "chunk size '5 ' (no ext)", "5 \r\nhello\r\n0\r\n\r\n")
	bad("size-two-numbers", "chunk size '5 5'", "5 5\r\nhello\r\n0\r\n\r\n")
	bad("size-empty", "empty chunk-size line", "\r\nhello\r\n0\r\n\r\n")
	bad("size-overflow", "chunk size 2^64+5 (17 hex digits)", "10000000000000005\r\nhello\r\n0\r\n\r\n")
	bad("size-bare-cr", "chunk line ends in bare CR", "5\rhello\r\n0\r\n\r\n")
	bad("ext-empty", "chunk ext '5;'", "5;\r\nhello\r\n0\r\n\r\n")
	bad("ext-unterminated", `chunk ext 5;a="unterminated`, "5;a=\"b\r\nhello\r\n0\r\n\r\n")
	bad("ext-ctl", "chunk ext value with 0x01", "5;a=\x01\r\nhello\r\n0\r\n\r\n")
	bad("data-no-crlf", "no CRLF after the chunk data", "5\r\nhelloX0\r\n\r\n")
	bad("data-longer", "data longer than the size", "3\r\nhello\r\n0\r\n\r\n")
	bad("data-shorter", "data shorter than the size", "8\r\nhello\r\n0\r\n\r\n")
	a("ch-missing-last-eof", MustRefuse, "no last chunk, then EOF", postTE("", "5\r\nhello\r\n"), half, rch)
	a("ch-missing-final-crlf-eof", MustRefuse, "no CRLF after the last chunk, then EOF", postTE("", "5\r\nhello\r\n0\r\n"), half, rch)
	a("ch-trailer-eof", MustRefuse, "trailer section cut short, then EOF", postTE("", "5\r\nhello\r\n0\r\nX-T: 1\r\n"), half, rch)
	ron("size-long-zeros", "chunk size of 25 digits 000...05", "0000000000000000000000005\r\nhello\r\n0\r\n\r\n", "hello")
	ron("ext-bws", "chunk ext '5 ;a=b' (BWS)", "5 ;a=b\r\nhello\r\n0\r\n\r\n", "hello")
	ron("ext-bws-tab", "chunk ext '5<TAB>;a=b'", "5\t;a=b\r\nhello\r\n0\r\n\r\n", "hello")
	ron("ext-bare-lf", "chunk ext line ends in bare LF", "5;a=b\nhello\r\n0\r\n\r\n", "hello")
	ron("size-bare-lf", "chunk size line ends in bare LF", "5\nhello\r\n0\r\n\r\n", "hello")
	ron("data-bare-lf", "chunk data followed by bare LF", "5\r\nhello\n0\r\n\r\n", "hello")
	ron("last-bare-lf", "last chunk and end in bare LF", "5\r\nhello\r\n0\n\n", "hello")
	ron("ext-long", "a 100 KiB chunk extension", "5;a="+strings.Repeat("b", 100<<10)+"\r\nhello\r\n0\r\n\r\n", "hello")
	ron("trailer-no-colon", "trailer line without a colon", "5\r\nhello\r\n0\r\nX-T 1\r\n\r\n", "hello")
	ron("trailer-space-colon", "trailer 'X-T : 1'", "5\r\nhello\r\n0\r\nX-T : 1\r\n\r\n", "hello")
	ron("trailer-obs-fold", "trailer with obs-fold", "5\r\nhello\r\n0\r\nX-T: a\r\n b\r\n\r\n", "hello")
	ron("trailer-nul", "trailer value with NUL", "5\r\nhello\r\n0\r\nX-T: a\x00b\r\n\r\n", "hello")
	ron("trailer-cl", "Content-Length: 50 as a trailer", "5\r\nhello\r\n0\r\nContent-Length: 50\r\n\r\n", "hello")
	ron("trailer-te", "Transfer-Encoding: chunked as a trailer", "5\r\nhello\r\n0\r\nTransfer-Encoding: chunked\r\n\r\n", "hello")

	// ---- limits ----
	cat = "limits"
	rlim := ref("RFC 9112 3: SHOULD support request lines of 8000 octets; RFC 9110 5.4")
	a("li-request-line-8k", RefuseOrNormalize, "an 8000-byte request line", "GET {P}?"+strings.Repeat("a", 7900)+" HTTP/1.1\r\n"+host+"\r\n", rlim)
	a("li-request-line-100k", RefuseOrNormalize, "a 100 KB request line", "GET {P}?"+strings.Repeat("a", 100000)+" HTTP/1.1\r\n"+host+"\r\n", rlim)
	a("li-header-line-20k", RefuseOrNormalize, "a 20 KB header line", get("X-Big: "+strings.Repeat("a", 20000)+"\r\n"), rlim)
	a("li-head-70k", RefuseOrNormalize, "a 70 KB head (70 fields of 1 KB)", get(strings.Repeat("X-Big: "+strings.Repeat("a", 1000)+"\r\n", 70)), rlim)
	a("li-150-fields", RefuseOrNormalize, "150 header fields", get(manyFields(150)), rlim)
	a("li-1000-fields", RefuseOrNormalize, "1000 header fields", get(manyFields(1000)), rlim)

	// ---- methods and hop-by-hop fields ----
	cat = "misc"
	a("mi-trace", RefuseOrNormalize, "TRACE", strings.Replace(get(""), "GET", "TRACE", 1), ref("RFC 9110 9.3.8"))
	a("mi-trace-body", RefuseOrNormalize, "TRACE with a CL body", strings.Replace(post("", "hello"), "POST", "TRACE", 1), body("hello"), ref("RFC 9110 9.3.8: no content in TRACE"))
	a("mi-connection-cl", RefuseOrNormalize, "Connection: Content-Length with CL: 5", post("Connection: Content-Length\r\n", "hello"), body("hello"), ref("hop-by-hop field abuse"))
	a("mi-expect-unknown", RefuseOrNormalize, "Expect: foo with a CL body", post("Expect: foo\r\n", "hello"), body("hello"), ref("RFC 9110 10.1.1: MAY 417"))
	a("mi-expect-get", RefuseOrNormalize, "GET with Expect: 100-continue, no body", get("Expect: 100-continue\r\n"), ref("RFC 9110 10.1.1"))
	a("mi-upgrade-h2c", RefuseOrNormalize, "GET with Upgrade: h2c", get("Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"), ref("h2c smuggling (Bishop Fox)"))
	a("mi-upgrade-ws-body", RefuseOrNormalize, "Upgrade: websocket then a request as bytes", "GET {P} HTTP/1.1\r\n"+host+"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", ref("websocket upgrade smuggling"))
	a("mi-pipeline-bad-first", MustRefuse, "pipelined: CL: -1, then a valid request", "POST {P} HTTP/1.1\r\n"+host+"Content-Length: -1\r\n\r\n{SR}", rcl)
	return cs
}

func manyFields(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "X-F%d: v%d\r\n", i, i)
	}
	return b.String()
}
