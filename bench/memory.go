//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/state"
)

// memory: the resident memory of the entry holding a million homes, as its default runs on an
// N-CPU host (GOMAXPROCS N) against one process on one CPU (GOMAXPROCS 1). A state file of
// -homes homes is written (package state); for each value n of -procs, fenec-entry serve starts
// alone with GOMAXPROCS=n and no layout flag, restored from a copy of it (--state-dir); once
// /readyz answers 200 and /status.json shows it holding the homes, and -settle seconds later,
// VmRSS and RssAnon of the process and of each of its children (an older build's workers, which
// /status.json lists and which are waited for too) are read; then the entry is stopped.

func memoryMain(args []string) error {
	fs := flag.NewFlagSet("memory", flag.ExitOnError)
	bin := fs.String("bin", "", "the fenec-entry binary (go build -o BIN ./cmd/fenec-entry); required")
	n := fs.Int("homes", 1_000_000, "homes in the state file the entry restores")
	procsFlag := fs.String("procs", "1,8", "values of GOMAXPROCS to start the entry with, comma-separated")
	settle := fs.Float64("settle", 5, "seconds to wait, once the entry holds the homes, before reading the memory")
	keep := fs.Bool("keep", false, "keep the temp dirs (state file, each run's state dir and log)")
	jsonOnly := fs.Bool("json", false, "print only the JSON line, not the markdown table")
	fs.Parse(args)
	procs, err := parseProcs(*procsFlag)
	switch {
	case *bin == "":
		return errors.New("-bin: required (go build -o BIN ./cmd/fenec-entry)")
	case err != nil:
		return fmt.Errorf("-procs: %w", err)
	case *n <= 0:
		return errors.New("-homes: must be positive")
	}
	abs, err := filepath.Abs(*bin)
	if err != nil {
		return err
	}
	rep, err := memoryRun(abs, *n, procs, time.Duration(*settle*float64(time.Second)), *keep)
	if err != nil {
		return err
	}
	if !*jsonOnly {
		fmt.Println(markdown(rep))
	}
	json.NewEncoder(os.Stdout).Encode(rep)
	for _, r := range rep.Runs {
		if r.Error != "" || !r.Complete {
			return fmt.Errorf("GOMAXPROCS=%d: not measured", r.Procs)
		}
	}
	return nil
}

// regions are the state file's homes' regions; the entry is given a router for each, or it
// would skip their homes at the restore (unknown region). No router needs to answer.
var regions = []string{"eu", "us"}

const (
	nodeName = "entry-mem" // the state file's writer and the entry's --node: its homes come back as local
	mib      = 1 << 20
)

// holdTimeout bounds a run from start to /readyz and the homes held (a variable: the test
// shortens it).
var holdTimeout = 120 * time.Second

// procMem is one process's resident memory.
type procMem struct {
	PID      int    `json:"pid"`
	Role     string `json:"role"` // entry (the process started), or child (an older build's worker)
	RSSBytes int64  `json:"rss_bytes"`
	// AnonBytes is the process's private anonymous memory (RssAnon: heap, stacks), the part
	// of its RSS that no other process shares; the rest is mostly the binary's mapped text.
	AnonBytes int64 `json:"anon_bytes"`
}

// procsResult is the figures of one run, the entry started with GOMAXPROCS=Procs.
type procsResult struct {
	Procs int `json:"procs"` // GOMAXPROCS in the entry's environment
	// ProcsSeen is the entry's own fenec_entry_procs (its /metrics) when read: Procs, or the
	// run is in error; 0 when the build has no such metric.
	ProcsSeen    int       `json:"procs_seen,omitempty"`
	Processes    int       `json:"processes"` // the entry's process and its children
	Mem          []procMem `json:"mem"`
	TotalMiB     float64   `json:"total_rss_mib"`
	TotalAnonMiB float64   `json:"total_anon_mib"`
	Ratio        float64   `json:"ratio"`           // TotalMiB / the base run's
	HoldSeconds  float64   `json:"hold_seconds"`    // start to holding the homes
	HomesHeld    []int     `json:"homes_held"`      // the entry's, then each worker's it lists, when measured
	Complete     bool      `json:"complete"`        // it (and every worker it lists) held every home in time
	Error        string    `json:"error,omitempty"` // the run could not be measured
}

