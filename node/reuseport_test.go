package node

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// served asks addr for a tenant's page on n fresh connections and counts the answers' bodies
// (each node below routes to a router that names it).
func served(t *testing.T, addr string, n int) map[string]int {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	seen := map[string]int{}
	for range n {
		resp, err := c.Get("http://" + addr + "/t/acme/x")
		if err != nil {
			t.Fatalf("GET: %v", err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET: %d %q %v", resp.StatusCode, body, err)
		}
		seen[string(body)]++
	}
	return seen
}

// --reuse-port: two entries listen on one address, the kernel spreads new connections over
// both, and once one closes its listener the other takes every new connection (an entry
// started beside one that drains). An entry without the flag cannot join them.
func TestReusePort(t *testing.T) {
	one := newRouter(t, "eu", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "one") })
	two := newRouter(t, "eu", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "two") })

	cfg1 := testConfig(t, "eu", one.URL)
	cfg1.ReusePort = true
	n1, _ := startNode(t, cfg1)
	addr := n1.ClientAddr().String()

	cfg2 := testConfig(t, "eu", two.URL)
	cfg2.Listen, cfg2.ReusePort, cfg2.Node = addr, true, "entry-test-2"
	n2, _ := startNode(t, cfg2)
	if got := n2.ClientAddr().String(); got != addr {
		t.Fatalf("second entry listens on %s, want %s", got, addr)
	}

	// 64 connections from distinct source ports: all on one listener has odds of 2^-63.
	if seen := served(t, addr, 64); seen["one"] == 0 || seen["two"] == 0 || seen["one"]+seen["two"] != 64 {
		t.Errorf("answers over 64 connections: %v, want both entries to serve some", seen)
	}

	cfg3 := testConfig(t, "eu", two.URL)
	cfg3.Listen, cfg3.Node = addr, "entry-test-3"
	n3, err := New(cfg3, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := n3.Start(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "--listen: listen tcp") {
		t.Errorf("an entry without --reuse-port on the shared address: Start = %v, want a --listen error", err)
	}
	n3.Close()

	n1.Close()
	if seen := served(t, addr, 16); seen["two"] != 16 {
		t.Errorf("after the first entry closed: answers %v, want all 16 from the second", seen)
	}
}
