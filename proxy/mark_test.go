package proxy

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// TestClientMark checks the mark against the contract's definition computed
// here independently: first 16 bytes of HMAC-SHA256(token, "fenec-client
// <address> <unix-seconds>"), base64url without padding.
func TestClientMark(t *testing.T) {
	m := newClientMarker("entry-token-1")
	for _, addr := range []string{"203.0.113.7", "2001:db8::1", "::1"} {
		got := m.mark(addr, 1700000000)
		mac := hmac.New(sha256.New, []byte("entry-token-1"))
		fmt.Fprintf(mac, "fenec-client %s %d", addr, 1700000000)
		want := fmt.Sprintf("%s %d %s", addr, 1700000000, base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:16]))
		if got != want {
			t.Errorf("mark(%s) = %q, want %q", addr, got, want)
		}
		if strings.ContainsAny(got, "[]=") {
			t.Errorf("mark(%s) = %q has brackets or padding", addr, got)
		}
	}
	if a, b := m.mark("1.2.3.4", 1), newClientMarker("other").mark("1.2.3.4", 1); a == b {
		t.Error("two tokens make the same mark")
	}
}
