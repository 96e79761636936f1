package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The demo shows what its guide says: a tenant relayed once and then routed straight home,
// the same tenant routed straight home at another PoP (gossip), and it stops cleanly.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nine listeners and three gossip nodes")
	}
	const offset = 20000 // every port below 32768, out of the ephemeral range
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errs lockedBuffer
	done := make(chan error, 1)
	go func() { done <- runDemo(ctx, demoOptions{offset: offset, logs: "warn"}, &out, &errs) }()
	waitFor(t, 20*time.Second, "the demo's guide", func() bool {
		select {
		case err := <-done:
			t.Fatalf("demo stopped: %v\n%s", err, errs.String())
		default:
		}
		return strings.Contains(out.String(), "Ctrl-C stops everything")
	})
	entry := func(i int) string { return "http://127.0.0.1:" + strconv.Itoa(demoEntryBase+offset+i) }
	relayedBy := func(url string) string {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("Standin-Relayed-By")
	}
	if r := relayedBy(entry(1) + "/t/acme/items/1"); r == "" {
		t.Error("first acme request at iad was not relayed")
	}
	if r := relayedBy(entry(1) + "/t/acme/items/1"); r != "" {
		t.Errorf("second acme request at iad relayed by %s, want straight home", r)
	}
	waitFor(t, 3*time.Second, "sin routes acme straight home", func() bool {
		return relayedBy(entry(2)+"/t/acme/items/1") == ""
	})
	for _, want := range []string{"go tool serf members -rpc-addr 127.0.0.1:" + strconv.Itoa(demoRPCBase+offset),
		"/status", "Idempotency-Key"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("guide lacks %q", want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("demo returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("demo did not stop within 15s of Ctrl-C")
	}
}
