//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
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

func TestStatPPID(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       int
		err        bool
	}{
		{"plain", "4242 (fenec-entry) S 4100 4242 4100 0 -1 4194560 1234 0 0 0", 4100, false},
		{"worker of /proc/self/exe", "4250 (exe) S 4242 4242 4100 0 -1", 4242, false},
		{"spaces in the name", "77 (tmux: server) S 1 77 77 0 -1", 1, false},
		{"parentheses in the name", "88 (a) b (c)) R 12 88 88 0 -1", 12, false},
		{"a ') S 9 ' in the name", "99 (x) S 9 (y) S 31 99 99 0", 31, false},
		{"empty name", "5 () S 3 5 5", 3, false},
		{"no name", "5 S 3 5 5", 0, true},
		{"cut after the state", "5 (sh) S", 0, true},
		{"ppid not a number", "5 (sh) S x 5 5", 0, true},
		{"empty", "", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := statPPID(tc.stat)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("statPPID(%q) = %d, %v; want %d, error %v", tc.stat, got, err, tc.want, tc.err)
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

func runOf(procs int, rssMiB ...int64) procsResult {
	r := procsResult{Procs: procs, Processes: len(rssMiB), Complete: true}
	for i, m := range rssMiB {
		role := "child"
		if i == 0 {
			role = "entry"
		}
		r.Mem = append(r.Mem, procMem{PID: 1000 + i, Role: role, RSSBytes: m * mib, AnonBytes: m * mib / 2})
	}
	r.TotalMiB, r.TotalAnonMiB = totals(r.Mem)
	return r
}

func TestWithRatios(t *testing.T) {
	failed := procsResult{Procs: 4, Error: "did not start"}
	for _, tc := range []struct {
		name   string
		runs   []procsResult
		base   int
		ratios []float64
	}{
		{"one P first", []procsResult{runOf(1, 100), runOf(8, 120)}, 1, []float64{1, 1.2}},
		{"one P not first", []procsResult{runOf(8, 150), runOf(1, 100)}, 1, []float64{1.5, 1}},
		{"an older build's workers", []procsResult{runOf(1, 100), runOf(2, 176, 135, 139)}, 1, []float64{1, 4.5}},
		{"no one P: the first", []procsResult{runOf(2, 100), runOf(8, 300)}, 2, []float64{1, 3}},
		{"a failed run has none", []procsResult{failed, runOf(1, 50), runOf(2, 100)}, 1, []float64{0, 1, 2}},
		{"a failed one P is not the base", []procsResult{{Procs: 1, Error: "x"}, runOf(2, 40)}, 2, []float64{0, 1}},
		{"none measured", []procsResult{failed}, -1, []float64{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := withRatios(tc.runs)
			if base != tc.base {
				t.Errorf("base = %d; want %d", base, tc.base)
			}
			for i, r := range tc.runs {
				if d := r.Ratio - tc.ratios[i]; d > 1e-9 || d < -1e-9 {
					t.Errorf("run %d (GOMAXPROCS %d): ratio %v; want %v", i, r.Procs, r.Ratio, tc.ratios[i])
				}
			}
		})
	}
}

func TestMarkdown(t *testing.T) {
	r := report{Homes: 1000, SettleSeconds: 5, Runs: []procsResult{
		runOf(1, 100), runOf(8, 120), runOf(2, 210, 200, 190), {Procs: 4, Error: "/readyz not 200\nlog | lines"},
	}}
	r.Runs[2].Complete, r.Runs[2].HomesHeld = false, []int{1000, 1000, 10}
	r.BaseProcs = withRatios(r.Runs)
	got := markdown(r)
	for _, want := range []string{
		"| GOMAXPROCS | processes | entry MiB | each child MiB | total MiB | private (anon) MiB | × one process |",
		"| 1 | 1 | 100 | – | 100 | 50 | 1.00 |",
		"| 8 | 1 | 120 | – | 120 | 60 | 1.20 |",
		"| 2 | 3 | 210 | 200, 190 (not all homes held: [1000 1000 10]) | 600 | 300 | 6.00 |",
		`| 4 | failed: /readyz not 200 | | | | | |`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("markdown lacks %q:\n%s", want, got)
		}
	}
	r = report{Homes: 10, Runs: []procsResult{runOf(2, 100), runOf(8, 200)}}
	r.BaseProcs = withRatios(r.Runs)
	if got := markdown(r); !strings.Contains(got, "| × GOMAXPROCS=2 |") {
		t.Errorf("without GOMAXPROCS 1 the ratios are to the first run, and the header says so:\n%s", got)
	}
}

func TestParseProcs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"1,8", []int{1, 8}, false},
		{" 1, 2 ,8,", []int{1, 2, 8}, false},
		{"8", []int{8}, false},
		{"1024", []int{1024}, false},
		{"", nil, true},
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

