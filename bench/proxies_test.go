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

// scriptFunc returns the text of the bash function NAME in proxies.sh.
func scriptFunc(t *testing.T, name string) string {
	t.Helper()
	return scriptSpan(t, name+"() {\n", "\n}\n")
}

// scriptVar returns the assignment of the single-quoted variable NAME in proxies.sh.
func scriptVar(t *testing.T, name string) string {
	t.Helper()
	return scriptSpan(t, name+"='", "\n'\n")
}

// scriptSpan returns the text of proxies.sh from a line that starts with start to the first
// end after it, end included.
func scriptSpan(t *testing.T, start, end string) string {
	t.Helper()
	script, err := os.ReadFile("proxies.sh")
	if err != nil {
		t.Fatal(err)
	}
	src := string(script)
	i := strings.Index(src, "\n"+start)
	if i < 0 {
		t.Fatalf("proxies.sh has no line starting %q", start)
	}
	j := strings.Index(src[i+1:], end)
	if j < 0 {
		t.Fatalf("proxies.sh: %q has no end", start)
	}
	return src[i+1 : i+1+j+len(end)]
}

// protoTable runs proxies.sh's proto_table (the table of --mode protocols) on the rows given:
// the protocol rows, the conns mode's rows and the broken checks, each a TSV file's lines.
func protoTable(t *testing.T, targets string, prows, rows, broken []string) map[string][]string {
	t.Helper()
	dir := t.TempDir()
	for name, lines := range map[string][]string{"protorows.tsv": prows, "rows.tsv": rows, "broken.tsv": broken} {
		text := strings.Join(lines, "\n")
		if text != "" {
			text += "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := `TMP=$1 PROWS=$1/protorows.tsv ROWS=$1/rows.tsv RESUMES=30 CONNS=32 H2_CLIENTS=8 H2_STREAMS=16
IDLE_CONNS=10000 STREAMS=2000
IFS=, read -r -a TARGETS <<<"$2"
SCENARIOS=(idle streams)
`
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", "-c", env+scriptVar(t, "AWK_STATS")+scriptFunc(t, "proto_table")+"\nproto_table",
		"bash", dir, targets).CombinedOutput()
	if err != nil {
		t.Fatalf("proto_table: %v: %s", err, out)
	}
	// Each row by its measurement's label: its cells after the label.
	table := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		table[cells[0]] = cells[1:]
	}
	return table
}

// The table of --mode protocols: a row per measurement, each filled; ratios paired per round;
// a protocol whose check failed says BROKEN, a measurement with no row says MISSING, and
// errors in a run are shown beside its figure.
func TestProtoTable(t *testing.T) {
	var prows []string
	row := func(r int, target, metric, value, cpu string, errs int) {
		steal := "0"
		if cpu == "-" {
			steal = "-"
		}
		prows = append(prows, fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%d\t%s\t0\t-", r, target, metric, value, cpu, errs, steal))
	}
	nginxRPS, entryRPS, entryCPU := []string{"100", "200", "300"}, []string{"90", "220", "240"}, []string{"12", "11", "15"}
	for r := 1; r <= 3; r++ {
		row(r, "nginx", "plain_rps", nginxRPS[r-1], "10", 0)
		row(r, "fenec-entry", "plain_rps", entryRPS[r-1], entryCPU[r-1], 0)
		row(r, "nginx", "https_rps", "100", "20", 0)
		errs := 0
		if r == 2 {
			errs = 5
		}
		row(r, "fenec-entry", "https_rps", "50", "40", errs)
		row(r, "nginx", "resumed", "30", "-", 0)
		row(r, "fenec-entry", "resumed", []string{"29", "30", "30"}[r-1], "-", 0)
		row(r, "fenec-entry", "handshakes", "400", "900", 0) // nginx's left out: MISSING
		row(r, "nginx", "h2_rps", "1000", "50", 0)
	}
	rows := []string{ // round scenario target conns before after KB/conn goroutines/conn closed open-ms
		"1\tidle\tnginx\t10000\t7000\t11000\t0.400\t-\t0\t900",
		"1\tidle\tfenec-entry\t10000\t20000\t26500\t0.650\t0.000\t0\t800",
	}
	broken := []string{"fenec-entry\th2_rps\th2: curl --http2: no answer"}
	table := protoTable(t, "nginx,fenec-entry", prows, rows, broken)
	// Columns: better, nginx, its CPU, fenec-entry, its CPU, ratio, CPU ratio.
	for label, want := range map[string][]string{
		"plain HTTP/1.1 requests/s, c=32":                {"higher", "200 (100-300)", "10.0", "220 (90-240)", "12.0 (11.0-15.0)", "0.90 (0.80-1.10)", "1.20 (1.10-1.50)"},
		"HTTPS HTTP/1.1 requests/s, c=32":                {"higher", "100", "20.0", "50 ⚠ 5 err", "40.0", "0.50", "2.00"},
		"sessions resumed, of 30 reconnects":             {"higher", "30/30", "-", "30/30 (29/30-30/30)", "-", "1.00 (0.97-1.00)", "-"},
		"full TLS handshakes/s, one at a time":           {"higher", "MISSING", "-", "400", "900.0", "-", "-"},
		"h2 (TLS) requests/s, -c8 -m16":                  {"higher", "1000", "50.0", "BROKEN", "-", "-", "-"},
		"h2c requests/s, -c8 -m16":                       {"higher", "MISSING", "-", "MISSING", "-", "-", "-"},
		"KB per idle keep-alive connection (10000 held)": {"lower", "0.40", "-", "0.65", "-", "1.62", "-"},
		"KB per open event stream (2000 held)":           {"lower", "MISSING", "-", "MISSING", "-", "-", "-"},
	} {
		if got := table[label]; !slices.Equal(got, want) {
			t.Errorf("row %q:\n got %q\nwant %q", label, got, want)
		}
	}
	if n := len(table); n != 2+12 { // header, separator, twelve measurements
		t.Errorf("the table has %d lines, want 14: %q", n, table)
	}
}
