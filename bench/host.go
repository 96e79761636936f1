//go:build linux

package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// What a bench reads of the host from /proc: CPU ticks (the machine's, each process's),
// steal, memory, children.

// clkTck is the kernel's USER_HZ, the unit of /proc's ticks: 100 on every Linux Go supports.
const clkTck = 100

func numCPU() int { return runtime.NumCPU() }

// statFields is /proc/PID/stat from the state on (the fields after the command name, which
// may hold spaces and parentheses): f[0] state, f[1] ppid, f[11] utime, f[12] stime,
// f[13] cutime, f[14] cstime.
func statFields(stat string) []string {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(stat[i+1:])
}

func statInt(f []string, i int) int64 {
	if i >= len(f) {
		return 0
	}
	v, _ := strconv.ParseInt(f[i], 10, 64)
	return v
}

// cpuOf is the user and system CPU ticks of the processes (and, with kids, of their
// children: nginx's workers); gone ones count 0.
func cpuOf(kids bool, pids ...int) int64 {
	u, s := ticks(kids, pids...)
	return u + s
}

func ticks(kids bool, pids ...int) (user, sys int64) {
	for _, pid := range pids {
		all := []int{pid}
		if kids {
			all = append(all, children(pid)...)
		}
		for _, p := range all {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
			f := statFields(string(b))
			user += statInt(f, 11)
			sys += statInt(f, 12)
		}
	}
	return user, sys
}

// selfTicks is this process's CPU ticks with those of its reaped children (wrk, h2load, ...).
func selfTicks() int64 {
	b, _ := os.ReadFile("/proc/self/stat")
	f := statFields(string(b))
	return statInt(f, 11) + statInt(f, 12) + statInt(f, 13) + statInt(f, 14)
}

// children lists the processes whose parent is pid, in pid order.
func children(pid int) []int { return childrenOf("/proc", pid) }

// childrenOf lists the processes under procRoot whose parent is pid, in pid order.
func childrenOf(procRoot string, pid int) []int {
	ents, _ := os.ReadDir(procRoot)
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "stat"))
		if f := statFields(string(b)); err == nil && len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// statusField is a "Name:   1234 kB" field of /proc/PID/status, in bytes.
func statusField(status, name string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != name {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 2 && f[1] == "kB" {
			if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb >= 0 {
				return kb * 1024, nil
			}
		}
		return 0, fmt.Errorf("%s: %q is not a size in kB", name, strings.TrimSpace(v))
	}
	return 0, fmt.Errorf("no %s field", name)
}

// rssKB is the VmRSS of the processes, in KiB.
func rssKB(pids ...int) (int64, error) {
	var sum int64
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			return 0, err
		}
		v, err := statusField(string(b), "VmRSS")
		if err != nil {
			return 0, fmt.Errorf("pid %d: %w", p, err)
		}
		sum += v / 1024
	}
	return sum, nil
}

// cpuStat is /proc/stat's per-CPU lines: busy (all but idle and iowait), total, and what
// processes are charged with (user + nice + system), in ticks; and steal over every CPU.
type cpuStat struct {
	busy, total, proc []int64
	steal, all        int64
}

func readCPU() cpuStat {
	var s cpuStat
	b, _ := os.ReadFile("/proc/stat")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		var v [8]int64
		var t int64
		for i := range v {
			v[i], _ = strconv.ParseInt(f[i+1], 10, 64)
			t += v[i]
		}
		s.busy = append(s.busy, t-v[3]-v[4])
		s.total = append(s.total, t)
		s.proc = append(s.proc, v[0]+v[1]+v[2])
		s.steal += v[7]
		s.all += t
	}
	return s
}

// window is the host over a run: each CPU's busy %, the steal %, and the CPU that processes
// this run did not start took, in % of one CPU (top's way).
type window struct {
	cpu0         cpuStat
	ours0        int64
	ours         func() int64
	Busy         []int
	Steal, Other int
}

// openWindow starts a window; ours is the CPU ticks of everything this run runs.
func openWindow(ours func() int64) *window {
	return &window{cpu0: readCPU(), ours0: ours(), ours: ours}
}

func (w *window) close() {
	c := readCPU()
	var proc, wall int64
	for i := range min(len(c.busy), len(w.cpu0.busy)) {
		d := c.total[i] - w.cpu0.total[i]
		w.Busy = append(w.Busy, pct(c.busy[i]-w.cpu0.busy[i], d))
		proc += c.proc[i] - w.cpu0.proc[i]
		wall += d
	}
	w.Steal = pct(c.steal-w.cpu0.steal, c.all-w.cpu0.all)
	if n := int64(len(w.Busy)); wall > 0 {
		w.Other = max(0, pct(proc-(w.ours()-w.ours0), wall/n))
	}
}

func pct(a, b int64) int {
	if b <= 0 {
		return 0
	}
	return int(math.Round(100 * float64(a) / float64(b)))
}

// meanBusy is the mean busy % of CPUs from..to-1 of a window.
func meanBusy(busy []int, from, to int) int {
	to = min(to, len(busy))
	if from >= to {
		return 0
	}
	s := 0
	for _, b := range busy[from:to] {
		s += b
	}
	return int(math.Round(float64(s) / float64(to-from)))
}

// median sorts v and returns its median.
func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// stat is "median (min-max)" of v in format f, the median alone when the three print alike,
// none when v is empty.
func stat(v []float64, f, none string) string {
	if len(v) == 0 {
		return none
	}
	v = slices.Clone(v)
	m := median(v)
	lo, hi := fmt.Sprintf(f, v[0]), fmt.Sprintf(f, v[len(v)-1])
	if lo == hi {
		return fmt.Sprintf(f, m)
	}
	return fmt.Sprintf(f, m) + " (" + lo + "-" + hi + ")"
}
