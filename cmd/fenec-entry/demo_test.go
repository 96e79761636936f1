//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// The demo makes its point by itself: every line of its guide is run as
// printed, one after the other without a pause (as when pasted all at once), by sh and curl,
// and what it prints is what the comment above it says: reads find their item, a home
// learned at iad is used at sin, a broken region is marked (in /status.json) and avoided by
// the next write, and the mark is gone once the region is mended. Then the demo stops cleanly.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nine listeners and three gossip nodes")
	}
	const offset = 20000 // every port below 32768, out of the ephemeral range
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errs testutil.LogBuffer
	done := make(chan error, 1)
	go func() { done <- runDemo(ctx, demoOptions{offset: offset, logs: "warn"}, &out, &errs) }()
	testutil.Eventually(t, 20*time.Second, "the demo's guide", func() bool {
		select {
		case err := <-done:
			t.Fatalf("demo stopped: %v\n%s", err, errs.String())
		default:
		}
		return strings.Contains(out.String(), "Ctrl-C stops everything")
	})
	ports := demoPorts{offset: offset}
	steps := demoSteps(ports)
	guide := out.String()
	for _, st := range steps {
		if !strings.Contains(guide, "\n  "+st.cmd+"\n") {
			t.Errorf("the guide does not print the line of step %s: %q", st.key, st.cmd)
		}
	}
	t.Run("guide lines", func(t *testing.T) { runGuide(t, ports, steps) })

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("demo returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("demo did not stop within 15s of Ctrl-C")
	}
	if !strings.Contains(out.String(), "Ctrl-C again stops at once") {
		t.Error("the demo did not say that a second Ctrl-C stops at once")
	}
	if o := out.String(); !strings.HasSuffix(o, "stopped: the entries drained and the stand-in routers are closed\n") {
		t.Errorf("the demo's last line does not say it stopped: %q", o[max(0, len(o)-200):])
	}
}

// runGuide runs the guide's lines in order and checks each one's output.
func runGuide(t *testing.T, p demoPorts, steps []demoStep) {
	for _, tool := range []string{"sh", "curl", "grep"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("the guide's lines need %s, and CI must run them", tool)
			}
			t.Skipf("the guide's lines need %s (README: a fresh machine has curl)", tool)
		}
	}
	outputs := map[string]string{}
	ran := map[string][2]time.Time{} // when each line started and ended
	for _, st := range steps {
		within := 10 * time.Second
		switch st.key {
		case "events":
			within = 4 * time.Second // runs until stopped: a few ticks, then it is ended
		case "members":
			if _, err := exec.LookPath("go"); err != nil {
				t.Log("no go command: the members line is not run")
				continue
			}
			within = 3 * time.Minute // go tool serf may build the serf CLI first
		}
		start := time.Now()
		got, err := shell(st.cmd, within)
		ran[st.key] = [2]time.Time{start, time.Now()}
		if st.until {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("step %s ended by itself (%v), want it to run until stopped:\n%s", st.key, err, got)
			}
		} else if err != nil {
			t.Fatalf("step %s: %q: %v\n%s", st.key, st.cmd, err, got)
		}
		outputs[st.key] = got
		checkStep(t, p, st.key, got)
	}
	if id := itemID(outputs["keyed"]); id == "" || id != itemID(outputs["replayed"]) {
		t.Errorf("the replayed answer is not the first one:\n%s\n%s", outputs["keyed"], outputs["replayed"])
	}
	checkMendedRead(t, outputs["marked"], outputs["clears"], ran["clears"])
}

var readsUntilPattern = regexp.MustCompile(`"reads_until": "([^"]+)"`)

// checkMendedRead holds the read after the mend to what its comment says: while eu's mark
// still has reads ask it last (until the reads_until the marked line printed), us takes the
// read and relays it to eu; after that, ams asks eu first and no relay is needed. A line
// that straddles the instant may show either.
func checkMendedRead(t *testing.T, marked, clears string, ran [2]time.Time) {
	t.Helper()
	var until time.Time
	for _, m := range readsUntilPattern.FindAllStringSubmatch(marked, -1) {
		u, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatalf("the marked line printed reads_until %q: %v", m[1], err)
		}
		if u.After(until) { // the latest: eu is asked last until then
			until = u
		}
	}
	if until.IsZero() {
		t.Fatalf("the marked line printed no reads_until:\n%s", marked)
	}
	relayed := strings.Contains(clears, "Standin-Relayed-By: ")
	switch {
	case ran[1].Before(until) && !relayed:
		t.Errorf("the read for initech ran before eu's reads_until (%s) and was not relayed through us:\n%s",
			until.Format(time.RFC3339Nano), clears)
	case ran[0].After(until) && relayed:
		t.Errorf("the read for initech ran after eu's reads_until (%s) and was still relayed:\n%s",
			until.Format(time.RFC3339Nano), clears)
	}
}

