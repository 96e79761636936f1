package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/lab/wan"
)

// A small fleet (make test, as root): four real processes, each in a site of the lab's WAN
// whose every link between entries waits 60 ms. They form, every home reaches every entry by
// gossip no sooner than the WAN's latency, the bytes are counted, the emulator drops nothing,
// and a stopped entry is listed failed. The 100-entry figures are the command's
// (docs/BENCHMARKS.md); this keeps the command working and true.
func TestSmallFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts real entries")
	}
	if missing := wan.Missing(); missing != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("the fleet needs %s, and CI is set: run it as root on Linux", missing)
		}
		t.Skipf("needs %s: run as root", missing)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-pgo=off", "-o", bin, "github.com/fenec/fenec-entry/cmd/fenec-entry",
		"github.com/fenec/fenec-entry/cmd/fenec-standin")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f := flags{bin: bin, entries: 4, rate: 20, duration: 2 * time.Second, latency: "60ms,60ms", seed: 1,
		settle: 3 * time.Second, failDetect: 20 * time.Second, formTimeout: 30 * time.Second, gomaxprocs: 1, maxRequests: 8}
	if err := check(f); err != nil {
		t.Fatal(err)
	}
	res, err := run(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []struct {
		what string
		ok   bool
	}{
		{"formed within 10 s", res.FormedS > 0 && res.FormedS < 10},
		{"every home learned", res.Learned == res.Homes && res.Homes == 40 && res.Failed == 0},
		{"every pair by gossip", res.PairsShare == 1},
		{"no pair sooner than the WAN's 60 ms (the histogram's bucket from 50 ms)", res.PairP50ms >= 50},
		{"bytes counted", res.PacketMean > 0 && res.RecvMean > 0 && res.PacketMax >= res.PacketMean},
		{"the emulator dropped nothing", res.WANDropped == 0},
		{"the stopped entry listed failed", res.FailDetectS > 0 && res.FailDetectS < 20},
	} {
		if !row.ok {
			t.Errorf("%s: %+v", row.what, *res)
		}
	}
}

// Two entries' link is drawn once for the pair, the same both ways, within -latency, and
// differs between pairs; the routers' links cost nothing.
func TestLinks(t *testing.T) {
	link := links(flags{latency: "10ms,150ms", loss: 0.01, seed: 1})
	seen := map[time.Duration]bool{}
	for i := range 20 {
		a, b := entryName(i), entryName(i+1)
		l := link(a, b)
		if l != link(b, a) || l.Delay < 10*time.Millisecond || l.Delay > 150*time.Millisecond || l.Loss != 0.01 {
			t.Fatalf("%s-%s: %+v one way, %+v the other", a, b, l, link(b, a))
		}
		seen[l.Delay] = true
	}
	if len(seen) < 15 {
		t.Errorf("20 pairs drew %d distinct delays", len(seen))
	}
	if l := link(routerSite, entryName(0)); l != (wan.Link{}) {
		t.Errorf("the routers' link %+v, want none", l)
	}
}

func TestFlags(t *testing.T) {
	good := flags{entries: 100, rate: 50, duration: time.Second, latency: "10ms,150ms", loss: 0.01, gomaxprocs: 1, maxRequests: 64}
	if err := check(good); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	for _, row := range []struct {
		flag string
		mod  func(*flags)
	}{
		{"-entries", func(f *flags) { f.entries = 1 }},
		{"-entries", func(f *flags) { f.entries = maxEntries + 1 }},
		{"-rate", func(f *flags) { f.rate = 0 }},
		{"-duration", func(f *flags) { f.duration = 0 }},
		{"-loss", func(f *flags) { f.loss = 1 }},
		{"-latency", func(f *flags) { f.latency = "150ms,10ms" }},
		{"-latency", func(f *flags) { f.latency = "10ms" }},
		{"-gomaxprocs", func(f *flags) { f.gomaxprocs = 0 }},
		{"-max-requests", func(f *flags) { f.maxRequests = 0 }},
	} {
		f := good
		row.mod(&f)
		if err := check(f); err == nil || !strings.HasPrefix(err.Error(), row.flag+" ") {
			t.Errorf("%s: %v, want an error naming it", row.flag, err)
		}
	}
}

// Tag changes are counted from the member updates a log holds: of others only, within the
// window, and no other event.
func TestCountUpdates(t *testing.T) {
	log := strings.Join([]string{
		`{"level":"info","component":"gossip","event":"member-update","member":"entry-001","time":"2026-12-07T14:00:09.999Z","message":"gossip: member member-update"}`,
		`{"level":"info","component":"gossip","event":"member-update","member":"entry-001","time":"2026-12-07T14:00:10Z","message":"gossip: member member-update"}`,
		`{"level":"info","component":"gossip","event":"member-update","member":"entry-002","time":"2026-12-07T14:00:15.5Z","message":"gossip: member member-update"}`,
		`{"level":"info","component":"gossip","event":"member-update","member":"entry-000","time":"2026-12-07T14:00:16Z","message":"gossip: member member-update"}`,
		`{"level":"info","component":"gossip","event":"member-join","member":"entry-003","time":"2026-12-07T14:00:17Z","message":"gossip: member member-join"}`,
		`{"level":"info","component":"gossip","event":"member-update","member":"entry-003","time":"2026-12-07T14:00:20Z","message":"gossip: member member-update"}`,
		`not json "member-update"`,
	}, "\n")
	from := time.Date(2026, 12, 7, 14, 0, 10, 0, time.UTC)
	if got := countUpdates(memberEvents([]byte(log), "entry-000"), from, from.Add(10*time.Second)); got != 2 {
		t.Fatalf("countUpdates: %d, want 2 (entry-001 at 10 s and entry-002 at 15.5 s)", got)
	}
}

// An entry that does not answer is reported with why (its scrape's error and its last line),
// not as listing -1 members alive.
func TestAliveCountsSaysWhy(t *testing.T) {
	logFile, err := os.Create(filepath.Join(t.TempDir(), "e.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	logFile.WriteString("fenec-entry serve: --admin-listen: listen tcp 127.0.0.1:1: bind: address already in use\n")
	refused := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("connection refused")
	}}
	e := &entry{name: "e0", log: logFile, http: &http.Client{Transport: refused}} // its admin listener never came up
	got := aliveCounts([]*entry{e})
	if strings.Contains(got, "-1") || !strings.Contains(got, "address already in use") || !strings.Contains(got, "does not answer") {
		t.Errorf("aliveCounts = %q, want why e0 does not answer", got)
	}
}
