// Package bench holds the tests of the bench scripts' own arithmetic (the scripts run
// outside `make test`: they need wrk, nginx and haproxy, and minutes of a quiet machine).
package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// histPct runs proxies.sh's hist_pct on the HIST lines given (each wrk run prints one: every
// latency value with its count) and returns what it prints.
func histPct(t *testing.T, lines []string) string {
	t.Helper()
	script, err := os.ReadFile("proxies.sh")
	if err != nil {
		t.Fatal(err)
	}
	src := string(script)
	start := strings.Index(src, "\nhist_pct() {\n")
	if start < 0 {
		t.Fatal("proxies.sh defines no hist_pct")
	}
	end := strings.Index(src[start:], "\n}\n")
	if end < 0 {
		t.Fatal("proxies.sh: hist_pct has no end")
	}
	fn := src[start+1 : start+end+3]
	file := filepath.Join(t.TempDir(), "hist")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", "-c", fn+"\nhist_pct \"$1\"", "bash", file).CombinedOutput()
	if err != nil {
		t.Fatalf("hist_pct: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// wrkPct is wrk's percentile of sorted latencies: the value at rank int(p*n+1), counted from 1.
func wrkPct(sorted []int, p float64) int {
	r := int(p*float64(len(sorted)) + 1)
	return sorted[min(r, len(sorted))-1]
}

// The slices of a latency run are merged as one run: hist_pct's p50 and p99 of several HIST
// lines are wrk's percentiles of all their latencies together.
func TestHistPctMergesSlices(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		var all []int
		var lines []string
		for range 1 + trial%4 { // slices
			counts := map[int]int{}
			for range 1 + rng.IntN(3000) {
				v := 40 + rng.IntN(200)
				if rng.IntN(50) == 0 {
					v += rng.IntN(20000) // a tail
				}
				counts[v]++
				all = append(all, v)
			}
			line := "HIST"
			for v, c := range counts {
				line += fmt.Sprintf(" %d:%d", v, c)
			}
			lines = append(lines, line)
		}
		slices.Sort(all)
		want := fmt.Sprintf("%d %d", wrkPct(all, 0.50), wrkPct(all, 0.99))
		if got := histPct(t, lines); got != want {
			t.Fatalf("trial %d (%d latencies in %d slices): hist_pct = %q, want %q", trial, len(all), len(lines), got, want)
		}
	}
}

func TestHistPctSmall(t *testing.T) {
	for _, tc := range []struct {
		lines []string
		want  string
	}{
		{[]string{"HIST 100:1"}, "100 100"},
		{[]string{"HIST 100:1 200:1"}, "200 200"}, // rank int(0.5*2+1) = 2
		{[]string{"HIST 100:98 900:2"}, "100 900"},
		{[]string{"HIST 100:50", "HIST 300:50"}, "300 300"},
		{[]string{"HIST 100:60", "HIST 300:40"}, "100 300"},
	} {
		if got := histPct(t, tc.lines); got != tc.want {
			t.Errorf("hist_pct %q = %q, want %q", tc.lines, got, tc.want)
		}
	}
}
