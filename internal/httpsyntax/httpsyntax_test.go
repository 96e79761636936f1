package httpsyntax

import (
	"net/http"
	"net/textproto"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// rules are the rules of one string, each taken by name in ruleRows. A generic rule is run
// on both a string and a []byte, which must agree.
var rules = map[string]func(t *testing.T, s string) bool{
	"IsTokenByte":      func(t *testing.T, s string) bool { return IsTokenByte(oneByte(t, s)) },
	"IsFieldValueByte": func(t *testing.T, s string) bool { return IsFieldValueByte(oneByte(t, s)) },
	"HexValue": func(t *testing.T, s string) bool {
		_, ok := HexValue(oneByte(t, s))
		return ok
	},
	"Token":           both(Token[string], Token[[]byte]),
	"ValidFieldValue": both(ValidFieldValue[string], ValidFieldValue[[]byte]),
	"ValidHost":       both(ValidHost[string], ValidHost[[]byte]),
	"PlainName":       func(_ *testing.T, s string) bool { return PlainName(s) },
}

func oneByte(t *testing.T, s string) byte {
	if len(s) != 1 {
		t.Fatalf("%q: a byte rule's row must be one byte", s)
	}
	return s[0]
}

func both(s func(string) bool, b func([]byte) bool) func(*testing.T, string) bool {
	return func(t *testing.T, in string) bool {
		got := s(in)
		if b([]byte(in)) != got {
			t.Errorf("%q: %v for a string, %v for its bytes", in, got, !got)
		}
		return got
	}
}

// ruleRows: one row a case of each rule, accepted or refused, with the reason when it is
// refused.
var ruleRows = []struct {
	rule, in string
	want     bool
}{
	{"IsTokenByte", "a", true},
	{"IsTokenByte", "Z", true},
	{"IsTokenByte", "7", true},
	{"IsTokenByte", "!", true},
	{"IsTokenByte", "~", true},
	{"IsTokenByte", "`", true},
	{"IsTokenByte", " ", false},    // a separator
	{"IsTokenByte", ":", false},    // a delimiter
	{"IsTokenByte", "(", false},    // a delimiter
	{"IsTokenByte", "\"", false},   // a delimiter
	{"IsTokenByte", "\x7f", false}, // DEL
	{"IsTokenByte", "\x00", false}, // a control byte
	{"IsTokenByte", "\xe9", false}, // past ASCII

	{"Token", "GET", true},
	{"Token", "M-SEARCH", true},
	{"Token", "X-Forwarded-For", true},
	{"Token", "Fenec_Client", true}, // a token; the proxy drops it for its "_"
	{"Token", "chunked", true},
	{"Token", "", false},     // empty
	{"Token", "X(A)", false}, // a delimiter inside
	{"Token", "X A", false},  // a space inside
	{"Token", "X-A ", false}, // whitespace at the end
	{"Token", "caf\xc3\xa9", false},

	{"IsFieldValueByte", "a", true},
	{"IsFieldValueByte", " ", true},
	{"IsFieldValueByte", "\t", true},
	{"IsFieldValueByte", "\xe9", true}, // obs-text
	{"IsFieldValueByte", "\x00", false},
	{"IsFieldValueByte", "\r", false},
	{"IsFieldValueByte", "\n", false},
	{"IsFieldValueByte", "\x0b", false},
	{"IsFieldValueByte", "\x7f", false},

	{"ValidFieldValue", "", true},
	{"ValidFieldValue", " a\tb ", true},
	{"ValidFieldValue", "caf\xc3\xa9", true},
	{"ValidFieldValue", "a\x00b", false},
	{"ValidFieldValue", "a\rb", false},
	{"ValidFieldValue", "a\nb", false},
	{"ValidFieldValue", "a\x7fb", false},

	{"HexValue", "0", true},
	{"HexValue", "a", true},
	{"HexValue", "F", true},
	{"HexValue", "g", false},
	{"HexValue", "x", false},

	{"ValidHost", "", true}, // empty: HTTP/1.0's, the door refuses it on 1.1
	{"ValidHost", "e", true},
	{"ValidHost", "e.example", true},
	{"ValidHost", "e.example:8080", true},
	{"ValidHost", "192.0.2.1", true},
	{"ValidHost", "192.0.2.1:", true}, // port = *DIGIT
	{"ValidHost", "[2001:db8::1]", true},
	{"ValidHost", "[2001:db8::1]:80", true},
	{"ValidHost", "[::ffff:192.0.2.1]", true},
	{"ValidHost", "a%41b", true},
	{"ValidHost", "a_b~c!$&'()*+,;=", true}, // unreserved and sub-delims
	{"ValidHost", "e:65535", true},
	{"ValidHost", "a b", false},
	{"ValidHost", "a/b", false},
	{"ValidHost", "u@a", false},
	{"ValidHost", "a:abc", false},
	{"ValidHost", "a:1:2", false},
	{"ValidHost", "a:123456", false}, // a port past five digits
	{"ValidHost", ":80", false},      // no host before the colon
	{"ValidHost", "[::1", false},
	{"ValidHost", "[::1]x", false},
	{"ValidHost", "[127.0.0.1]", false}, // IPv4 in brackets
	{"ValidHost", "[fe80::1%25eth0]", false},
	{"ValidHost", "[v1.x]", false}, // IPvFuture
	{"ValidHost", "a]", false},
	{"ValidHost", "a%zz", false},
	{"ValidHost", "a%4", false},
	{"ValidHost", "a%", false},
	{"ValidHost", "caf\xc3\xa9", false},

	{"PlainName", "Host", true},
	{"PlainName", "X-Forwarded-For", true},
	{"PlainName", "1-2", true},
	{"PlainName", "host", false},
	{"PlainName", "X-forwarded-for", false},
	{"PlainName", "X_a", true},
	{"PlainName", "X_A", false}, // textproto makes it X_a
	{"PlainName", "X A", false},
	{"PlainName", "", false},
}

func TestRules(t *testing.T) {
	seen := map[string][2]bool{}
	for _, row := range ruleRows {
		rule, ok := rules[row.rule]
		if !ok {
			t.Fatalf("no rule %s", row.rule)
		}
		if got := rule(t, row.in); got != row.want {
			t.Errorf("%s(%q) = %v, want %v", row.rule, row.in, got, row.want)
		}
		s := seen[row.rule]
		if row.want {
			s[0] = true
		} else {
			s[1] = true
		}
		seen[row.rule] = s
	}
	for name := range rules {
		if s := seen[name]; !s[0] || !s[1] {
			t.Errorf("%s: a row it accepts and one it refuses are both wanted", name)
		}
	}
}

func TestTrimOWS(t *testing.T) {
	for in, want := range map[string]string{"": "", " a b \t": "a b", "\t": "", "a": "a", "\r a": "\r a", "\xc2\xa0a": "\xc2\xa0a"} {
		if got := TrimOWS(in); got != want {
			t.Errorf("TrimOWS(%q) = %q, want %q", in, got, want)
		}
		if got := TrimOWS([]byte(in)); string(got) != want {
			t.Errorf("TrimOWS([]byte(%q)) = %q, want %q", in, got, want)
		}
	}
}

func TestFieldValue(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{" a b \t", "a b", true},
		{"", "", true},
		{"\t", "", true},
		{"caf\xc3\xa9", "caf\xc3\xa9", true},
		{"a\x00b", "", false},
		{"a\rb", "", false},
		{"a\x7fb", "", false},
	} {
		if got, ok := FieldValue(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("FieldValue(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestHexValue(t *testing.T) {
	for c, want := range map[byte]byte{'0': 0, '9': 9, 'a': 10, 'f': 15, 'A': 10, 'F': 15} {
		if got, ok := HexValue(c); !ok || got != want {
			t.Errorf("HexValue(%q) = %d, %v; want %d, true", c, got, ok, want)
		}
	}
}

// The rules of two strings: a list and a token, a string and a prefix.
func TestTokenMatches(t *testing.T) {
	for _, tc := range []struct {
		rule     string
		v, token string
		want     bool
	}{
		{"ListHasToken", "close", "close", true},
		{"ListHasToken", "Keep-Alive, CLOSE", "close", true},
		{"ListHasToken", " ,\tclose\t, ", "close", true},
		{"ListHasToken", "closed", "close", false},
		{"ListHasToken", "0 close", "close", false}, // an element, not a word
		{"ListHasToken", "", "close", false},
		{"ListHasToken", "clo\u017fe", "close", false},           // U+017F folds to s, but not in ASCII
		{"ListHasToken", "\u212aeep-alive", "keep-alive", false}, // U+212A (Kelvin) folds to k
		{"ListHasToken", "close\u00a0", "close", false},          // NBSP is not OWS

		{"LooseToken", "close", "close", true},
		{"LooseToken", "0 Keep-Alive", "keep-alive", true},
		{"LooseToken", "a,close", "close", true},
		{"LooseToken", "\tclose\t", "close", true},
		{"LooseToken", "closed", "close", false},
		{"LooseToken", "xclose", "close", false},
		{"LooseToken", "", "close", false},
		{"LooseToken", "clo\u017fe", "close", false},
		{"LooseToken", "close", "", false},

		{"HasFoldPrefix", "Proxy-Authorization", "proxy-", true},
		{"HasFoldPrefix", "HTTPS://e/", "https://", true},
		{"HasFoldPrefix", "", "", true},
		{"HasFoldPrefix", "Prox", "proxy-", false},
		{"HasFoldPrefix", "Proxy_A", "proxy-", false},
		{"HasFoldPrefix", "\u212af-", "kf-", false},
	} {
		var got bool
		switch tc.rule {
		case "ListHasToken":
			got = ListHasToken(strings.Split(tc.v, "\n"), tc.token)
		case "LooseToken":
			got = LooseToken(tc.v, tc.token)
		case "HasFoldPrefix":
			got = HasFoldPrefix(tc.v, tc.token)
		}
		if got != tc.want {
			t.Errorf("%s(%q, %q) = %v, want %v", tc.rule, tc.v, tc.token, got, tc.want)
		}
	}
	if !ListHasToken([]string{"a", "b, close"}, "close") || ListHasToken(nil, "close") {
		t.Error("ListHasToken does not look through every value")
	}
}

// FuzzHTTPGuts holds each rule to httpguts' where it has the same, on any string; ValidHost is
// stricter, so only what it takes must httpguts take. TrimOWS is held to strings.Trim, and each
// generic rule's []byte form to its string form.
func FuzzHTTPGuts(f *testing.F) {
	for _, row := range ruleRows {
		f.Add(row.in, "close")
	}
	f.Add("keep-alive, Close", "close")
	f.Add("a\nb, close", "close")
	f.Add("clo\u017fe", "clo\u017fe")
	f.Fuzz(func(t *testing.T, a, b string) {
		for i := 0; i < len(a); i++ {
			if got, want := IsTokenByte(a[i]), httpguts.IsTokenRune(rune(a[i])); got != want {
				t.Errorf("IsTokenByte(%q) = %v, httpguts.IsTokenRune %v", a[i], got, want)
			}
		}
		if got, want := Token(a), httpguts.ValidHeaderFieldName(a); got != want || Token([]byte(a)) != got {
			t.Errorf("Token(%q) = %v, httpguts.ValidHeaderFieldName %v", a, got, want)
		}
		if got, want := ValidFieldValue(a), httpguts.ValidHeaderFieldValue(a); got != want || ValidFieldValue([]byte(a)) != got {
			t.Errorf("ValidFieldValue(%q) = %v, httpguts.ValidHeaderFieldValue %v", a, got, want)
		}
		if ValidHost(a) && !httpguts.ValidHostHeader(a) {
			t.Errorf("ValidHost(%q), but httpguts.ValidHostHeader refuses it", a)
		}
		if ValidHost([]byte(a)) != ValidHost(a) {
			t.Errorf("ValidHost(%q): a string and its bytes differ", a)
		}
		values := strings.Split(a, "\n")
		if got, want := ListHasToken(values, b), httpguts.HeaderValuesContainsToken(values, b); got != want {
			t.Errorf("ListHasToken(%q, %q) = %v, httpguts.HeaderValuesContainsToken %v", values, b, got, want)
		}
		if got, want := TrimOWS(a), strings.Trim(a, " \t"); got != want || string(TrimOWS([]byte(a))) != want {
			t.Errorf("TrimOWS(%q) = %q, strings.Trim %q", a, got, want)
		}
	})
}

// A name PlainName takes is one textproto leaves as it is.
func FuzzPlainName(f *testing.F) {
	for _, s := range []string{"Host", "Content-Length", "X-Forwarded-For", "host", "X-a", "Sec-Ch-Ua", "X_A", "X A", "", "-A", "A-", "1-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if PlainName(name) && textproto.CanonicalMIMEHeaderKey(name) != name {
			t.Errorf("PlainName(%q), but textproto makes it %q", name, textproto.CanonicalMIMEHeaderKey(name))
		}
	})
}

// AddValue builds the map textproto would, one backing array for first values.
func TestAddValue(t *testing.T) {
	h := http.Header{}
	strs := make([]string, 3)
	AddValue(h, &strs, "A", "1")
	AddValue(h, &strs, "B", "2")
	AddValue(h, &strs, "A", "3")
	want := http.Header{"A": {"1", "3"}, "B": {"2"}}
	if !reflect.DeepEqual(h, want) || len(strs) != 1 {
		t.Errorf("got %v with %d left, want %v with 1 left", h, len(strs), want)
	}
}

// BenchmarkToken is a header name's check, against httpguts' in the same run.
func BenchmarkToken(b *testing.B) {
	const name = "Access-Control-Request-Headers"
	b.Run("httpsyntax", func(b *testing.B) {
		for b.Loop() {
			if !Token(name) {
				b.Fatal(name)
			}
		}
	})
	b.Run("httpguts", func(b *testing.B) {
		for b.Loop() {
			if !httpguts.ValidHeaderFieldName(name) {
				b.Fatal(name)
			}
		}
	})
}