type report struct {
	Homes         int           `json:"homes"`
	SettleSeconds float64       `json:"settle_seconds"`
	StateWriteSec float64       `json:"state_write_sec"`
	StateBytes    int64         `json:"state_bytes"`
	BaseProcs     int           `json:"base_procs"` // the run the ratios are to (-1: none measured)
	Runs          []procsResult `json:"runs"`
}

// maxProcs bounds -procs: far more Ps than any host here has CPUs, and what Go allows.
const maxProcs = 1024

// parseProcs reads -procs: distinct GOMAXPROCS values (1 to maxProcs), in the order given.
func parseProcs(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 || v > maxProcs {
			return nil, fmt.Errorf("%q is not a GOMAXPROCS value (1 to %d)", f, maxProcs)
		}
		if slices.Contains(out, v) {
			return nil, fmt.Errorf("%d given twice", v)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("no value")
	}
	return out, nil
}

func memoryRun(bin string, n int, procs []int, settle time.Duration, keep bool) (report, error) {
	rep := report{Homes: n, SettleSeconds: settle.Seconds()}
	dir, err := os.MkdirTemp("", "fenec-mem-")
	if err != nil {
		return rep, err
	}
	r := &run{name: "memory", tmp: dir, keep: keep, port: 19600}
	defer r.close()
	src := filepath.Join(dir, "state")
	if err := os.Mkdir(src, 0o700); err != nil {
		return rep, err
	}
	t0 := time.Now()
	if err := writeState(src, nodeName, n); err != nil {
		return rep, fmt.Errorf("writing the state file: %w", err)
	}
	rep.StateWriteSec = time.Since(t0).Seconds()
	if fi, err := os.Stat(filepath.Join(src, state.HomesFile)); err == nil {
		rep.StateBytes = fi.Size()
	}
	r.logf("state of %d homes written in %.1fs (%.1f MiB)", n, rep.StateWriteSec, float64(rep.StateBytes)/mib)

	for _, p := range procs {
		sd := filepath.Join(dir, fmt.Sprintf("procs-%d", p))
		res, err := r.measureMem(bin, n, p, src, sd, settle)
		if err != nil {
			res.Error = err.Error()
			r.logf("GOMAXPROCS=%d: %v", p, err)
		}
		rep.Runs = append(rep.Runs, res)
	}
	rep.BaseProcs = withRatios(rep.Runs)
	return rep, nil
}

// writeState writes a state file of n homes for node into dir, as bench/joiner does.
func writeState(dir, node string, n int) error {
	t, err := homes.New(homes.Config{Regions: regions, Origin: node, Capacity: n})
	if err != nil {
		return err
	}
	for i := range n {
		t.Learn(fmt.Sprintf("tenant-%012d", i), i%len(regions))
	}
	s, err := state.Open(state.Config{Dir: dir, Table: t, Node: node, Logger: zerolog.Nop()})
	if err != nil {
		return err
	}
	_, err = s.Flush()
	return err
}

// copyDir copies the regular files of src into dst (created).
func copyDir(src, dst string) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o600)
}