func TestHolds(t *testing.T) {
	var st entryStatus
	if err := json.Unmarshal([]byte(`{"homes":{"held":100}}`), &st); err != nil {
		t.Fatal(err)
	}
	if !st.holds(100) || st.holds(101) {
		t.Errorf("one process holding 100: holds(100) %v, holds(101) %v", st.holds(100), st.holds(101))
	}
	// An older build with workers: each worker's copy must hold them too.
	if err := json.Unmarshal([]byte(`{"homes":{"held":100},"workers":[{"index":0,"pid":7,"homes":100},{"index":1,"homes":0}]}`), &st); err != nil {
		t.Fatal(err)
	}
	if st.holds(100) {
		t.Error("a worker slot with no process: holds(100) true")
	}
	st.Workers[1].PID, st.Workers[1].Homes = 8, 99
	if st.holds(100) {
		t.Error("a worker holding 99: holds(100) true")
	}
	st.Workers[1].Homes = 100
	if !st.holds(100) || !slices.Equal(st.workerPIDs(), []int{7, 8}) || !slices.Equal(st.held(), []int{100, 100, 100}) {
		t.Errorf("every worker holding 100: holds %v, pids %v, held %v", st.holds(100), st.workerPIDs(), st.held())
	}
}

// The stand-in entry: this test binary, started by measure (through a script that sets
// fakeEntryEnv) with the entry's command line. It touches fakeEntryMiB of memory, and, as an
// older build did by default, starts a child per P when it has more than one (GOMAXPROCS),
// each touching fakeChildMiB; then it serves /readyz, /status.json (the homes of --homes,
// its children as workers) and /metrics on --admin-listen. Its mode (fakeEntryEnv's value):
// "ok"; "wrongprocs", /metrics shows one P more than it has; "short", its workers hold one
// home fewer than asked.
const (
	fakeEntryEnv = "BENCH_MEMORY_FAKE_ENTRY"
	fakeChildEnv = "BENCH_MEMORY_FAKE_CHILD"
	fakeEntryMiB = 24
	fakeChildMiB = 16
)

var ballast []byte

