package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The pure parts only: no process is started and no binary is needed.

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

// childrenOf over a made-up /proc: the master's children only, in pid order; other entries
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
	got, err := childrenOf(root, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{101, 102, 103}; !slices.Equal(got, want) {
		t.Errorf("childrenOf(100) = %v; want %v", got, want)
	}
}

func layout(workers int, rssMiB ...int64) layoutResult {
	l := layoutResult{Workers: workers, Processes: len(rssMiB), Complete: true}
	for i, m := range rssMiB {
		role := "worker"
		if i == 0 {
			role = "master"
		}
		l.Procs = append(l.Procs, procMem{PID: 1000 + i, Role: role, RSSBytes: m * mib, AnonBytes: m * mib / 2})
	}
	l.TotalMiB, l.TotalAnonMiB = totals(l.Procs)
	return l
}

func TestWithRatios(t *testing.T) {
	failed := layoutResult{Workers: 4, Error: "did not start"}
	for _, tc := range []struct {
		name    string
		layouts []layoutResult
		base    int
		ratios  []float64
	}{
		{"one process first", []layoutResult{layout(0, 200), layout(8, 210, 200, 200, 200, 200, 200, 200, 200, 200)}, 0, []float64{1, 9.05}},
		{"one process not first", []layoutResult{layout(2, 210, 200, 200), layout(0, 200)}, 0, []float64{3.05, 1}},
		{"no one process: the first", []layoutResult{layout(2, 100, 100, 100), layout(8, 100, 100, 100, 100, 100, 100, 100, 100, 100)}, 2, []float64{1, 3}},
		{"a failed layout has none", []layoutResult{failed, layout(0, 50), layout(1, 50, 50)}, 0, []float64{0, 1, 2}},
		{"a failed one process is not the base", []layoutResult{{Workers: 0, Error: "x"}, layout(2, 40, 40, 40)}, 2, []float64{0, 1}},
		{"none measured", []layoutResult{failed}, -1, []float64{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := withRatios(tc.layouts)
			if base != tc.base {
				t.Errorf("base = %d; want %d", base, tc.base)
			}
			for i, l := range tc.layouts {
				if d := l.Ratio - tc.ratios[i]; d > 1e-9 || d < -1e-9 {
					t.Errorf("layout %d (--workers %d): ratio %v; want %v", i, l.Workers, l.Ratio, tc.ratios[i])
				}
			}
		})
	}
}

func TestMarkdown(t *testing.T) {
	r := report{Homes: 1000, SettleSeconds: 5, Layouts: []layoutResult{
		layout(0, 200), layout(2, 210, 200, 190), {Workers: 8, Error: "/readyz not 200\nlog | lines"},
	}}
	r.Layouts[1].Complete, r.Layouts[1].HomesHeld = false, []int{1000, 1000, 10}
	r.BaseWorkers = withRatios(r.Layouts)
	got := markdown(r)
	for _, want := range []string{
		"| --workers | processes | master MiB | each worker MiB | total MiB | private (anon) MiB | × one process |",
		"| 0 | 1 | 200 | – | 200 | 100 | 1.00 |",
		"| 2 | 3 | 210 | 200, 190 (not all held the homes: [1000 1000 10]) | 600 | 300 | 3.00 |",
		`| 8 | failed: /readyz not 200 | | | | | |`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("markdown lacks %q:\n%s", want, got)
		}
	}
}

func TestParseLayouts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"0,8", []int{0, 8}, false},
		{" 0, 2 ,8,", []int{0, 2, 8}, false},
		{"8", []int{8}, false},
		{"", nil, true},
		{"0,0", nil, true},
		{"-1", nil, true},
		{"auto", nil, true},
	} {
		got, err := parseLayouts(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("parseLayouts(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}
