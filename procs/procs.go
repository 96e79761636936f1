// Package procs runs the process on as many Ps (GOMAXPROCS) as its load needs, from one up
// to Go's default (the CPUs it may use), unless the operator fixed GOMAXPROCS.
//
// Why: with more Ps than busy goroutines, Go's scheduler keeps threads spinning in search of
// work and wakes one on another CPU each time a goroutine is made runnable (the h1 poller's
// hand-off, a worker given a connection). Under light load every request pays those wakes and
// the spinning takes CPU from the processes beside the entry. Measured on the 2-CPU bench
// host, nothing pinned, one request at a time: the entry on 2 Ps added 134 µs to a request, on
// 1 P 73 µs (nginx: 67 µs); at 32 connections its CPU a request was 25% higher on 2 Ps. But one
// P cannot use a second CPU when the load needs it: requests/s 0.92x nginx's on 1 P, 0.99x on
// 2 (docs/BENCHMARKS.md; docs/DECISIONS.md, "The entry runs on the Ps its load
// needs").
//
// The Controller reads the process's demand for CPU every Period (the CPU time its threads
// used, and the time they were ready to run but waited for a CPU: the kernel's run delay, so
// that a process starved by its neighbours on one P still asks for a second) and applies next:
// more Ps at once when the demand passed UpAt of its Ps' time, one fewer after DownAfter
// periods in a row below DownAt of one P fewer. Each change stops the world for some tens of
// microseconds; there is at most one a period, and a step down needs DownAfter quiet periods.
//
// It knows nothing of what the process serves: it reads the kernel's accounting of its
// threads, sets GOMAXPROCS and tells its caller (OnChange).
package procs

import (
	"context"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fenec/fenec-entry/internal/clock"
)

const (
	// DefaultPeriod is how often the demand for CPU is read.
	DefaultPeriod = 200 * time.Millisecond
	// UpAt: more Ps as soon as the process's demand passed this share of its Ps' time in a
	// period (enough Ps for that demand to be this share of them).
	UpAt = 0.75
	// DownAt and DownAfter: one P fewer once the demand stayed below DownAt of one P fewer for
	// DownAfter periods in a row (a second at the default period).
	DownAt    = 0.5
	DownAfter = 5
)

// Config says how a Controller reads the load and sets the Ps; the zero values are the
// process's own.
type Config struct {
	Max      int                  // the most Ps; 0: runtime.GOMAXPROCS(0) when New is called
	Period   time.Duration        // 0: DefaultPeriod
	Demand   func() time.Duration // CPU time the process used or waited for so far; nil: processDemand
	SetProcs func(n int)          // nil: runtime.GOMAXPROCS
	Clock    clock.Clock          // the wall time a period's demand is divided by; nil: the system clock
	OnChange func(from, to int)   // called after each change, if set (the node logs it)
}

// Controller follows the load with the Ps. Procs and Changes are safe to call at any time.
type Controller struct {
	cfg     Config
	procs   atomic.Int32
	changes atomic.Int64
}

// New returns a Controller starting at Max Ps (the process's own at start: under load at
// start, it is not slowed while the first periods are read).
func New(cfg Config) *Controller {
	if cfg.Max <= 0 {
		cfg.Max = runtime.GOMAXPROCS(0)
	}
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Demand == nil {
		cfg.Demand = processDemand
	}
	if cfg.SetProcs == nil {
		cfg.SetProcs = func(n int) { runtime.GOMAXPROCS(n) }
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System
	}
	c := &Controller{cfg: cfg}
	c.procs.Store(int32(cfg.Max))
	return c
}

// Procs is the number of Ps the Controller set last (Max before its first change).
func (c *Controller) Procs() int { return int(c.procs.Load()) }

// Max is the most Ps it sets.
func (c *Controller) Max() int { return c.cfg.Max }

// Changes counts the changes made.
func (c *Controller) Changes() int64 { return c.changes.Load() }

// Run follows the load until ctx ends; with Max 1 it returns at once (nothing to choose).
// On return the Ps are Max again.
func (c *Controller) Run(ctx context.Context) {
	if c.cfg.Max <= 1 {
		return
	}
	defer c.set(c.cfg.Max)
	t := time.NewTicker(c.cfg.Period)
	defer t.Stop()
	lastCPU, lastAt := c.cfg.Demand(), c.cfg.Clock.Now()
	low := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cpu, at := c.cfg.Demand(), c.cfg.Clock.Now()
		wall := at.Sub(lastAt)
		if wall <= 0 {
			continue
		}
		// CPUs demanded over the period; a thread gone took its counts along (never below 0).
		used := float64(max(cpu-lastCPU, 0)) / float64(wall)
		lastCPU, lastAt = cpu, at
		var n int
		n, low = next(c.Procs(), c.cfg.Max, used, low)
		c.set(n)
	}
}

func (c *Controller) set(n int) {
	from := c.Procs()
	if n == from {
		return
	}
	c.cfg.SetProcs(n)
	c.procs.Store(int32(n))
	c.changes.Add(1)
	if c.cfg.OnChange != nil {
		c.cfg.OnChange(from, n)
	}
}

// next is the policy: the Ps for the next period, given cur Ps, at most limit, the CPUs
// demanded in the last period, and low, the periods in a row the use was low enough for one P fewer
// (returned updated). Up: at least one P more, and enough for the use to be UpAt of them.
func next(cur, limit int, used float64, low int) (procs, lowAfter int) {
	if used > UpAt*float64(cur) && cur < limit {
		n := max(cur+1, int(math.Ceil(used/UpAt)))
		return min(n, limit), 0
	}
	if cur > 1 && used < DownAt*float64(cur-1) {
		if low+1 >= DownAfter {
			return cur - 1, 0
		}
		return cur, low + 1
	}
	return cur, 0
}

// processDemand is the CPU time the process's threads ran and waited to run so far
// (/proc/self/task/*/schedstat: the first two fields), or, where that cannot be read, its CPU
// time alone (getrusage).
func processDemand() time.Duration {
	if d, ok := schedDemand("/proc/self/task"); ok {
		return d
	}
	return processCPUTime()
}

// schedDemand sums the run and wait times of the threads under dir (a /proc task directory).
func schedDemand(dir string) (time.Duration, bool) {
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var sum int64
	buf := make([]byte, 128)
	for _, t := range tasks {
		f, err := os.Open(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread is gone
		}
		n, _ := f.Read(buf)
		f.Close()
		run, wait, ok := parseSchedstat(buf[:n])
		if !ok {
			return 0, false
		}
		sum += run + wait
	}
	return time.Duration(sum), true
}

// parseSchedstat reads "run_ns wait_ns slices\n".
func parseSchedstat(b []byte) (run, wait int64, ok bool) {
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, 0, false
	}
	run, err1 := strconv.ParseInt(f[0], 10, 64)
	wait, err2 := strconv.ParseInt(f[1], 10, 64)
	return run, wait, err1 == nil && err2 == nil && run >= 0 && wait >= 0
}
