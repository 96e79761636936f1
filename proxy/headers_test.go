package proxy

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"testing"

	"github.com/fenec/fenec-entry/internal/httpsyntax"
)

// rewrite writes the head the entry would send for hdr and parses it back as
// the router would.
func rewrite(t testing.TB, hdr http.Header, h outHead) *http.Request {
	t.Helper()
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	writeHead(w, &h, hdr)
	w.Flush()
	req, err := http.ReadRequest(bufio.NewReader(&b))
	if err != nil {
		t.Fatalf("router cannot parse the head: %v\n%s", err, b.String())
	}
	return req
}

func TestHeadersToRouter(t *testing.T) {
	in := http.Header{}
	for k, v := range map[string]string{
		// kept
		"Authorization": "Bearer s3cret", "Idempotency-Key": "k1", "Fenec-Wait": "3",
		"Traceparent": "00-abc-def-01", "Cookie": "a=b", "Accept": "text/event-stream",
		"X-Request-Id": "client-id", "Content-Type": "application/json", "X-Custom": "keep",
		// dropped: hop-by-hop and what Connection names
		"Connection": "keep-alive, X-Hop", "X-Hop": "gone", "Keep-Alive": "timeout=5",
		"Proxy-Authorization": "Basic x", "Proxy-Connection": "keep-alive", "Te": "trailers",
		"Trailer": "X-T", "Transfer-Encoding": "chunked", "Upgrade": "websocket",
		// dropped: routers' own marks, the client's Fenec-Client and Fenec-Home
		"Fenec-Router": "evil", "Fenec-Global": "1", "Fenec-Verified": "1",
		"Fenec-Client": "1.2.3.4 1 forged", "Fenec-Home": "eu",
		// dropped: every way a client names an address
		"X-Forwarded-For": "1.2.3.4", "X-Real-Ip": "1.2.3.4", "Forwarded": "for=1.2.3.4",
		"True-Client-Ip": "1.2.3.4", "Cf-Connecting-Ip": "1.2.3.4", "Cf-Ipcountry": "US",
		"Fly-Client-Ip": "1.2.3.4", "Fly-Region": "ams",
		"Expect": "100-continue",
	} {
		in.Set(k, v)
	}
	req := rewrite(t, in, outHead{method: "POST", uri: "/t/acme/items?x=1", host: "api.example",
		clientMark: "10.0.0.1 1700000000 mark", contentLength: 0})

	for _, k := range []string{"Authorization", "Idempotency-Key", "Fenec-Wait", "Traceparent", "Cookie",
		"Accept", "X-Request-Id", "Content-Type", "X-Custom"} {
		if got, want := req.Header.Get(k), in.Get(k); got != want {
			t.Errorf("%s = %q, want %q kept", k, got, want)
		}
	}
	for _, k := range []string{"Connection", "X-Hop", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection",
		"Te", "Trailer", "Upgrade", "Fenec-Router", "Fenec-Global", "Fenec-Verified",
		"X-Forwarded-For", "X-Real-Ip", "Forwarded", "True-Client-Ip", "Cf-Connecting-Ip", "Cf-Ipcountry",
		"Fly-Client-Ip", "Fly-Region", "Expect"} {
		if v, ok := req.Header[k]; ok {
			t.Errorf("%s reached the router: %q", k, v)
		}
	}
	if len(req.TransferEncoding) != 0 {
		t.Errorf("Transfer-Encoding reached the router: %v", req.TransferEncoding)
	}
	if got := req.Header.Values("Fenec-Home"); len(got) != 1 || got[0] != "1" {
		t.Errorf("Fenec-Home = %q, want exactly [1] (the client's dropped)", got)
	}
	if got := req.Header.Values("Fenec-Client"); len(got) != 1 || got[0] != "10.0.0.1 1700000000 mark" {
		t.Errorf("Fenec-Client = %q, want the entry's only", got)
	}
	if req.Host != "api.example" || req.RequestURI != "/t/acme/items?x=1" || req.Method != "POST" {
		t.Errorf("head = %s %s host %s", req.Method, req.RequestURI, req.Host)
	}
	if req.ContentLength != 0 {
		t.Errorf("POST without body: Content-Length = %d, want 0", req.ContentLength)
	}
}