// checkStep checks what one guide line printed, and the entries' status where the line
// changes it.
func checkStep(t *testing.T, p demoPorts, key, got string) {
	t.Helper()
	has := func(want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("step %s printed no %q:\n%s", key, w, got)
			}
		}
	}
	hasNot := func(s string) {
		t.Helper()
		if strings.Contains(strings.ToLower(got), strings.ToLower(s)) {
			t.Errorf("step %s printed %q:\n%s", key, s, got)
		}
	}
	switch key {
	case "relayed":
		has("HTTP/1.1 200 OK", "Standin-Relayed-By: ", `"id":"1","tenant":"acme","region":"eu"`)
	case "straight", "gossiped":
		has("HTTP/1.1 200 OK", `"id":"1","tenant":"acme","region":"eu"`)
		hasNot("relayed")
	case "wait":
		if s := demoStatus(t, p.admin(2)); s.Homes.Gossip < 1 {
			t.Errorf("after the wait, sin holds %d gossiped homes, want acme's", s.Homes.Gossip)
		}
	case "write":
		has("HTTP/1.1 201 Created", `"tenant":"globex","region":"us"`)
	case "keyed":
		has("HTTP/1.1 201 Created", `"tenant":"globex"`)
		hasNot("replayed")
	case "replayed":
		has("HTTP/1.1 201 Created", "Idempotent-Replayed: true", `"tenant":"globex"`)
	case "ledger":
		if n := strings.Count(got, `"tenant":"globex"`); n != 2 {
			t.Errorf("the ledger shows %d writes of globex, want 2 (the keyed one once):\n%s", n, got)
		}
	case "break":
		if n := strings.Count(got, `"fault":"unmarked_5xx"`); n != 2 {
			t.Errorf("break: %d routers in unmarked_5xx, want eu's 2:\n%s", n, got)
		}
	case "write-fails":
		has("HTTP/1.1 502 Bad Gateway", `"error":"may_have_run"`)
		if m := demoStatus(t, p.admin(0)).marks(); m != "eu" {
			t.Errorf("after the failed write, ams's /status.json marks %q, want eu", m)
		}
		for i := 1; i < 3; i++ {
			testutil.Eventually(t, 3*time.Second, "eu's mark gossiped to "+p.admin(i), func() bool {
				return demoStatus(t, p.admin(i)).marks() == "eu"
			})
		}
	case "marked":
		has(`"marks": [`, `"region": "eu"`)
	case "avoids":
		has("HTTP/1.1 201 Created", `"tenant":"umbrella","region":"us"`)
		hasNot("relayed")
	case "mend":
		if n := strings.Count(got, `"fault":"ok"`); n != 2 {
			t.Errorf("mend: %d routers ok, want eu's 2:\n%s", n, got)
		}
	case "clears":
		has("HTTP/1.1 200 OK", `"id":"1","tenant":"initech","region":"eu"`)
		if m := demoStatus(t, p.admin(0)).marks(); m != "" {
			t.Errorf("after eu answered, ams's /status.json marks %q, want none", m)
		}
		for i := 1; i < 3; i++ {
			testutil.Eventually(t, 3*time.Second, "eu's clear gossiped to "+p.admin(i), func() bool {
				return demoStatus(t, p.admin(i)).marks() == ""
			})
		}
	case "cleared":
		has(`"marks": [],`)
	case "events":
		has("event: open", "event: tick")
	case "members":
		for _, name := range []string{"entry-ams", "entry-iad", "entry-sin"} {
			if !regexp.MustCompile(name + `\s+\S+\s+alive`).MatchString(got) {
				t.Errorf("serf members does not list %s alive:\n%s", name, got)
			}
		}
	default:
		t.Errorf("step %s is not checked", key)
	}
}

// shell runs one line with sh, as a person pasting it would, and returns what it printed.
// After within, the line and everything it started are killed, and the error is
// context.DeadlineExceeded. curl is kept off any proxy: the demo is on loopback.
func shell(line string, within time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !strings.HasSuffix(strings.ToLower(name), "_proxy") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "no_proxy=*")
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return b.String(), err
}

var itemIDPattern = regexp.MustCompile(`"id":"([^"]+)"`)

func itemID(s string) string {
	if m := itemIDPattern.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// demoStatusDoc is what the demo's test reads of /status.json.
type demoStatusDoc struct {
	Homes struct {
		Gossip int `json:"gossip"`
	} `json:"homes"`
	Marks []struct {
		Region string `json:"region"`
	} `json:"marks"`
}

// marks returns the regions marked (each once, whatever the kinds), comma-separated.
func (s demoStatusDoc) marks() string {
	var r []string
	for _, m := range s.Marks {
		if !slices.Contains(r, m.Region) {
			r = append(r, m.Region)
		}
	}
	return strings.Join(r, ",")
}

func demoStatus(t *testing.T, admin string) demoStatusDoc {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(admin + "/status.json")
	if err != nil {
		t.Fatalf("GET %s/status.json: %v", admin, err)
	}
	defer resp.Body.Close()
	var s demoStatusDoc
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("%s/status.json: %v", admin, err)
	}
	return s
}