// measure starts the entry with GOMAXPROCS=procs, restored from a copy of src in sd, and reads
// the memory of its process and of its children once it holds the n homes.
func (r *run) measureMem(bin string, n, procs int, src, sd string, settle time.Duration) (procsResult, error) {
	res := procsResult{Procs: procs}
	if err := copyDir(src, sd); err != nil {
		return res, err
	}
	a, err := r.addrs(7)
	if err != nil {
		return res, err
	}
	var routers []string
	for i, reg := range regions {
		routers = append(routers, reg+"=http://"+a[i]) // nothing listens: no request is sent
	}
	admin := a[2]
	args := []string{bin, "serve", "--homes", strconv.Itoa(n),
		"--routers", strings.Join(routers, ";"), "--node", nodeName, "--pop", "mem",
		"--listen", a[3], "--admin-listen", admin, "--gossip-bind", a[4], "--rpc-addr", a[5],
		"--state-dir", sd, "--drain", "1s", "--log-level", "info"}
	r.logf("GOMAXPROCS=%d: starting %s", procs, strings.Join(args, " "))
	start := time.Now()
	// A pprof build listens on 127.0.0.1:6060 unless told: it is given a port of its own.
	p, err := r.start(fmt.Sprintf("entry-%d", procs), spec{env: []string{"GOMAXPROCS=" + strconv.Itoa(procs), "FENEC_ENTRY_PPROF_ADDR=" + a[6]}}, args...)
	if err != nil {
		return res, err
	}
	defer r.stop(p)

	deadline := start.Add(holdTimeout)
	if err := waitUntil(deadline, func() bool { return !p.alive() || ready(admin) }); err != nil || !p.alive() {
		return res, fmt.Errorf("/readyz not 200 within %v (exited: %v); log: %s", holdTimeout, !p.alive(), p.tail())
	}
	r.logf("GOMAXPROCS=%d: ready after %.1fs", procs, time.Since(start).Seconds())
	var st entryStatus
	held := func() bool {
		var err error
		if st, err = statusOf(admin); err != nil {
			return false
		}
		return st.holds(n)
	}
	if err := waitUntil(deadline, func() bool { return !p.alive() || held() }); err == nil && p.alive() {
		res.Complete = true
		res.HoldSeconds = time.Since(start).Seconds()
		r.logf("GOMAXPROCS=%d: holds %d homes after %.1fs", procs, n, res.HoldSeconds)
	} else {
		if !p.alive() {
			return res, fmt.Errorf("the entry exited; log: %s", p.tail())
		}
		r.logf("GOMAXPROCS=%d: the homes not all held within %v: %v; measured anyway", procs, holdTimeout, st.held())
	}
	time.Sleep(settle)
	if st2, err := statusOf(admin); err == nil {
		st = st2
	}
	res.HomesHeld = st.held()
	// The Ps it runs on: GOMAXPROCS set, they are that (the procs package leaves them alone).
	if seen, ok, err := procsOf(admin); err != nil {
		return res, err
	} else if ok {
		res.ProcsSeen = seen
		if seen != procs {
			return res, fmt.Errorf("started with GOMAXPROCS=%d, the entry runs on %d Ps (fenec_entry_procs)", procs, seen)
		}
	}

	pid := p.pid
	kids := children(pid)
	if want := st.workerPIDs(); !sameSet(kids, want) {
		r.logf("GOMAXPROCS=%d: the entry's children %v are not the workers /status.json shows %v", procs, kids, want)
	}
	for i, pid := range append([]int{pid}, kids...) {
		rss, err := statusKB(pid, "VmRSS")
		if err != nil {
			return res, err
		}
		anon, _ := statusKB(pid, "RssAnon") // absent before Linux 4.5
		role := "entry"
		if i > 0 {
			role = "child"
		}
		res.Mem = append(res.Mem, procMem{PID: pid, Role: role, RSSBytes: rss * 1024, AnonBytes: anon * 1024})
	}
	if !p.alive() { // the pid read may be another process's by now
		return res, fmt.Errorf("the entry exited while measured; log: %s", p.tail())
	}
	res.Processes = len(res.Mem)
	res.TotalMiB, res.TotalAnonMiB = totals(res.Mem)
	r.logf("GOMAXPROCS=%d: %d process(es), %.1f MiB resident in all", procs, res.Processes, res.TotalMiB)
	return res, nil
}

func sameSet(a, b []int) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// entryStatus is what this command reads of /status.json (status.Status). Workers is what an
// older build with worker processes lists there; this build lists none.
type entryStatus struct {
	Homes struct {
		Held int `json:"held"`
	} `json:"homes"`
	Workers []struct {
		Index int `json:"index"`
		PID   int `json:"pid"`
		Homes int `json:"homes"`
	} `json:"workers"`
}

// holds: the entry holds n homes, and so does every worker it lists (every slot with a process).
func (s entryStatus) holds(n int) bool {
	if s.Homes.Held < n {
		return false
	}
	for _, wk := range s.Workers {
		if wk.PID == 0 || wk.Homes < n {
			return false
		}
	}
	return true
}

// held is the entry's homes, then each worker's it lists.
func (s entryStatus) held() []int {
	out := []int{s.Homes.Held}
	for _, wk := range s.Workers {
		out = append(out, wk.Homes)
	}
	return out
}

