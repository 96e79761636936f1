//go:build linux

package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// The proxies' reports: medians over rounds (min-max), every ratio paired per round (this
// round's target over this round's nginx, or direct), then the median taken, so that drift
// that hits a whole round cancels out.

// byRound indexes results by round, target and measurement.
type byRound map[[3]any]result

func index(rs []result) (byRound, []int) {
	ix := byRound{}
	var rounds []int
	for _, r := range rs {
		ix[[3]any{r.Round, r.Target, r.Measurement}] = r
		if !slices.Contains(rounds, r.Round) {
			rounds = append(rounds, r.Round)
		}
	}
	slices.Sort(rounds)
	return ix, rounds
}

func (ix byRound) get(r int, t, m string) (result, bool) {
	x, ok := ix[[3]any{r, t, m}]
	return x, ok
}

// requestsReport is -mode requests' report; ok is false when fenec-entry missed the floor.
func requestsReport(rs []result, targets []string, split bool, conns int) (string, bool) {
	ix, rounds := index(rs)
	var b strings.Builder
	v := map[string][]float64{}
	add := func(k string, x float64) { v[k] = append(v[k], x) }
	var other []float64
	worst, worstAt := 0, ""
	steal := map[[2]any]int{}
	for _, r := range rounds {
		for _, t := range targets {
			lat, ok1 := ix.get(r, t, "plain_latency")
			load, ok2 := ix.get(r, t, "plain")
			if !ok1 || !ok2 {
				continue
			}
			add("p50 "+t, float64(lat.P50))
			add("p99 "+t, float64(lat.P99))
			add("rps "+t, load.PerS)
			add("srv "+t, float64(load.srvBusy))
			add("cli "+t, float64(load.cliBusy))
			o := max(lat.Other, load.Other)
			other = append(other, float64(o))
			if o > worst {
				worst, worstAt = o, fmt.Sprintf("round %d, %s", r, t)
			}
			steal[[2]any{r, t}] = max(lat.Steal, load.Steal)
			if d, ok := ix.get(r, "direct", "plain_latency"); ok {
				a := float64(lat.P50 - d.P50)
				add("added "+t, a)
				if n, ok := ix.get(r, "nginx", "plain_latency"); ok && n.P50 > d.P50 && t != "direct" {
					add("addratio "+t, a/float64(n.P50-d.P50))
				}
			}
			if n, ok := ix.get(r, "nginx", "plain"); ok && n.PerS > 0 {
				add("rpsratio "+t, load.PerS/n.PerS)
			}
		}
	}
	fmt.Fprintf(&b, "| target | p50 µs | p99 µs | added p50 µs | rps c=%d | added-p50 ratio vs nginx | rps ratio vs nginx |\n|---|---|---|---|---|---|---|\n", conns)
	for _, t := range targets {
		added, addratio := stat(v["added "+t], "%.0f", "n/a"), stat(v["addratio "+t], "%.2f", "n/a")
		if t == "direct" {
			added, addratio = "0", "-"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", t, stat(v["p50 "+t], "%.0f", "n/a"), stat(v["p99 "+t], "%.0f", "n/a"),
			added, stat(v["rps "+t], "%.0f", "n/a"), addratio, stat(v["rpsratio "+t], "%.2f", "n/a"))
	}
	busy := func(k string) string {
		var parts []string
		for _, t := range targets {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", t, median(slices.Clone(v[k+" "+t]))))
		}
		return strings.Join(parts, ", ")
	}
	if split {
		fmt.Fprintf(&b, "\nCPU busy during the c=%d runs (median), server CPU: %s; wrk CPU: %s\n", conns, busy("srv"), busy("cli"))
	} else {
		fmt.Fprintf(&b, "\nCPU busy during the c=%d runs (median), all CPUs: %s\n", conns, busy("srv"))
	}
	b.WriteString(otherLine(other, worst, worstAt))
	ok := true
	if slices.Contains(targets, "fenec-entry") && slices.Contains(targets, "nginx") && slices.Contains(targets, "direct") {
		ar, rr := median(v["addratio fenec-entry"]), median(v["rpsratio fenec-entry"])
		okA, okR := ar <= 1.1, rr >= 0.9
		ok = okA && okR
		fmt.Fprintf(&b, "\nfloor: fenec-entry added p50 %.3fx nginx (want <= 1.1): %s; requests/s %.3fx nginx (want >= 0.9): %s\n", ar, verdict(okA), rr, verdict(okR))
	}

	// The pairs over only the rounds in which neither run had more than stealMax% steal.
	fmt.Fprintf(&b, "\nPaired per round over the rounds with at most %d%% steal in both runs (ratios of requests/s at c=32, p50 and p99 at c=1):\n\n| pair | rounds | requests/s | p50 | p99 |\n|---|---|---|---|---|\n", stealMax)
	pair := func(a, c string) {
		var x, y, z []float64
		for _, r := range rounds {
			la, ok1 := ix.get(r, a, "plain_latency")
			lc, ok2 := ix.get(r, c, "plain_latency")
			pa, ok3 := ix.get(r, a, "plain")
			pc, ok4 := ix.get(r, c, "plain")
			if !ok1 || !ok2 || !ok3 || !ok4 || steal[[2]any{r, a}] > stealMax || steal[[2]any{r, c}] > stealMax || pc.PerS <= 0 || lc.P50 <= 0 || lc.P99 <= 0 {
				continue
			}
			x, y, z = append(x, pa.PerS/pc.PerS), append(y, float64(la.P50)/float64(lc.P50)), append(z, float64(la.P99)/float64(lc.P99))
		}
		if len(x) == 0 {
			fmt.Fprintf(&b, "| %s / %s | 0 of %d | - | - | - |\n", a, c, len(rounds))
			return
		}
		fmt.Fprintf(&b, "| %s / %s | %d of %d | %.2f | %.2f | %.2f |\n", a, c, len(x), len(rounds), median(x), median(y), median(z))
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
		b.WriteString(", and the requests/s against nginx's that these costs give on the shared server CPU, (1 + nginx) / (1 + target), paired per round:\n\n| target | CPU vs upstream | requests/s vs nginx at equal host speed |\n|---|---|---|\n")
	} else {
		b.WriteString(":\n\n| target | CPU vs upstream |\n|---|---|\n")
	}
	for _, t := range targets {
		if t == "direct" {
			continue
		}
		var x, y []float64
		for _, r := range rounds {
			if l, ok := ix.get(r, t, "plain"); ok && l.CPUvsUp > 0 {
				x = append(x, l.CPUvsUp)
				if n, ok := ix.get(r, "nginx", "plain"); ok && n.CPUvsUp > 0 {
					y = append(y, (1+n.CPUvsUp)/(1+l.CPUvsUp))
				}
			}
		}
		if split {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", t, stat(x, "%.2f", "-"), stat(y, "%.2f", "-"))
		} else {
			fmt.Fprintf(&b, "| %s | %s |\n", t, stat(x, "%.2f", "-"))
		}
	}
	// Where a request's CPU goes, process by process: a target that costs wrk or the upstream
	// more (smaller batches, more wake-ups) is slower for it on shared CPUs.
	b.WriteString("\nCPU µs a request in the c=32 run, by process (a host-speed change moves them all), and all three against nginx's run, paired per round:\n\n| target | wrk | upstream | target | all | all vs nginx |\n|---|---|---|---|---|---|\n")
	for _, t := range targets {
		var w, u, a, s, y []float64
		for _, r := range rounds {
			l, ok := ix.get(r, t, "plain")
			if !ok || l.CPUus == nil {
				continue
			}
			c := l.CPUus
			w, u, a, s = append(w, c.Client), append(u, c.Upstream), append(a, c.Target), append(s, c.Client+c.Upstream+c.Target)
			if n, ok := ix.get(r, "nginx", "plain"); ok && n.CPUus != nil && n.CPUus.Client+n.CPUus.Upstream+n.CPUus.Target > 0 {
				y = append(y, s[len(s)-1]/(n.CPUus.Client+n.CPUus.Upstream+n.CPUus.Target))
			}
		}
		if len(w) > 0 {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", t, stat(w, "%.1f", "-"), stat(u, "%.1f", "-"), stat(a, "%.1f", "-"), stat(s, "%.1f", "-"), stat(y, "%.2f", "-"))
		}
	}
	fmt.Fprintf(&b, "\nMedian over %d interleaved rounds (min-max); added p50 and the ratios are paired per round.\n", len(rounds))
	var st []float64
	sw, swAt := 0, ""
	for _, r := range rounds {
		for _, t := range targets {
			if s, ok := steal[[2]any{r, t}]; ok {
				st = append(st, float64(s))
				if s > sw {
					sw, swAt = s, fmt.Sprintf("round %d, %s", r, t)
				}
			}
		}
	}
	b.WriteString("\n" + stealLine(st, sw, swAt))
	return b.String(), ok
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

func otherLine(v []float64, worst int, at string) string {
	if worst == 0 {
		return "- other processes during the runs: none measured\n"
	}
	m := median(slices.Clone(v))
	s := fmt.Sprintf("- other processes during the runs: median %.0f%% of a CPU, worst %d%% (%s)", m, worst, at)
	if m > idleMax {
		s += ": noisy, run again on a quiet machine"
	} else if worst > idleMax {
		s += ": distrust that run if it stands out in the raw file"
	}
	return s + "\n"
}

func stealLine(v []float64, worst int, at string) string {
	if worst == 0 {
		return "- steal (the hypervisor running other guests): none measured\n"
	}
	s := fmt.Sprintf("- steal (the hypervisor running other guests): median %.0f%% of the CPU time, worst %d%% (%s)", median(slices.Clone(v)), worst, at)
	if worst > stealMax {
		s += fmt.Sprintf("; runs above %d%% are slowed by the host, not by the targets", stealMax)
	}
	return s + "\n"
}

// A row of the protocols table: which measurement it reads, how, and which way is better.
type protoRow struct {
	metric, measurement, label, better, format string
	value                                      func(result) float64
}

func protoRows(o proxiesOpts) []protoRow {
	perS := func(x result) float64 { return x.PerS }
	p50 := func(x result) float64 { return float64(x.P50) }
	p99 := func(x result) float64 { return float64(x.P99) }
	kb := func(x result) float64 { return x.KBPerConn }
	h2 := fmt.Sprintf("-c%d -m%d", o.h2Clients, o.h2Streams)
	return []protoRow{
		{"plain_rps", "plain", fmt.Sprintf("plain HTTP/1.1 requests/s, c=%d", o.conns), "higher", "%.0f", perS},
		{"plain_p50", "plain_latency", "plain HTTP/1.1 p50 µs, c=1", "lower", "%.0f", p50},
		{"plain_p99", "plain_latency", "plain HTTP/1.1 p99 µs, c=1", "lower", "%.0f", p99},
		{"https_rps", "https", fmt.Sprintf("HTTPS HTTP/1.1 requests/s, c=%d", o.conns), "higher", "%.0f", perS},
		{"https_p50", "https_latency", "HTTPS HTTP/1.1 p50 µs, c=1", "lower", "%.0f", p50},
		{"https_p99", "https_latency", "HTTPS HTTP/1.1 p99 µs, c=1", "lower", "%.0f", p99},
		{"h2_rps", "h2", "h2 (TLS) requests/s, " + h2, "higher", "%.0f", perS},
		{"h2c_rps", "h2c", "h2c requests/s, " + h2, "higher", "%.0f", perS},
		{"handshakes", "handshakes", "full TLS handshakes/s, one at a time", "higher", "%.0f", perS},
		{"resumed", "resumption", fmt.Sprintf("sessions resumed, of %d reconnects", o.resumes), "higher", "%g/" + fmt.Sprint(o.resumes),
			func(x result) float64 { return float64(x.Resumed) }},
		{"idle_kb", "idle", fmt.Sprintf("KB per idle keep-alive connection (%d held)", o.idleConns), "lower", "%.2f", kb},
		{"stream_kb", "streams", fmt.Sprintf("KB per open event stream (%d held)", o.streams), "lower", "%.2f", kb},
	}
}

// protocolsReport is -mode protocols' table: a row per measurement of -rows, each target's
// figure and CPU µs a request, and the ratios of every target against nginx and of fenec-entry
// against fenec-entry-b. BROKEN: the target failed that protocol's check (broken, by target
// and measurement); MISSING: no measurement where one was due; ⚠ N err: failed requests.
func protocolsReport(rs []result, targets []string, o proxiesOpts, broken map[[2]string]string) string {
	ix, rounds := index(rs)
	rows := o.rows
	var b strings.Builder
	type pairT struct{ a, c string }
	var pairs []pairT
	for _, t := range targets {
		if t != "nginx" {
			pairs = append(pairs, pairT{t, "nginx"})
		}
	}
	if slices.Contains(targets, "fenec-entry-b") {
		pairs = append(pairs, pairT{"fenec-entry", "fenec-entry-b"})
	}
	b.WriteString("| measurement | better |")
	sep := "|---|---|"
	for _, t := range targets {
		fmt.Fprintf(&b, " %s | %s CPU µs |", t, t)
		sep += "---|---|"
	}
	for _, p := range pairs {
		fmt.Fprintf(&b, " %s / %s | CPU %s / %s |", p.a, p.c, p.a, p.c)
		sep += "---|---|"
	}
	b.WriteString("\n" + sep + "\n")
	for _, row := range protoRows(o) {
		base := strings.TrimSuffix(row.measurement, "_latency")
		if !strings.Contains(","+rows+",", ","+base+",") {
			continue
		}
		val := func(r int, t string) (v, cpu float64, ok bool) {
			x, ok := ix.get(r, t, row.measurement)
			cpu = math.NaN()
			if ok && x.CPUus != nil {
				cpu = x.CPUus.Target
			}
			return row.value(x), cpu, ok
		}
		fmt.Fprintf(&b, "| %s | %s |", row.label, row.better)
		for _, t := range targets {
			var vs, cs []float64
			var errs int64
			for _, r := range rounds {
				if v, c, ok := val(r, t); ok {
					vs = append(vs, v)
					if !math.IsNaN(c) {
						cs = append(cs, c)
					}
					x, _ := ix.get(r, t, row.measurement)
					errs += x.Errors + int64(x.Closed)
				}
			}
			cell, cpu := stat(vs, row.format, "MISSING"), stat(cs, "%.1f", "-")
			if broken[[2]string{t, row.measurement}] != "" {
				cell, cpu = "BROKEN", "-"
			} else if errs > 0 && len(vs) > 0 {
				cell += fmt.Sprintf(" ⚠ %d err", errs)
			}
			fmt.Fprintf(&b, " %s | %s |", cell, cpu)
		}
		for _, p := range pairs {
			var x, y []float64
			for _, r := range rounds {
				va, ca, oka := val(r, p.a)
				vc, cc, okc := val(r, p.c)
				if oka && okc && vc > 0 {
					x = append(x, va/vc)
				}
				if oka && okc && cc > 0 && !math.IsNaN(ca) {
					y = append(y, ca/cc)
				}
			}
			fmt.Fprintf(&b, " %s | %s |", stat(x, "%.2f", "-"), stat(y, "%.2f", "-"))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nMedian over %d interleaved rounds (min-max); each ratio is paired per round (this round's target over this round's nginx), then the median taken.\n", len(rounds))
	b.WriteString("CPU µs: the target's CPU (user + system, every process of it) over the requests of the run; in the handshakes row, over the connections (a full handshake and one request each).\n")
	fmt.Fprintf(&b, "p50/p99: wrk -t1 -c1 --latency, %ds in %d slices taking turns with the other targets, merged; requests/s: wrk -t2 -c%d, %ds; h2, h2c: h2load -t2 -c%d -m%d -D %d;\n",
		o.secs, o.slices, o.conns, o.secs, o.h2Clients, o.h2Streams, o.secs)
	fmt.Fprintf(&b, "handshakes: openssl s_time -new -www %s -time %d (one connection at a time, each a full handshake and a GET); resumption: openssl s_client -sess_in (the last session saved) -sess_out, %d reconnects, \"Reused\" counted;\n", reqPath, o.secs, o.resumes)
	b.WriteString("memory: (RSS after - before) / connections held, a fresh target each time (fenec-entry: every process of it; nginx: its worker), 1 KB = 1024 B.\n")
	b.WriteString("⚠ N err: failed or non-2xx requests in those runs, or held connections the proxy closed (raw file); BROKEN: the target failed that protocol's check by hand (below) and was not measured on it.\n\n")
	var busy []string
	var other, steal []float64
	ow, sw, owAt, swAt := 0, 0, "", ""
	for _, m := range []string{"plain", "https", "h2", "h2c", "handshakes"} {
		var parts []string
		for _, t := range targets {
			var v []float64
			for _, r := range rounds {
				if x, ok := ix.get(r, t, m); ok {
					v = append(v, float64(x.srvBusy))
				}
			}
			if len(v) > 0 {
				parts = append(parts, fmt.Sprintf("%s %.0f%%", t, median(v)))
			}
		}
		if len(parts) > 0 {
			busy = append(busy, m+": "+strings.Join(parts, ", "))
		}
	}
	for _, x := range rs {
		if x.Measurement == "idle" || x.Measurement == "streams" || x.Measurement == "resumption" {
			continue
		}
		other, steal = append(other, float64(x.Other)), append(steal, float64(x.Steal))
		at := fmt.Sprintf("round %d, %s, %s", x.Round, x.Target, x.Measurement)
		if x.Other > ow {
			ow, owAt = x.Other, at
		}
		if x.Steal > sw {
			sw, swAt = x.Steal, at
		}
	}
	fmt.Fprintf(&b, "- server CPU busy during the load runs (median): %s\n", strings.Join(busy, "; "))
	b.WriteString(otherLine(other, ow, owAt) + stealLine(steal, sw, swAt))
	var bs []string
	for k, why := range broken {
		bs = append(bs, fmt.Sprintf("- BROKEN: %s, %s\n", k[0], why))
	}
	slices.Sort(bs)
	bs = slices.Compact(bs)
	b.WriteString(strings.Join(bs, ""))
	return b.String()
}
