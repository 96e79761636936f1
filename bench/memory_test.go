//go:build linux

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The pure parts first; then measure itself, on a stand-in entry whose memory is known (its
// children's too, as an older build's workers) and on the real entry with a few homes.

func TestStatusField(t *testing.T) {
	const status = "Name:\tfenec-entry\nUmask:\t0022\nState:\tS (sleeping)\nVmPeak:\t 1234568 kB\n" +
		"VmRSS:\t  215340 kB\nRssAnon:\t  201000 kB\nRssFile:\t   14340 kB\nThreads:\t9\n"
	for _, tc := range []struct {
		name, status, field string
		want                int64
		err                 bool
	}{
		{"vmrss", status, "VmRSS", 215340 * 1024, false},
		{"rssanon", status, "RssAnon", 201000 * 1024, false},
		{"not a prefix match", "VmRSSX:\t 1 kB\nVmRSS:\t 2 kB\n", "VmRSS", 2048, false},
		{"zero", "VmRSS:\t       0 kB\n", "VmRSS", 0, false},
		{"no trailing newline", "VmRSS:\t 7 kB", "VmRSS", 7 * 1024, false},
		{"absent (a kernel thread)", "Name:\tkthreadd\nThreads:\t1\n", "VmRSS", 0, true},
		{"no unit", "VmRSS:\t 7\n", "VmRSS", 0, true},
		{"other unit", "VmRSS:\t 7 MB\n", "VmRSS", 0, true},
		{"not a number", "VmRSS:\t x kB\n", "VmRSS", 0, true},
		{"negative", "VmRSS:\t -1 kB\n", "VmRSS", 0, true},
		{"empty", "", "VmRSS", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := statusField(tc.status, tc.field)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("statusField(%q) = %d, %v; want %d, error %v", tc.field, got, err, tc.want, tc.err)
			}
		})
	}
}