func (s entryStatus) workerPIDs() []int {
	var out []int
	for _, wk := range s.Workers {
		if wk.PID != 0 {
			out = append(out, wk.PID)
		}
	}
	return out
}

func ready(admin string) bool {
	code, _, _, err := get("http://" + admin + "/readyz")
	return err == nil && code == 200
}

func statusOf(admin string) (entryStatus, error) {
	var st entryStatus
	code, _, b, err := get("http://" + admin + "/status.json")
	if err == nil && code != 200 {
		err = fmt.Errorf("/status.json: %d", code)
	}
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// procsOf reads fenec_entry_procs, the Ps the entry runs on, from its /metrics; ok is false
// when the build exports no such metric.
func procsOf(admin string) (procs int, ok bool, err error) {
	code, _, b, err := get("http://" + admin + "/metrics")
	if err == nil && code != 200 {
		err = fmt.Errorf("/metrics: %d", code)
	}
	if err != nil {
		return 0, false, err
	}
	return metricValue(string(b), "fenec_entry_procs")
}

// metricValue is the value of an unlabelled gauge in a Prometheus text exposition, as an
// integer; ok is false when the metric is absent.
func metricValue(text, name string) (v int, ok bool, err error) {
	for line := range strings.SplitSeq(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != name {
			continue
		}
		x, err := strconv.ParseFloat(f[1], 64)
		if err != nil || x != float64(int(x)) {
			return 0, false, fmt.Errorf("%s: %q is not a whole number", name, f[1])
		}
		return int(x), true, nil
	}
	return 0, false, nil
}

func waitUntil(deadline time.Time, ok func() bool) error {
	for {
		if ok() {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func totals(ps []procMem) (rssMiB, anonMiB float64) {
	var rss, anon int64
	for _, p := range ps {
		rss += p.RSSBytes
		anon += p.AnonBytes
	}
	return float64(rss) / mib, float64(anon) / mib
}

// withRatios sets each measured run's Ratio to its total over the base run's: GOMAXPROCS 1 (one
// process on one CPU) if it was measured, else the first measured. It returns the base's
// GOMAXPROCS (-1: none measured).
func withRatios(rs []procsResult) int {
	base := -1
	for i, r := range rs {
		if r.Error != "" || r.TotalMiB <= 0 {
			continue
		}
		if r.Procs == 1 {
			base = i
			break
		}
		if base < 0 {
			base = i
		}
	}
	if base < 0 {
		return -1
	}
	for i := range rs {
		if rs[i].Error == "" && rs[i].TotalMiB > 0 {
			rs[i].Ratio = rs[i].TotalMiB / rs[base].TotalMiB
		}
	}
	return rs[base].Procs
}

// markdown is the report as a table, a row per run.
func markdown(r report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d homes; resident memory (VmRSS) %gs after the entry held them\n\n", r.Homes, r.SettleSeconds)
	base := "first run"
	if r.BaseProcs == 1 {
		base = "one process"
	} else if r.BaseProcs > 0 {
		base = fmt.Sprintf("GOMAXPROCS=%d", r.BaseProcs)
	}
	fmt.Fprintf(&b, "| GOMAXPROCS | processes | entry MiB | each child MiB | total MiB | private (anon) MiB | × %s |\n", base)
	b.WriteString("|---:|---:|---:|---|---:|---:|---:|\n")
	for _, l := range r.Runs {
		if l.Error != "" {
			fmt.Fprintf(&b, "| %d | failed: %s | | | | | |\n", l.Procs, firstLine(l.Error))
			continue
		}
		var entry string
		var kids []string
		for _, p := range l.Mem {
			v := fmt.Sprintf("%.0f", float64(p.RSSBytes)/mib)
			if p.Role == "entry" {
				entry = v
			} else {
				kids = append(kids, v)
			}
		}
		ks := strings.Join(kids, ", ")
		if ks == "" {
			ks = "–"
		}
		if !l.Complete {
			ks += fmt.Sprintf(" (not all homes held: %v)", l.HomesHeld)
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %s | %.0f | %.0f | %.2f |\n",
			l.Procs, l.Processes, entry, ks, l.TotalMiB, l.TotalAnonMiB, l.Ratio)
	}
	return b.String()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.ReplaceAll(s, "|", `\|`)
}
