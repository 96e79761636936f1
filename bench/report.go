//go:build linux

package main

import (
	"fmt"
	"slices"
	"strings"
)

// The proxies' reports: medians over rounds (min-max), every ratio paired per round (this
// round's target over this round's nginx, or direct), then the median taken, so that drift
// that hits a whole round cancels out.

// byRound indexes results by round, target and measurement.
type byRound struct {
	m      map[[3]any]result
	rounds []int
}

func index(rs []result) byRound {
	ix := byRound{m: map[[3]any]result{}}
	for _, r := range rs {
		ix.m[[3]any{r.Round, r.Target, r.Measurement}] = r
		if !slices.Contains(ix.rounds, r.Round) {
			ix.rounds = append(ix.rounds, r.Round)
		}
	}
	slices.Sort(ix.rounds)
	return ix
}

func (ix byRound) get(r int, t, m string) (result, bool) {
	x, ok := ix.m[[3]any{r, t, m}]
	return x, ok
}

// pairs is f(a's result, c's result) over the rounds that have both and where f says ok.
func (ix byRound) pairs(a, c, m string, f func(x, y result) (float64, bool)) []float64 {
	var out []float64
	for _, r := range ix.rounds {
		x, ok1 := ix.get(r, a, m)
		y, ok2 := ix.get(r, c, m)
		if v, ok := f(x, y); ok1 && ok2 && ok {
			out = append(out, v)
		}
	}
	return out
}

