//go:build linux

package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRequestsCounted pins what the profile bench (go run ./bench profile) divides by: /_bench/requests answers the
// requests served before it, itself and earlier count queries excluded.
func TestRequestsCounted(t *testing.T) {
	h := newUpstream()
	count := func() string {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/_bench/requests", nil))
		b, _ := io.ReadAll(w.Result().Body)
		return strings.TrimSpace(string(b))
	}
	if got := count(); got != "0" {
		t.Fatalf("before any request: %q, want 0", got)
	}
	for range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/t/acme/items/1", nil))
		if w.Code != http.StatusOK {
			t.Fatalf("a request answered %d", w.Code)
		}
	}
	if got := count(); got != "3" {
		t.Fatalf("after 3 requests: %q, want 3 (count queries not counted)", got)
	}
}
