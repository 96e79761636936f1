package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// TestCleanStopLogsNothingAboveInfo: two entries joined in one cluster, with a state
// directory, after reads, a keyed write and an event stream still open, are stopped with
// SIGTERM one after the other. A clean stop is not an incident: neither entry logs a line
// above info on the way down (an alert on every deploy is how alerts stop being read).
func TestCleanStopLogsNothingAboveInfo(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	a, b := startPair(t, true)

	// Traffic through both: reads (one relayed), a keyed write, a stream left open.
	client := &http.Client{Timeout: 5 * time.Second}
	for _, e := range []*clusterEntry{a, b} {
		for _, path := range []string{"/t/acme/items/1", "/t/globex/items/1"} {
			if status, _, body := httpGet(t, "http://"+e.client+path); status >= 500 {
				t.Fatalf("GET %s at %s: %d %s", path, e.client, status, body)
			}
		}
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+e.client+"/t/acme/items", strings.NewReader(`{"n":1}`))
		req.Header.Set("Idempotency-Key", "stop-"+e.client)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("keyed write at %s: %d", e.client, resp.StatusCode)
		}
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+b.client+"/t/acme/events", nil)
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != 200 {
		t.Fatalf("event stream: %d", stream.StatusCode)
	}
	streamEnded := make(chan struct{})
	go func() {
		defer close(streamEnded)
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
		}
	}()

	// B first (its stream open), then A, which has seen B leave.
	b.stop(t)
	select {
	case <-streamEnded:
	case <-ctx.Done():
		t.Fatal("the event stream was not ended by the stop")
	}
	testutil.Eventually(t, 5*time.Second, "A sees B left", func() bool { return a.status(t).memberState("b") == "left" })
	a.stop(t)

	for name, e := range map[string]*clusterEntry{"a": a, "b": b} {
		lines := e.stderr()
		stopped := false
		for _, l := range lines {
			var line struct {
				Level   string `json:"level"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Errorf("%s: a stderr line that is not a JSON log line: %q", name, l)
				continue
			}
			switch line.Level {
			case "debug", "info":
			default:
				t.Errorf("%s logged at %s during a clean run and stop: %s", name, line.Level, l)
			}
			stopped = stopped || line.Message == "entry stopped"
		}
		if !stopped {
			t.Errorf("%s: no \"entry stopped\" line; the check read %d lines:\n%s", name, len(lines), strings.Join(lines, "\n"))
		}
	}
}

// TestStopRefusesNewConnections: once a drain stops listening, a new connection is refused at
// once, while the entry still finishes what it holds (an event stream keeps it in its grace):
// a client or load balancer then tries another PoP instead of waiting in a backlog no one
// accepts from (the copies of the listening sockets kept for upgrades in place are closed too).
func TestStopRefusesNewConnections(t *testing.T) {
	_, routers := twoRegions(t)
	e := startEntry(t, []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--pop", "p",
		"--continent", "EU", "--routers", routers, "--drain", "300ms"}, cleanEnv())
	client, _ := e.started(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+client+"/t/acme/events", nil)
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the drain's stopped listening line", func() bool {
		for _, l := range e.stderr() {
			if strings.Contains(l, `"message":"stopped listening; waiting for open requests"`) {
				return true
			}
		}
		return false
	})
	testutil.EventuallyEvery(t, 2*time.Second, 10*time.Millisecond, "a new connection refused", func() bool {
		c, err := net.DialTimeout("tcp", client, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return false
		}
		return errors.Is(err, syscall.ECONNREFUSED)
	})
	select {
	case <-e.waited:
		t.Fatal("the entry exited before the check: the stream should have kept it in its grace")
	default:
	}
}

// TestTwoStoppedAtOnceLogNothingAboveInfo: two entries of one cluster stopped by the same
// SIGTERM (a deploy, a host's shutdown) each leave with no one left to tell; a leave that
// times out so is no warning: neither logs a line above info, and both exit 0.
func TestTwoStoppedAtOnceLogNothingAboveInfo(t *testing.T) {
	a, b := startPair(t, false)
	for _, e := range []*clusterEntry{a, b} {
		if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for name, e := range map[string]*clusterEntry{"a": a, "b": b} {
		if status := e.exitStatus(t, 20*time.Second); status != 0 {
			t.Errorf("%s: exit status %d after SIGTERM, want 0", name, status)
		}
		for _, l := range e.stderr() {
			var line struct {
				Level string `json:"level"`
			}
			if json.Unmarshal([]byte(l), &line) != nil || (line.Level != "debug" && line.Level != "info") {
				t.Errorf("%s: a line above info (or not JSON) in a clean stop of both: %s", name, l)
			}
		}
	}
}

// startPair starts entries a and b in one gossip cluster (b joins a), each with a --state-dir
// of its own if withState, and waits until both are ready and see each other alive.
func startPair(t *testing.T, withState bool) (a, b *clusterEntry) {
	t.Helper()
	_, routers := twoRegions(t)
	start := func(name, join string) *clusterEntry {
		args := []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
			"--gossip-bind", "127.0.0.1:0", "--rpc-addr", "127.0.0.1:0", "--node", name, "--pop", name,
			"--continent", "EU", "--routers", routers, "--drain", "300ms"}
		if withState {
			args = append(args, "--state-dir", t.TempDir())
		}
		if join != "" {
			args = append(args, "--join", join)
		}
		return startClusterEntry(t, args, cleanEnv("FENEC_ENTRY_GOSSIP_KEY="+testGossipKey))
	}
	a = start("a", "")
	b = start("b", a.gossip)
	for _, e := range []*clusterEntry{a, b} {
		testutil.Eventually(t, 10*time.Second, "two alive members and ready", func() bool {
			s := e.status(t)
			return s.Ready && s.memberState("a") == "alive" && s.memberState("b") == "alive"
		})
	}
	return a, b
}