// requestsReport is -mode requests' report; ok is false when fenec-entry missed the floor.
func requestsReport(rs []result, targets []string, split bool, conns int) (string, bool) {
	ix := index(rs)
	var b strings.Builder
	col := func(t, m string, f func(result) float64) []float64 {
		return ix.pairs(t, t, m, func(x, _ result) (float64, bool) { return f(x), true })
	}
	added := func(x, d result) (float64, bool) { return float64(x.P50 - d.P50), true }
	addRatio := func(t string) []float64 {
		var out []float64
		for _, r := range ix.rounds {
			x, ok1 := ix.get(r, t, "plain_latency")
			d, ok2 := ix.get(r, "direct", "plain_latency")
			n, ok3 := ix.get(r, "nginx", "plain_latency")
			if ok1 && ok2 && ok3 && n.P50 > d.P50 {
				out = append(out, float64(x.P50-d.P50)/float64(n.P50-d.P50))
			}
		}
		return out
	}
	rpsRatio := func(x, n result) (float64, bool) { return x.PerS / n.PerS, n.PerS > 0 }
	fmt.Fprintf(&b, "| target | p50 µs | p99 µs | added p50 µs | rps c=%d | added-p50 ratio vs nginx | rps ratio vs nginx |\n|---|---|---|---|---|---|---|\n", conns)
	for _, t := range targets {
		add, ar := stat(ix.pairs(t, "direct", "plain_latency", added), "%.0f", "n/a"), stat(addRatio(t), "%.2f", "n/a")
		if t == "direct" {
			add, ar = "0", "-"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", t, stat(col(t, "plain_latency", func(x result) float64 { return float64(x.P50) }), "%.0f", "n/a"),
			stat(col(t, "plain_latency", func(x result) float64 { return float64(x.P99) }), "%.0f", "n/a"), add,
			stat(col(t, "plain", func(x result) float64 { return x.PerS }), "%.0f", "n/a"), ar, stat(ix.pairs(t, "nginx", "plain", rpsRatio), "%.2f", "n/a"))
	}
	ok := true
	if slices.Contains(targets, "fenec-entry") && slices.Contains(targets, "nginx") && slices.Contains(targets, "direct") {
		ar, rr := median(addRatio("fenec-entry")), median(ix.pairs("fenec-entry", "nginx", "plain", rpsRatio))
		ok = ar <= 1.1 && rr >= 0.9
		fmt.Fprintf(&b, "\nfloor: fenec-entry added p50 %.3fx nginx (want <= 1.1): %s; requests/s %.3fx nginx (want >= 0.9): %s\n", ar, verdict(ar <= 1.1), rr, verdict(rr >= 0.9))
	}

	// The pairs over only the rounds in which neither run had more than stealMax% steal.
	fmt.Fprintf(&b, "\nPaired per round over the rounds with at most %d%% steal in both runs (ratios of requests/s at c=%d, p50 and p99 at c=1):\n\n| pair | rounds | requests/s | p50 | p99 |\n|---|---|---|---|---|\n", stealMax, conns)
	steal := func(r int, t string) int {
		l, _ := ix.get(r, t, "plain_latency")
		p, _ := ix.get(r, t, "plain")
		return max(l.Steal, p.Steal)
	}
	pair := func(a, c string) {
		var x, y, z []float64
		for _, r := range ix.rounds {
			la, ok1 := ix.get(r, a, "plain_latency")
			lc, ok2 := ix.get(r, c, "plain_latency")
			pa, ok3 := ix.get(r, a, "plain")
			pc, ok4 := ix.get(r, c, "plain")
			if ok1 && ok2 && ok3 && ok4 && steal(r, a) <= stealMax && steal(r, c) <= stealMax && pc.PerS > 0 && lc.P50 > 0 && lc.P99 > 0 {
				x, y, z = append(x, pa.PerS/pc.PerS), append(y, float64(la.P50)/float64(lc.P50)), append(z, float64(la.P99)/float64(lc.P99))
			}
		}
		fmt.Fprintf(&b, "| %s / %s | %d of %d | %s | %s | %s |\n", a, c, len(x), len(ix.rounds), stat2(x), stat2(y), stat2(z))
	}
	for _, t := range targets {
		if t != "nginx" && t != "direct" && slices.Contains(targets, "nginx") {
			pair(t, "nginx")
		}
	}
	if slices.Contains(targets, "fenec-entry-b") {
		pair("fenec-entry", "fenec-entry-b")
	}

	// CPU a request against the upstream's in the same run, which the host's speed moves alike.
	b.WriteString("\nCPU a request against the upstream's, both measured in the same c=32 run (the host's speed moves both alike)")
	if split {
		b.WriteString(", the requests/s against nginx's that these costs give on the shared server CPU, (1 + nginx) / (1 + target), paired per round,")
	}
	b.WriteString(" and the target's CPU µs a request:\n\n| target | CPU vs upstream | requests/s vs nginx at equal host speed | CPU µs a request |\n|---|---|---|---|\n")
	for _, t := range targets {
		if t == "direct" {
			continue
		}
		x := ix.pairs(t, t, "plain", func(l, _ result) (float64, bool) { return l.CPUvsUp, l.CPUvsUp > 0 })
		y := ix.pairs(t, "nginx", "plain", func(l, n result) (float64, bool) {
			return (1 + n.CPUvsUp) / (1 + l.CPUvsUp), split && l.CPUvsUp > 0 && n.CPUvsUp > 0
		})
		us := ix.pairs(t, t, "plain", func(l, _ result) (float64, bool) { return l.CPUus, l.CPUus > 0 })
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t, stat(x, "%.2f", "-"), stat(y, "%.2f", "-"), stat(us, "%.1f", "-"))
	}
	fmt.Fprintf(&b, "\nMedian over %d interleaved rounds (min-max); added p50 and the ratios are paired per round.\n", len(ix.rounds))
	return b.String() + hostLines(rs, targets, []string{"plain"}), ok
}