// childrenOf over a made-up /proc: the entry's children only, in pid order; other entries
// (not a pid, no stat, a grandchild) are passed over.
func TestChildrenOf(t *testing.T) {
	root := t.TempDir()
	for pid, stat := range map[string]string{
		"100":  "100 (fenec-entry) S 1 100 100 0",
		"103":  "103 (exe) S 100 100 100 0",
		"101":  "101 (exe) S 100 100 100 0",
		"102":  "102 (my (odd) name) S 100 100 100 0",
		"104":  "104 (sh) S 101 100 100 0", // a grandchild
		"105":  "105 (other) S 1 105 105 0",
		"self": "100 (fenec-entry) S 100 100 100 0", // not a pid
		"106":  "",                                  // no stat file: exited meanwhile
	} {
		d := filepath.Join(root, pid)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if stat != "" {
			if err := os.WriteFile(filepath.Join(d, "stat"), []byte(stat+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := childrenOf(root, 100)
	if want := []int{101, 102, 103}; !slices.Equal(got, want) {
		t.Errorf("childrenOf(100) = %v; want %v", got, want)
	}
}

func TestMarkdown(t *testing.T) {
	r := memReport{Homes: 1000, Settle: 5 * time.Second, Base: 1, Runs: []memRun{
		{Procs: 1, RSSMiB: 100, Ratio: 1, HoldSeconds: 1.25}, {Procs: 8, RSSMiB: 120, Ratio: 1.2, HoldSeconds: 2}, {Procs: 4, Error: "/readyz not 200\nlog | lines"},
	}}
	got := markdown(r)
	for _, want := range []string{"| GOMAXPROCS | MiB | × one process | held after |", "| 1 | 100 | 1.00 | 1.2 s |", "| 8 | 120 | 1.20 | 2.0 s |",
		`| 4 | failed: /readyz not 200 | | |`} {
		if !strings.Contains(got, want) {
			t.Errorf("markdown lacks %q:\n%s", want, got)
		}
	}
	if r.Base = 2; !strings.Contains(markdown(r), "| × GOMAXPROCS=2 |") {
		t.Errorf("without GOMAXPROCS 1 the ratios are to the first run, and the header says so:\n%s", markdown(r))
	}
}

func TestParseProcs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"1,8", []int{1, 8}, false},
		{" 1, 2 ,8", []int{1, 2, 8}, false},
		{"8", []int{8}, false},
		{"1024", []int{1024}, false},
		{"", nil, true},
		{"1,,8", nil, true},
		{"1,1", nil, true},
		{"0", nil, true},
		{"-1", nil, true},
		{"1025", nil, true},
		{"auto", nil, true},
	} {
		got, err := parseProcs(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("parseProcs(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestMetricValue(t *testing.T) {
	const text = "# HELP fenec_entry_procs Ps\n# TYPE fenec_entry_procs gauge\nfenec_entry_procs_max 8\n" +
		"fenec_entry_procs 8\ngo_goroutines 12\n"
	for _, tc := range []struct {
		name, text string
		want       int
		ok, err    bool
	}{
		{"present", text, 8, true, false},
		{"not the _max", "fenec_entry_procs_max 8\n", 0, false, false},
		{"absent", "go_goroutines 3\n", 0, false, false},
		{"float form", "fenec_entry_procs 2e+00\n", 2, true, false},
		{"not whole", "fenec_entry_procs 1.5\n", 0, false, true},
		{"not a number", "fenec_entry_procs x\n", 0, false, true},
	} {
		got, ok, err := metricValue(tc.text, "fenec_entry_procs")
		if got != tc.want || ok != tc.ok || (err != nil) != tc.err {
			t.Errorf("%s: metricValue = %d, %v, %v; want %d, %v, error %v", tc.name, got, ok, err, tc.want, tc.ok, tc.err)
		}
	}
}

// The stand-in entry: this test binary, started by measureMem (through a script that sets
// fakeEntryEnv) with the entry's command line. It touches fakeEntryMiB of memory, then serves
// /readyz, /status.json (the homes of --homes) and /metrics on --admin-listen. Its mode
// (fakeEntryEnv's value): "ok"; "wrongprocs", /metrics shows one P more than it has; "short",
// it holds one home fewer than asked.
const (
	fakeEntryEnv = "BENCH_MEMORY_FAKE_ENTRY"
	fakeEntryMiB = 24
)

var ballast []byte

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeEntryEnv); mode != "" {
		fakeEntry(mode)
		return
	}
	os.Exit(m.Run())
}

func fakeEntry(mode string) {
	arg := func(name string) string {
		i := slices.Index(os.Args, name)
		if i < 0 || i+1 >= len(os.Args) {
			fmt.Fprintf(os.Stderr, "fake entry: no %s\n", name)
			os.Exit(2)
		}
		return os.Args[i+1]
	}
	homes, err := strconv.Atoi(arg("--homes"))
	if err != nil {
		os.Exit(2)
	}
	ballast = make([]byte, fakeEntryMiB*mib)
	for i := 0; i < len(ballast); i += 4096 { // every page written, so that it is resident
		ballast[i] = 1
	}
	shown := runtime.GOMAXPROCS(0)
	if mode == "wrongprocs" {
		shown++
	}
	if mode == "short" {
		homes--
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("/status.json", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"homes":{"held":%d}}`, homes)
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "fenec_entry_procs_max %d\nfenec_entry_procs %d\n", shown, shown)
	})
	err = http.ListenAndServe(arg("--admin-listen"), mux) // SIGTERM ends the process
	runtime.KeepAlive(ballast)
	fmt.Fprintln(os.Stderr, "fake entry:", err)
	os.Exit(2)
}

// fakeBin writes a script that starts this test binary as the stand-in entry in mode.
func fakeBin(t *testing.T, mode string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "fake-entry")
	script := fmt.Sprintf("#!/bin/sh\nexport %s=%s\nexec %q \"$@\"\n", fakeEntryEnv, mode, self)
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// shortBounds makes measureMem's wait short for a test, and bounds the test by it.
func shortBounds(t *testing.T, hold time.Duration) {
	t.Helper()
	oldHold := holdTimeout
	holdTimeout = hold
	t.Cleanup(func() { holdTimeout = oldHold })
}

// measureMem reads the memory the stand-in touched, and the ratios are to the GOMAXPROCS 1 run.
func TestMeasureMem(t *testing.T) {
	shortBounds(t, 20*time.Second)
	rep, err := memoryRun(fakeBin(t, "ok"), 100, []int{3, 1}, 200*time.Millisecond, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || rep.Base != 1 {
		t.Fatalf("runs %d, base %d; want 2 runs, base 1: %+v", len(rep.Runs), rep.Base, rep)
	}
	for _, r := range rep.Runs {
		// Its own memory, and no more than a test binary's size over it.
		if r.Error != "" || r.RSSMiB < fakeEntryMiB || r.RSSMiB > fakeEntryMiB+64 || r.HoldSeconds <= 0 {
			t.Fatalf("GOMAXPROCS %d: %+v; want %d MiB resident or a little more", r.Procs, r, fakeEntryMiB)
		}
	}
	if three, one := rep.Runs[0], rep.Runs[1]; one.Ratio != 1 || three.Ratio != three.RSSMiB/one.RSSMiB {
		t.Errorf("ratios %v (GOMAXPROCS 3, %.0f MiB) and %v (GOMAXPROCS 1, %.0f MiB)", three.Ratio, three.RSSMiB, one.Ratio, one.RSSMiB)
	}
}

// A run whose Ps are not the GOMAXPROCS asked for, or that never holds the homes, is an error,
// not a figure, and the ratios of the others are to the first measured.
func TestMeasureRefuses(t *testing.T) {
	shortBounds(t, 3*time.Second)
	rep, err := memoryRun(fakeBin(t, "wrongprocs"), 10, []int{1}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Runs[0]; !strings.Contains(r.Error, "runs on 2 Ps") || rep.Base != -1 {
		t.Errorf("wrong Ps: error %q, base %d", r.Error, rep.Base)
	}
	rep, err = memoryRun(fakeBin(t, "short"), 10, []int{2}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Runs[0]; !strings.Contains(r.Error, "not ready holding 10 homes") {
		t.Errorf("short of the homes: %+v", r)
	}
}

// The real entry, built from this tree, restoring a few thousand homes: its memory read
// whatever its Ps.
func TestMeasureEntry(t *testing.T) {
	shortBounds(t, 60*time.Second)
	if testing.Short() {
		t.Skip("builds ./cmd/fenec-entry")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the entry with")
	}
	bin := filepath.Join(t.TempDir(), "fenec-entry")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, gobin, "build", "-o", bin, "github.com/fenec/fenec-entry/cmd/fenec-entry").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	rep, err := memoryRun(bin, 3000, []int{1, 2}, 300*time.Millisecond, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Runs {
		if r.Error != "" || r.RSSMiB < 4 || r.RSSMiB > 1024 {
			t.Fatalf("GOMAXPROCS %d: %+v: not a Go process of a few thousand homes", r.Procs, r)
		}
	}
	if rep.Base != 1 || rep.Runs[0].Ratio != 1 || rep.Runs[1].Ratio != rep.Runs[1].RSSMiB/rep.Runs[0].RSSMiB {
		t.Errorf("base %d, ratios %v, %v", rep.Base, rep.Runs[0].Ratio, rep.Runs[1].Ratio)
	}
	t.Logf("\n%s", markdown(rep))
}