// Once, the headers the operator named as sources of the client's address or
// country (--client-ip header:NAME, --country-header) reached the router.
func TestStripHeaders(t *testing.T) {
	rows := []struct {
		name  string
		strip []string // as the operator wrote them (Config.StripHeaders)
		in    http.Header
		gone  []string
		kept  []string
	}{
		{"the address header", []string{"X-Client-IP"},
			http.Header{"X-Client-Ip": {"203.0.113.9"}, "Accept": {"*/*"}}, []string{"X-Client-Ip"}, []string{"Accept"}},
		{"the country header", []string{"X-Country"},
			http.Header{"X-Country": {"DE"}}, []string{"X-Country"}, nil},
		{"both, every value", []string{"X-Client-Ip", "X-Country"},
			http.Header{"X-Client-Ip": {"1.2.3.4", "5.6.7.8"}, "X-Country": {"DE", "FR"}}, []string{"X-Client-Ip", "X-Country"}, nil},
		{"named in any case", []string{"x-client-ip"},
			http.Header{"X-Client-Ip": {"1.2.3.4"}}, []string{"X-Client-Ip"}, nil},
		{"a key not canonical", []string{"X-Client-Ip"},
			http.Header{"x-client-ip": {"1.2.3.4"}}, []string{"X-Client-Ip"}, nil},
		{"underscores", []string{"x_client_ip"},
			http.Header{"X_client_ip": {"1.2.3.4"}}, []string{"X_client_ip"}, nil},
		{"a longer name is another header", []string{"X-Country"},
			http.Header{"X-Country-Code": {"DE"}, "X-Countr": {"x"}}, nil, []string{"X-Country-Code", "X-Countr"}},
		{"nothing named", nil,
			http.Header{"X-Client-Ip": {"1.2.3.4"}}, nil, []string{"X-Client-Ip"}},
		{"a fixed one named too", []string{"X-Forwarded-For"},
			http.Header{"X-Forwarded-For": {"1.2.3.4"}, "X-Client-Ip": {"1.2.3.4"}}, []string{"X-Forwarded-For"}, []string{"X-Client-Ip"}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			req := rewrite(t, row.in, outHead{method: "GET", uri: "/t/acme", host: "h", contentLength: -1,
				strip: stripList(row.strip)})
			for _, k := range row.gone {
				if v := req.Header.Values(k); len(v) != 0 {
					t.Errorf("%s reached the router: %q", k, v)
				}
			}
			for _, k := range row.kept {
				if len(req.Header.Values(k)) == 0 {
					t.Errorf("%s did not reach the router", k)
				}
			}
		})
	}
}

func TestStripList(t *testing.T) {
	got := stripList([]string{"x-client-ip", "X-CLIENT-IP", "x-forwarded-for", "cf-ipcountry", "fly-client-ip", "x-country"})
	if want := []string{"X-Client-Ip", "X-Country"}; !slices.Equal(got, want) {
		t.Errorf("stripList = %q, want %q (canonical, once, none dropped anyway)", got, want)
	}
	if got := stripList(nil); got != nil {
		t.Errorf("stripList(nil) = %q", got)
	}
}

func TestRequestIDAddedOnlyWhenAbsent(t *testing.T) {
	req := rewrite(t, http.Header{}, outHead{method: "GET", uri: "/", host: "h", requestID: "gen-1", contentLength: -1})
	if got := req.Header.Values("X-Request-Id"); len(got) != 1 || got[0] != "gen-1" {
		t.Errorf("X-Request-Id = %q, want [gen-1]", got)
	}
	if _, ok := req.Header["Content-Length"]; ok {
		t.Error("GET without body got a Content-Length")
	}
}

func TestHeadersToClient(t *testing.T) {
	src := http.Header{
		"Connection":                   {"close, X-Hop"},
		"X-Hop":                        {"1"},
		"Keep-Alive":                   {"timeout=5"},
		"Transfer-Encoding":            {"chunked"},
		"Upgrade":                      {"h2c"},
		"Fenec-Home":                   {"eu"},
		"Fenec-Verified":               {"1"},
		"Fenec-Shard":                  {"1"},
		"Access-Control-Allow-Origin":  {"https://app.example"},
		"Vary":                         {"Origin"},
		"Set-Cookie":                   {"a=b", "c=d"},
		"Content-Type":                 {"text/event-stream"},
		"Access-Control-Allow-Headers": {"X-A"},
	}
	dst := http.Header{}
	copyAnswerHeader(dst, src)
	for _, k := range []string{"Connection", "X-Hop", "Keep-Alive", "Transfer-Encoding", "Upgrade", "Fenec-Home", "Fenec-Verified"} {
		if _, ok := dst[k]; ok {
			t.Errorf("%s reached the client", k)
		}
	}
	for _, k := range []string{"Fenec-Shard", "Access-Control-Allow-Origin", "Vary", "Set-Cookie", "Content-Type", "Access-Control-Allow-Headers"} {
		if strings.Join(dst[k], "|") != strings.Join(src[k], "|") {
			t.Errorf("%s = %q, want %q as sent", k, dst[k], src[k])
		}
	}
}

