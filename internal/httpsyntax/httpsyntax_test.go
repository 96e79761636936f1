package httpsyntax

import (
	"net/http"
	"net/textproto"
	"reflect"
	"testing"
)

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