// touch allocates n MiB and writes every page of it, so that it is resident.
func touch(n int) {
	ballast = make([]byte, n*mib)
	for i := 0; i < len(ballast); i += 4096 {
		ballast[i] = 1
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(fakeChildEnv) != "" {
		fakeChild()
		return
	}
	if mode := os.Getenv(fakeEntryEnv); mode != "" {
		fakeEntry(mode)
		return
	}
	os.Exit(m.Run())
}

// fakeChild touches its memory, says so on stdout, and exits when its stdin closes (its
// parent gone).
func fakeChild() {
	touch(fakeChildMiB)
	fmt.Println("ok")
	bufio.NewReader(os.Stdin).ReadString('\n')
	runtime.KeepAlive(ballast)
	os.Exit(0)
}

func fakeEntry(mode string) {
	arg := func(name string) string {
		for i, a := range os.Args {
			if a == name && i+1 < len(os.Args) {
				return os.Args[i+1]
			}
		}
		fmt.Fprintf(os.Stderr, "fake entry: no %s\n", name)
		os.Exit(2)
		return ""
	}
	homes, err := strconv.Atoi(arg("--homes"))
	if err != nil {
		os.Exit(2)
	}
	admin := arg("--admin-listen")
	touch(fakeEntryMiB)
	procs := runtime.GOMAXPROCS(0)
	type worker struct {
		Index int `json:"index"`
		PID   int `json:"pid"`
		Homes int `json:"homes"`
	}
	var workers []worker
	self, _ := os.Executable()
	for i := 0; procs > 1 && i < procs; i++ {
		c := exec.Command(self)
		c.Env = append(os.Environ(), fakeChildEnv+"=1")
		c.Stderr = os.Stderr
		if _, err := c.StdinPipe(); err != nil { // held open; closed when this process exits
			os.Exit(2)
		}
		out, err := c.StdoutPipe()
		if err != nil {
			os.Exit(2)
		}
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "fake entry:", err)
			os.Exit(2)
		}
		if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ok\n" {
			fmt.Fprintf(os.Stderr, "fake entry: child said %q\n", line)
			os.Exit(2)
		}
		held := homes
		if mode == "short" {
			held--
		}
		workers = append(workers, worker{Index: i, PID: c.Process.Pid, Homes: held})
	}
	shown := procs
	if mode == "wrongprocs" {
		shown++
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("/status.json", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"homes": map[string]int{"held": homes}, "workers": workers})
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "fenec_entry_procs_max %d\nfenec_entry_procs %d\n", shown, shown)
	})
	err = http.ListenAndServe(admin, mux) // SIGTERM ends the process
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

// shortBounds makes measure's waits short for a test, and bounds the test by them.
func shortBounds(t *testing.T, hold time.Duration) {
	t.Helper()
	oldHold := holdTimeout
	holdTimeout = hold
	t.Cleanup(func() { holdTimeout = oldHold })
}

