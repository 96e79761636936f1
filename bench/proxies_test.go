//go:build linux

package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// merged is percentiles of HIST lines (each wrk run prints one: every latency with its count).
func merged(lines []string) string {
	h := map[int]int64{}
	for _, l := range lines {
		addHist(h, strings.TrimPrefix(l, "HIST "))
	}
	p50, p99 := percentiles(h)
	return fmt.Sprintf("%d %d", p50, p99)
}

// wrkPct is wrk's percentile of sorted latencies: the value at rank int(p*n+1), counted from 1.
func wrkPct(sorted []int, p float64) int {
	r := int(p*float64(len(sorted)) + 1)
	return sorted[min(r, len(sorted))-1]
}

// The slices of a latency run are merged as one run: the p50 and p99 of several HIST lines
// are wrk's percentiles of all their latencies together.
func TestPercentilesMergeSlices(t *testing.T) {
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
		if got := merged(lines); got != want {
			t.Fatalf("trial %d (%d latencies in %d slices): %q, want %q", trial, len(all), len(lines), got, want)
		}
	}
}

func TestPercentilesSmall(t *testing.T) {
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
		if got := merged(tc.lines); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.lines, got, tc.want)
		}
	}
}

func TestParseWrk(t *testing.T) {
	w, err := parseWrk("Running 1s test\nBENCH p50_us=120 p99_us=900 rps=1234.5 requests=1234 socket_errors=2 non_2xx=1\nHIST 120:3 900:1\n")
	if err != nil || w.f["rps"] != 1234.5 || w.n("requests") != 1234 || w.n("socket_errors") != 2 || w.hist[120] != 3 || w.hist[900] != 1 {
		t.Fatalf("parseWrk = %+v, %v", w, err)
	}
	if _, err := parseWrk("unable to connect\n"); err == nil {
		t.Fatal("no BENCH line: want an error")
	}
}

// h2load's summary: failures, errors and timeouts are in "failed", and 3xx count as errors too.
func TestParseH2load(t *testing.T) {
	out := `finished in 2.00s, 9514.50 req/s, 1.2MB/s
requests: 19029 total, 19045 started, 19029 done, 19020 succeeded, 9 failed, 9 errored, 0 timeout
status codes: 19018 2xx, 2 3xx, 9 4xx, 0 5xx
Application protocol: h2c
`
	perS, ok, bad, proto, err := parseH2load(out)
	if err != nil || perS != 9514.5 || ok != 19020 || bad != 11 || proto != "h2c" {
		t.Fatalf("parseH2load = %v %d %d %q %v", perS, ok, bad, proto, err)
	}
	if _, _, _, _, err := parseH2load("connect failed\n"); err == nil {
		t.Fatal("no summary: want an error")
	}
	if n, b := parseSTime("1431 connections in 2 real seconds, 238 bytes read per connection\n"); n != 1431 || b != 238 {
		t.Fatalf("parseSTime = %d, %d", n, b)
	}
}

// cells is the first table's rows by their label, each its cells after the label.
func cells(table string) map[string][]string {
	out := map[string][]string{}
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "|") {
			if len(out) > 0 {
				break
			}
			continue
		}
		c := strings.Split(strings.Trim(line, "|"), "|")
		for i := range c {
			c[i] = strings.TrimSpace(c[i])
		}
		out[c[0]] = c[1:]
	}
	return out
}

// The table of -mode protocols: a row per measurement, each filled; ratios paired per round;
// a protocol whose check failed says BROKEN, a measurement with no result says MISSING, and
// errors in a run are shown beside its figure.
func TestProtocolsReport(t *testing.T) {
	var rs []result
	add := func(r int, target, m string, v float64, cpu float64, errs int64) {
		x := result{Round: r, Target: target, Measurement: m, PerS: v, Errors: errs, Resumed: int(v), KBPerConn: v}
		if cpu >= 0 {
			x.CPUus = cpu
		}
		rs = append(rs, x)
	}
	nginxRPS, entryRPS, entryCPU := []float64{100, 200, 300}, []float64{90, 220, 240}, []float64{12, 11, 15}
	for r := 1; r <= 3; r++ {
		add(r, "nginx", "plain", nginxRPS[r-1], 10, 0)
		add(r, "fenec-entry", "plain", entryRPS[r-1], entryCPU[r-1], 0)
		add(r, "nginx", "https", 100, 20, 0)
		errs := int64(0)
		if r == 2 {
			errs = 5
		}
		add(r, "fenec-entry", "https", 50, 40, errs)
		add(r, "nginx", "resumption", 30, -1, 0)
		add(r, "fenec-entry", "resumption", []float64{29, 30, 30}[r-1], -1, 0)
		add(r, "fenec-entry", "handshakes", 400, 900, 0) // nginx's left out: MISSING
		add(r, "nginx", "h2", 1000, 50, 0)
	}
	add(1, "nginx", "idle", 0.4, -1, 0)
	add(1, "fenec-entry", "idle", 0.65, -1, 0)
	broken := map[[2]string]string{{"fenec-entry", "h2"}: "h2: curl --http2: no answer"}
	o := proxiesOpts{rows: strings.Join(allRows, ","), conns: 32, h2Clients: 8, h2Streams: 16, resumes: 30, idleConns: 10000, streams: 2000}
	table := cells(protocolsReport(rs, []string{"nginx", "fenec-entry"}, o, broken))
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

// The requests report pairs each round's target with the same round's direct and nginx, and
// says whether fenec-entry met the floor.
func TestRequestsReport(t *testing.T) {
	var rs []result
	for r, f := range []float64{1, 1.2, 0.8} {
		for _, x := range []struct {
			t        string
			p50, rps float64
			cpu      float64
		}{{"direct", 50, 40000, 0}, {"nginx", 150, 20000, 1.2}, {"fenec-entry", 155, 19000, 1.25}} {
			rs = append(rs, result{Round: r + 1, Target: x.t, Measurement: "plain_latency", P50: int(x.p50 * f), P99: int(4 * x.p50 * f)},
				result{Round: r + 1, Target: x.t, Measurement: "plain", PerS: x.rps * f, CPUvsUp: x.cpu, CPUus: 10 * x.cpu})
		}
	}
	rep, ok := requestsReport(rs, []string{"direct", "nginx", "fenec-entry"}, true, 32)
	c := cells(rep)
	if want := []string{"155 (124-186)", "620 (496-744)", "105 (84-126)", "19000 (15200-22800)", "1.05", "0.95"}; !slices.Equal(c["fenec-entry"], want) {
		t.Errorf("fenec-entry's row %q, want %q", c["fenec-entry"], want)
	}
	if !strings.Contains(rep, "| fenec-entry | 1.25 | 0.98 | 12.5 |") { // (1 + 1.2) / (1 + 1.25)
		t.Errorf("want fenec-entry's CPU against the upstream's, its requests/s at equal host speed and its CPU µs in:\n%s", rep)
	}
	if !ok || !strings.Contains(rep, "floor: fenec-entry added p50 1.050x nginx (want <= 1.1): ok; requests/s 0.950x nginx (want >= 0.9): ok") {
		t.Errorf("floor: ok %v in:\n%s", ok, rep)
	}
	rs[len(rs)-1].PerS = 1000 // round 3's entry: the median ratio falls below the floor
	rs[len(rs)-7].PerS = 1000
	if _, ok := requestsReport(rs, []string{"direct", "nginx", "fenec-entry"}, true, 32); ok {
		t.Error("the floor missed in two rounds of three: want ok false")
	}
}