// A header Connection names is hop-by-hop (RFC 9110 section 7.6.1), both ways: named in any
// ASCII case, as a list element. Only ASCII letters fold: "X-\u017fecret" (U+017F, which
// strings.EqualFold takes for "s") names no header, as net/http reads it.
func TestConnectionNames(t *testing.T) {
	for _, row := range []struct {
		conn    string
		dropped bool
	}{
		{"X-Secret", true},
		{"close, x-secret", true},
		{" ,X-SECRET\t,", true},
		{"X-Secrets", false},
		{"X-Secret-2", false},
		{"\"X-Secret\"", false},
		{"X-\u017fecret", false},
	} {
		t.Run(row.conn, func(t *testing.T) {
			req := rewrite(t, http.Header{"Connection": {row.conn}, "X-Secret": {"v"}},
				outHead{method: "GET", uri: "/t/a", host: "h", contentLength: -1})
			if _, kept := req.Header["X-Secret"]; kept == row.dropped {
				t.Errorf("to the router: X-Secret kept %v, want %v", kept, !row.dropped)
			}
			dst := http.Header{}
			copyAnswerHeader(dst, http.Header{"Connection": {row.conn}, "X-Secret": {"v"}})
			if _, kept := dst["X-Secret"]; kept == row.dropped {
				t.Errorf("to the client: X-Secret kept %v, want %v", kept, !row.dropped)
			}
		})
	}
}

func TestWriteHeadDoesNotAllocate(t *testing.T) {
	hdr := http.Header{"Accept": {"*/*"}, "User-Agent": {"bench"}, "Connection": {"keep-alive"}}
	w := bufio.NewWriterSize(discard{}, 4096)
	h := outHead{method: "GET", uri: "/t/acme/items/1", host: "h", requestID: "abc-1", contentLength: -1}
	if n := testing.AllocsPerRun(100, func() { writeHead(w, &h, hdr) }); n != 0 {
		t.Errorf("writeHead allocates %v times", n)
	}
	hdr["X-Client-Ip"] = []string{"203.0.113.9"}
	h.strip = stripList([]string{"X-Client-Ip", "X-Country"})
	if n := testing.AllocsPerRun(100, func() { writeHead(w, &h, hdr) }); n != 0 {
		t.Errorf("writeHead with StripHeaders allocates %v times", n)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// FuzzHeaderRewrite: whatever valid header a client sends, the head the entry
// writes parses, carries exactly one Fenec-Home: 1, and none of the headers
// the contract drops, the operator's StripHeaders and names with "_" included.
func FuzzHeaderRewrite(f *testing.F) {
	f.Add("X-Forwarded-For", "1.2.3.4", "Connection", "X-Forwarded-For")
	f.Add("Fenec-Home", "eu", "Keep-Alive", "1")
	f.Add("Cf-Ray", "x", "Connection", "close, Cf-Ray")
	f.Add("Authorization", "Bearer t", "Fly-Client-Ip", "::1")
	f.Add("X-A", "b", "Connection", " , ,X-A,")
	f.Add("x-client-ip", "1.2.3.4", "X-Country", "DE")
	f.Add("Fenec_Client", "1.2.3.4 1 m", "Content_Length", "5")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		hdr := http.Header{}
		for _, kv := range [][2]string{{k1, v1}, {k2, v2}} {
			if !httpsyntax.Token(kv[0]) || !httpsyntax.ValidFieldValue(kv[1]) || httpsyntax.TrimOWS(kv[1]) != kv[1] {
				return // net/http refuses such a request before the handler
			}
			hdr.Add(textproto.CanonicalMIMEHeaderKey(kv[0]), kv[1])
		}
		strip := stripList([]string{"X-Client-Ip", "X-Country"})
		req := rewrite(t, hdr, outHead{method: "GET", uri: "/t/a", host: "h", contentLength: -1, strip: strip})
		if got := req.Header.Values("Fenec-Home"); len(got) != 1 || got[0] != "1" {
			t.Fatalf("Fenec-Home = %q", got)
		}
		for k := range req.Header {
			if k == "Fenec-Home" {
				continue
			}
			if dropToRouter(k) || stripped(strip, k) || strings.Contains(k, "_") {
				t.Fatalf("%s reached the router", k)
			}
			if httpsyntax.ListHasToken(hdr["Connection"], k) {
				t.Fatalf("%s named by Connection reached the router", k)
			}
		}
	})
}