func stat2(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", median(v))
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

// hostLines is the lines on the host under a report: the server CPU's busy % in the load
// runs of loads, and the other processes' load and the steal over every run, median and worst.
func hostLines(rs []result, targets, loads []string) string {
	ix := index(rs)
	var busy []string
	for _, m := range loads {
		var parts []string
		for _, t := range targets {
			if v := ix.pairs(t, t, m, func(x, _ result) (float64, bool) { return float64(x.srvBusy), true }); len(v) > 0 {
				parts = append(parts, fmt.Sprintf("%s %.0f%%", t, median(v)))
			}
		}
		if len(parts) > 0 {
			busy = append(busy, m+": "+strings.Join(parts, ", "))
		}
	}
	out := "- the server CPUs' busy share during the load runs (median; unpinned, every CPU's): " + strings.Join(busy, "; ") + "\n"
	for _, k := range []struct {
		what, of, bad string
		max           int
		byWorst       bool // bad when the worst run is over max, not only the median
		get           func(result) int
	}{{"other processes", "a CPU", "noisy, run again on a quiet machine", idleMax, false, func(x result) int { return x.Other }},
		{"steal (the hypervisor running other guests)", "the CPU time", "runs above it are slowed by the host, not by the targets", stealMax, true, func(x result) int { return x.Steal }}} {
		var v []float64
		worst, at := 0, ""
		for _, x := range rs {
			if x.Measurement != "idle" && x.Measurement != "streams" && x.Measurement != "resumption" {
				if v = append(v, float64(k.get(x))); k.get(x) > worst {
					worst, at = k.get(x), fmt.Sprintf("round %d, %s, %s", x.Round, x.Target, x.Measurement)
				}
			}
		}
		if worst == 0 {
			out += fmt.Sprintf("- %s: none measured\n", k.what)
			continue
		}
		out += fmt.Sprintf("- %s: median %.0f%% of %s, worst %d%% (%s)", k.what, median(v), k.of, worst, at)
		if median(v) > float64(k.max) || worst > k.max && k.byWorst {
			out += fmt.Sprintf("; over %d%%: %s", k.max, k.bad)
		} else if worst > k.max {
			out += "; distrust that run if it stands out in the raw file"
		}
		out += "\n"
	}
	return out
}

// A row of the protocols table: which measurement it reads, how, and which way is better.
type protoRow struct {
	measurement, label, better, format string
	value                              func(result) float64
}

func protoRows(o proxiesOpts) []protoRow {
	perS := func(x result) float64 { return x.PerS }
	p50 := func(x result) float64 { return float64(x.P50) }
	p99 := func(x result) float64 { return float64(x.P99) }
	kb := func(x result) float64 { return x.KBPerConn }
	h2 := fmt.Sprintf("-c%d -m%d", o.h2Clients, o.h2Streams)
	return []protoRow{
		{"plain", fmt.Sprintf("plain HTTP/1.1 requests/s, c=%d", o.conns), "higher", "%.0f", perS},
		{"plain_latency", "plain HTTP/1.1 p50 µs, c=1", "lower", "%.0f", p50},
		{"plain_latency", "plain HTTP/1.1 p99 µs, c=1", "lower", "%.0f", p99},
		{"https", fmt.Sprintf("HTTPS HTTP/1.1 requests/s, c=%d", o.conns), "higher", "%.0f", perS},
		{"https_latency", "HTTPS HTTP/1.1 p50 µs, c=1", "lower", "%.0f", p50},
		{"https_latency", "HTTPS HTTP/1.1 p99 µs, c=1", "lower", "%.0f", p99},
		{"h2", "h2 (TLS) requests/s, " + h2, "higher", "%.0f", perS},
		{"h2c", "h2c requests/s, " + h2, "higher", "%.0f", perS},
		{"handshakes", "full TLS handshakes/s, one at a time", "higher", "%.0f", perS},
		{"resumption", fmt.Sprintf("sessions resumed, of %d reconnects", o.resumes), "higher", "%g/" + fmt.Sprint(o.resumes),
			func(x result) float64 { return float64(x.Resumed) }},
		{"idle", fmt.Sprintf("KB per idle keep-alive connection (%d held)", o.idleConns), "lower", "%.2f", kb},
		{"streams", fmt.Sprintf("KB per open event stream (%d held)", o.streams), "lower", "%.2f", kb},
	}
}

// protocolsReport is -mode protocols' table: a row per measurement of -rows, each target's
// figure and CPU µs a request, and the ratios of every target against nginx and of fenec-entry
// against fenec-entry-b. BROKEN: the target failed that protocol's check (broken, by target
// and measurement); MISSING: no measurement where one was due; ⚠ N err: failed requests.
func protocolsReport(rs []result, targets []string, o proxiesOpts, broken map[[2]string]string) string {
	ix := index(rs)
	var b strings.Builder
	var pairs [][2]string
	b.WriteString("| measurement | better |")
	sep := "|---|---|"
	for _, t := range targets {
		fmt.Fprintf(&b, " %s | %s CPU µs |", t, t)
		sep += "---|---|"
		if t != "nginx" {
			pairs = append(pairs, [2]string{t, "nginx"})
		}
	}
	if slices.Contains(targets, "fenec-entry-b") {
		pairs = append(pairs, [2]string{"fenec-entry", "fenec-entry-b"})
	}
	for _, p := range pairs {
		fmt.Fprintf(&b, " %s / %s | CPU %s / %s |", p[0], p[1], p[0], p[1])
		sep += "---|---|"
	}
	b.WriteString("\n" + sep + "\n")
	for _, row := range protoRows(o) {
		if !slices.Contains(strings.Split(o.rows, ","), strings.TrimSuffix(row.measurement, "_latency")) {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s |", row.label, row.better)
		for _, t := range targets {
			var errs int64
			vs := ix.pairs(t, t, row.measurement, func(x, _ result) (float64, bool) { errs += x.Errors + int64(x.Closed); return row.value(x), true })
			cell, cpu := stat(vs, row.format, "MISSING"), stat(ix.pairs(t, t, row.measurement, func(x, _ result) (float64, bool) { return x.CPUus, x.CPUus > 0 }), "%.1f", "-")
			if broken[[2]string{t, row.measurement}] != "" {
				cell, cpu = "BROKEN", "-"
			} else if errs > 0 && len(vs) > 0 {
				cell += fmt.Sprintf(" ⚠ %d err", errs)
			}
			fmt.Fprintf(&b, " %s | %s |", cell, cpu)
		}
		for _, p := range pairs {
			x := ix.pairs(p[0], p[1], row.measurement, func(a, c result) (float64, bool) { return row.value(a) / row.value(c), row.value(c) > 0 })
			y := ix.pairs(p[0], p[1], row.measurement, func(a, c result) (float64, bool) { return a.CPUus / c.CPUus, a.CPUus > 0 && c.CPUus > 0 })
			fmt.Fprintf(&b, " %s | %s |", stat(x, "%.2f", "-"), stat(y, "%.2f", "-"))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nMedian over %d interleaved rounds (min-max); each ratio is paired per round (this round's target over this round's nginx), then the median taken.\n", len(ix.rounds))
	b.WriteString("CPU µs: the target's CPU (user + system, every process of it) over the requests of the run; in the handshakes row, over the connections (a full handshake and one request each).\n")
	fmt.Fprintf(&b, "p50/p99: wrk -t1 -c1 --latency, %ds in %d slices taking turns with the other targets, merged; requests/s: wrk -t2 -c%d, %ds; h2, h2c: h2load -t2 -c%d -m%d -D %d;\n",
		o.secs, o.slices, o.conns, o.secs, o.h2Clients, o.h2Streams, o.secs)
	fmt.Fprintf(&b, "handshakes: openssl s_time -new -www %s -time %d (one connection at a time, each a full handshake and a GET); resumption: openssl s_client -sess_in (the last session saved) -sess_out, %d reconnects, \"Reused\" counted;\n", reqPath, o.secs, o.resumes)
	b.WriteString("memory: (RSS after - before) / connections held, a fresh target each time (nginx: its worker), 1 KB = 1024 B.\n")
	b.WriteString("⚠ N err: failed or non-2xx requests in those runs, or held connections the proxy closed (raw file); BROKEN: the target failed that protocol's check by hand (below) and was not measured on it.\n\n")
	b.WriteString(hostLines(rs, targets, []string{"plain", "https", "h2", "h2c", "handshakes"}))
	var bs []string
	for k, why := range broken {
		bs = append(bs, fmt.Sprintf("- BROKEN: %s, %s\n", k[0], why))
	}
	slices.Sort(bs)
	return b.String() + strings.Join(slices.Compact(bs), "")
}
