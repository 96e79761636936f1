package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// While ConnClose holds (a drain), every answer carries Connection: close and the client's
// connection is closed after it: the routers' answers and the entry's own (an error, the
// health check). Before, it does not.
func TestConnCloseOnEveryAnswer(t *testing.T) {
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Fenec-Shard", "1")
		w.Write([]byte("ok"))
	}))
	defer router.Close()
	var closing atomic.Bool
	srv, _ := entryWith(t, func(c *Config) { c.ConnClose = closing.Load }, router.URL)
	client := &http.Client{Timeout: 5 * time.Second}
	for _, tc := range []struct {
		name, path string
		status     int
	}{
		{"a router's answer", "/t/acme/items/1", 200},
		{"the entry's own error", "/t/" + strings.Repeat("x", 300) + "/items", 400},
		{"the health check", "/_entry/health", 200},
	} {
		for _, drain := range []bool{false, true} {
			closing.Store(drain)
			resp, err := client.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatalf("%s (drain %v): %v", tc.name, drain, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("%s (drain %v): status %d, want %d", tc.name, drain, resp.StatusCode, tc.status)
			}
			if resp.Close != drain {
				t.Errorf("%s (drain %v): Connection: close = %v, want %v", tc.name, drain, resp.Close, drain)
			}
		}
	}
}