// measure counts the process and its children, each with the memory it touched, and the
// ratio is to the GOMAXPROCS 1 run.
func TestMeasureCountsChildren(t *testing.T) {
	shortBounds(t, 20*time.Second)
	rep, err := memoryRun(fakeBin(t, "ok"), 100, []int{3, 1}, 200*time.Millisecond, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || rep.BaseProcs != 1 {
		t.Fatalf("runs %d, base %d; want 2 runs, base 1: %+v", len(rep.Runs), rep.BaseProcs, rep)
	}
	for _, r := range rep.Runs {
		if r.Error != "" || !r.Complete {
			t.Fatalf("GOMAXPROCS %d: error %q, complete %v", r.Procs, r.Error, r.Complete)
		}
		want := 1
		if r.Procs > 1 {
			want += r.Procs
		}
		if r.Processes != want || len(r.Mem) != want || r.ProcsSeen != r.Procs {
			t.Fatalf("GOMAXPROCS %d: %d processes (%d read), %d Ps seen; want %d processes, %d Ps", r.Procs, r.Processes, len(r.Mem), r.ProcsSeen, want, r.Procs)
		}
		var sum, anon int64
		pids := map[int]bool{}
		for i, m := range r.Mem {
			min, role := int64(fakeChildMiB), "child"
			if i == 0 {
				min, role = fakeEntryMiB, "entry"
			}
			// Its own memory, and no more than a test binary's size over it.
			if m.Role != role || m.RSSBytes < min*mib || m.RSSBytes > (min+64)*mib || m.AnonBytes < min*mib || m.AnonBytes > m.RSSBytes {
				t.Errorf("GOMAXPROCS %d, process %d: %+v; want role %s, %d MiB resident and private or more", r.Procs, i, m, role, min)
			}
			if pids[m.PID] || m.PID == os.Getpid() {
				t.Errorf("GOMAXPROCS %d: pid %d read twice, or this test's own", r.Procs, m.PID)
			}
			pids[m.PID] = true
			sum += m.RSSBytes
			anon += m.AnonBytes
		}
		if r.TotalMiB != float64(sum)/mib || r.TotalAnonMiB != float64(anon)/mib {
			t.Errorf("GOMAXPROCS %d: totals %.1f, %.1f MiB; the processes' sum %.1f, %.1f", r.Procs, r.TotalMiB, r.TotalAnonMiB, float64(sum)/mib, float64(anon)/mib)
		}
		if len(r.HomesHeld) != want || r.HomesHeld[0] != 100 {
			t.Errorf("GOMAXPROCS %d: homes held %v", r.Procs, r.HomesHeld)
		}
	}
	three, one := rep.Runs[0], rep.Runs[1]
	if one.Ratio != 1 || three.Ratio != three.TotalMiB/one.TotalMiB || three.Ratio < 2 {
		t.Errorf("ratios %v (GOMAXPROCS 3, %.0f MiB) and %v (GOMAXPROCS 1, %.0f MiB)", three.Ratio, three.TotalMiB, one.Ratio, one.TotalMiB)
	}
}

// A run whose Ps are not the GOMAXPROCS asked for is an error, not a figure; one whose
// workers never hold the homes is measured but not complete.
func TestMeasureRefuses(t *testing.T) {
	shortBounds(t, 3*time.Second)
	rep, err := memoryRun(fakeBin(t, "wrongprocs"), 10, []int{1}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Runs[0]; !strings.Contains(r.Error, "runs on 2 Ps") || rep.BaseProcs != -1 {
		t.Errorf("wrong Ps: error %q, base %d", r.Error, rep.BaseProcs)
	}
	rep, err = memoryRun(fakeBin(t, "short"), 10, []int{2}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Runs[0]; r.Error != "" || r.Complete || !slices.Equal(r.HomesHeld, []int{10, 9, 9}) || r.Processes != 3 {
		t.Errorf("workers short of the homes: %+v", r)
	}
}

// The real entry, built from this tree, restoring a few thousand homes: one process whatever
// its Ps, holding every home, its memory read.
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
	const homes = 3000
	rep, err := memoryRun(bin, homes, []int{1, 2}, 300*time.Millisecond, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || rep.BaseProcs != 1 || rep.StateBytes <= 0 {
		t.Fatalf("runs %d, base %d, state %d bytes: %+v", len(rep.Runs), rep.BaseProcs, rep.StateBytes, rep)
	}
	for _, r := range rep.Runs {
		if r.Error != "" || !r.Complete {
			t.Fatalf("GOMAXPROCS %d: error %q, complete %v", r.Procs, r.Error, r.Complete)
		}
		if r.Processes != 1 || len(r.Mem) != 1 || r.Mem[0].Role != "entry" {
			t.Errorf("GOMAXPROCS %d: %+v; want the entry alone, one process", r.Procs, r.Mem)
		}
		if r.ProcsSeen != r.Procs {
			t.Errorf("GOMAXPROCS %d: the entry runs on %d Ps", r.Procs, r.ProcsSeen)
		}
		if len(r.HomesHeld) != 1 || r.HomesHeld[0] < homes {
			t.Errorf("GOMAXPROCS %d: homes held %v; want %d", r.Procs, r.HomesHeld, homes)
		}
		if m := r.Mem[0]; m.RSSBytes < 4*mib || m.RSSBytes > 1024*mib || m.AnonBytes <= 0 || m.AnonBytes > m.RSSBytes {
			t.Errorf("GOMAXPROCS %d: RSS %d, anon %d bytes: not a Go process of a few thousand homes", r.Procs, m.RSSBytes, m.AnonBytes)
		}
		if r.TotalMiB != float64(r.Mem[0].RSSBytes)/mib {
			t.Errorf("GOMAXPROCS %d: total %.1f MiB, the process %.1f", r.Procs, r.TotalMiB, float64(r.Mem[0].RSSBytes)/mib)
		}
	}
	if rep.Runs[0].Ratio != 1 || rep.Runs[1].Ratio != rep.Runs[1].TotalMiB/rep.Runs[0].TotalMiB {
		t.Errorf("ratios %v, %v", rep.Runs[0].Ratio, rep.Runs[1].Ratio)
	}
	t.Logf("\n%s", markdown(rep))
}
