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
// alone with GOMAXPROCS=n, restored from a copy of it (--state-dir); once /readyz answers 200
// and /status.json shows it holding the homes, and -settle seconds later, its VmRSS is read and
// it is stopped.

func memoryMain(args []string) error {
	fs := flag.NewFlagSet("memory", flag.ExitOnError)
	bin := fs.String("bin", "", "the fenec-entry binary (go build -o BIN ./cmd/fenec-entry); required")
	n := fs.Int("homes", 1_000_000, "homes in the state file the entry restores")
	procsFlag := fs.String("procs", "1,8", "values of GOMAXPROCS to start the entry with, comma-separated")
	settle := fs.Float64("settle", 5, "seconds to wait, once the entry holds the homes, before reading the memory")
	keep := fs.Bool("keep", false, "keep the temp dir (state file, each run's state dir and log)")
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
	fmt.Print(markdown(rep))
	for _, r := range rep.Runs {
		if r.Error != "" {
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

// memRun is the figures of one run, the entry started with GOMAXPROCS=Procs.
type memRun struct {
	Procs       int
	RSSMiB      float64
	Ratio       float64 // RSSMiB / the base run's
	HoldSeconds float64 // start to holding the homes
	Error       string  // the run could not be measured
}

type memReport struct {
	Homes  int
	Settle time.Duration
	Base   int // the run the ratios are to (-1: none measured)
	Runs   []memRun
}

// parseProcs reads -procs: distinct GOMAXPROCS values (1 to 1024), in the order given.
func parseProcs(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 || v > 1024 {
			return nil, fmt.Errorf("%q is not a GOMAXPROCS value (1 to 1024)", f)
		}
		if slices.Contains(out, v) {
			return nil, fmt.Errorf("%d given twice", v)
		}
		out = append(out, v)
	}
	return out, nil
}

func memoryRun(bin string, n int, procs []int, settle time.Duration, keep bool) (memReport, error) {
	rep := memReport{Homes: n, Settle: settle, Base: -1}
	dir, err := os.MkdirTemp("", "fenec-mem-")
	if err != nil {
		return rep, err
	}
	r := &run{name: "memory", tmp: dir, keep: keep, port: 19600}
	defer r.close()
	src := filepath.Join(dir, "state")
	if err := writeState(src, n); err != nil {
		return rep, fmt.Errorf("writing the state file: %w", err)
	}
	for _, p := range procs {
		res, err := r.measureMem(bin, n, p, src, filepath.Join(dir, fmt.Sprintf("procs-%d", p)), settle)
		if err != nil {
			res.Error = err.Error()
			r.logf("GOMAXPROCS=%d: %v", p, err)
		}
		rep.Runs = append(rep.Runs, res)
	}
	// The ratios are to GOMAXPROCS 1 (one process on one CPU) if it was measured, else to the
	// first measured.
	base := slices.IndexFunc(rep.Runs, func(r memRun) bool { return r.Error == "" && r.Procs == 1 })
	if base < 0 {
		base = slices.IndexFunc(rep.Runs, func(r memRun) bool { return r.Error == "" })
	}
	for i := range rep.Runs {
		if base >= 0 && rep.Runs[i].Error == "" {
			rep.Runs[i].Ratio, rep.Base = rep.Runs[i].RSSMiB/rep.Runs[base].RSSMiB, rep.Runs[base].Procs
		}
	}
	return rep, nil
}

// writeState writes a state file of n homes into dir, as bench/joiner does.
func writeState(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	t, err := homes.New(homes.Config{Regions: regions, Origin: nodeName, Capacity: n})
	if err != nil {
		return err
	}
	for i := range n {
		t.Learn(fmt.Sprintf("tenant-%012d", i), i%len(regions))
	}
	s, err := state.Open(state.Config{Dir: dir, Table: t, Node: nodeName, Logger: zerolog.Nop()})
	if err != nil {
		return err
	}
	_, err = s.Flush()
	return err
}

// measureMem starts the entry with GOMAXPROCS=procs, restored from a copy of src in sd, and
// reads its memory once it holds the n homes.
func (r *run) measureMem(bin string, n, procs int, src, sd string, settle time.Duration) (memRun, error) {
	res := memRun{Procs: procs}
	if err := os.Mkdir(sd, 0o700); err != nil {
		return res, err
	}
	b, err := os.ReadFile(filepath.Join(src, state.HomesFile))
	if err != nil {
		return res, err
	}
	if err := os.WriteFile(filepath.Join(sd, state.HomesFile), b, 0o600); err != nil {
		return res, err
	}
	a, err := r.addrs(7)
	if err != nil {
		return res, err
	}
	admin := a[2]
	args := []string{bin, "serve", "--homes", strconv.Itoa(n), "--routers", "eu=http://" + a[0] + ";us=http://" + a[1], // nothing listens: no request is sent
		"--node", nodeName, "--pop", "mem", "--listen", a[3], "--admin-listen", admin, "--gossip-bind", a[4], "--rpc-addr", a[5],
		"--state-dir", sd, "--drain", "1s", "--log-level", "info"}
	start := time.Now()
	// A pprof build listens on 127.0.0.1:6060 unless told: it is given a port of its own.
	p, err := r.start(fmt.Sprintf("entry-%d", procs), spec{env: []string{"GOMAXPROCS=" + strconv.Itoa(procs), "FENEC_ENTRY_PPROF_ADDR=" + a[6]}}, args...)
	if err != nil {
		return res, err
	}
	defer r.stop(p)
	held := 0
	for ; ; time.Sleep(250 * time.Millisecond) {
		var st struct {
			Homes struct {
				Held int `json:"held"`
			} `json:"homes"`
		}
		code, _, _ := get("http://"+admin+"/readyz", 0)
		_, b, _ := get("http://"+admin+"/status.json", 0)
		if json.Unmarshal(b, &st) == nil && code == 200 {
			if held = st.Homes.Held; held >= n {
				break
			}
		}
		if !p.alive() || time.Since(start) > holdTimeout {
			return res, fmt.Errorf("not ready holding %d homes within %v (held %d, exited: %v); log: %s", n, holdTimeout, held, !p.alive(), p.tail())
		}
	}
	res.HoldSeconds = time.Since(start).Seconds()
	time.Sleep(settle)
	// The Ps it runs on: GOMAXPROCS set, they are that (the procs package leaves them alone).
	_, b, err = get("http://"+admin+"/metrics", 0)
	if seen, ok, err2 := metricValue(string(b), "fenec_entry_procs"); errors.Join(err, err2) != nil || ok && seen != procs {
		return res, fmt.Errorf("started with GOMAXPROCS=%d, the entry runs on %d Ps (fenec_entry_procs): %w", procs, seen, errors.Join(err, err2))
	}
	kb, err := rssKB(p.pid)
	if err != nil || !p.alive() { // the pid read may be another process's by now
		return res, fmt.Errorf("reading the entry's memory (exited: %v): %w; log: %s", !p.alive(), err, p.tail())
	}
	res.RSSMiB = float64(kb) / 1024
	r.logf("GOMAXPROCS=%d: %.1f MiB resident, holding %d homes after %.1fs", procs, res.RSSMiB, n, res.HoldSeconds)
	return res, nil
}

// metricValue is the value of an unlabelled gauge in a Prometheus text exposition, as an
// integer; ok is false when the metric is absent.
func metricValue(text, name string) (v int, ok bool, err error) {
	for line := range strings.SplitSeq(text, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == name {
			x, err := strconv.ParseFloat(f[1], 64)
			if err != nil || x != float64(int(x)) {
				return 0, false, fmt.Errorf("%s: %q is not a whole number", name, f[1])
			}
			return int(x), true, nil
		}
	}
	return 0, false, nil
}

// markdown is the report as a table, a row per run.
func markdown(r memReport) string {
	base := "first run"
	if r.Base == 1 {
		base = "one process"
	} else if r.Base > 0 {
		base = fmt.Sprintf("GOMAXPROCS=%d", r.Base)
	}
	s := fmt.Sprintf("%d homes; resident memory (VmRSS) %v after the entry held them\n\n| GOMAXPROCS | MiB | × %s | held after |\n|---:|---:|---:|---:|\n", r.Homes, r.Settle, base)
	for _, l := range r.Runs {
		if l.Error != "" {
			s += fmt.Sprintf("| %d | failed: %s | | |\n", l.Procs, strings.ReplaceAll(strings.SplitN(l.Error, "\n", 2)[0], "|", `\|`))
		} else {
			s += fmt.Sprintf("| %d | %.0f | %.2f | %.1f s |\n", l.Procs, l.RSSMiB, l.Ratio, l.HoldSeconds)
		}
	}
	return s
}
