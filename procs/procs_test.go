package procs

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	for _, tc := range []struct {
		cur, limit int
		used       float64
		low        int
		want, wLow int
	}{
		{1, 2, 0.9, 0, 2, 0},  // one P busy past UpAt: the second
		{1, 8, 1.0, 3, 2, 0},  // enough for 1.0 at UpAt: 2
		{2, 8, 1.9, 0, 3, 0},  // 1.9 / 0.75: 3
		{4, 8, 6.0, 0, 8, 0},  // 6 / 0.75: 8 at once
		{4, 6, 6.0, 0, 6, 0},  // never past the limit
		{2, 2, 1.99, 0, 2, 0}, // at the limit already
		{2, 8, 1.5, 2, 2, 0},  // not past UpAt of 2, not below DownAt of 1: stays, the count reset
		{2, 8, 0.3, 0, 2, 1},  // low: counted
		{2, 8, 0.3, DownAfter - 2, 2, DownAfter - 1},
		{2, 8, 0.3, DownAfter - 1, 1, 0}, // the DownAfter-th low period: one P fewer
		{3, 8, 0.99, DownAfter - 1, 2, 0},
		{3, 8, 1.0, DownAfter - 1, 3, 0}, // 1.0 is not below DownAt of 2
		{1, 8, 0, 7, 1, 0},               // one P is the least
		{1, 1, 5, 0, 1, 0},
	} {
		t.Run(fmt.Sprint(tc.cur, "/", tc.limit, " used ", tc.used, " low ", tc.low), func(t *testing.T) {
			got, low := next(tc.cur, tc.limit, tc.used, tc.low)
			if got != tc.want || low != tc.wLow {
				t.Errorf("next = %d Ps (low %d), want %d (low %d)", got, low, tc.want, tc.wLow)
			}
		})
	}
}

// A load script through Run: each period's CPU use (in CPUs), the Ps set as the policy says,
// one step at a time, and Max again when Run ends.
func TestRunFollowsTheLoad(t *testing.T) {
	loads := []float64{0.9, 1.0, 1.6, 2.8, 1.0, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1}
	var (
		mu   sync.Mutex
		set  []int
		tick int
		cpu  time.Duration
		at   = time.Unix(1e9, 0)
	)
	const period = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := New(Config{
		Max:    4,
		Period: time.Millisecond,
		// Each reading after the first closes a period of the script; past its end, Run is
		// stopped.
		Demand: func() time.Duration {
			mu.Lock()
			defer mu.Unlock()
			if tick > 0 && tick <= len(loads) {
				cpu += time.Duration(loads[tick-1] * float64(period))
			}
			if tick == len(loads) {
				cancel()
			}
			return cpu
		},
		Clock: scriptClock(func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			tick++
			at = at.Add(period)
			return at
		}),
		SetProcs: func(n int) { mu.Lock(); set = append(set, n); mu.Unlock() },
	})
	// The script starts at 1 P: the Controller starts at Max and steps down first.
	c.procs.Store(1)
	c.Run(ctx)
	if ctx.Err() != context.Canceled {
		t.Fatal("Run returned before the script's end")
	}
	mu.Lock()
	defer mu.Unlock()
	// 0.9 on 1: 2. 1.0 on 2: stays. 1.6 on 2: 3. 2.8 on 3: 4. 1.0 on 4: stays (not below 1.5
	// of 3)... then 0.1 a period: one fewer every DownAfter periods: 3 after 5 low, 2 after 10.
	want := []int{2, 3, 4, 3, 2, 4}
	if fmt.Sprint(set) != fmt.Sprint(want) {
		t.Errorf("Ps set %v, want %v (the last: Max again as Run ends)", set, want)
	}
	if got := c.Changes(); got != int64(len(want)) {
		t.Errorf("Changes() = %d, want %d", got, len(want))
	}
	if c.Procs() != 4 {
		t.Errorf("Procs() = %d after Run, want Max 4", c.Procs())
	}
}

// With one P at most there is nothing to choose: Run returns at once and sets nothing.
func TestRunWithOneP(t *testing.T) {
	c := New(Config{Max: 1, SetProcs: func(int) { t.Error("SetProcs called with Max 1") }})
	done := make(chan struct{})
	go func() { c.Run(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run with Max 1 did not return")
	}
}

// The process's CPU time grows while it works.
func TestProcessCPUTime(t *testing.T) {
	before := processCPUTime()
	deadline := time.Now().Add(5 * time.Second)
	x := 0
	for processCPUTime() <= before {
		for i := range 1_000_000 {
			x += i
		}
		if time.Now().After(deadline) {
			t.Fatal("getrusage's CPU time did not grow in 5 s of work")
		}
	}
	_ = x
}

// The process's demand grows at least as its CPU time does, and its threads' schedstat
// files are read.
func TestProcessDemand(t *testing.T) {
	d0, ok := schedDemand("/proc/self/task")
	if !ok {
		t.Fatal("/proc/self/task/*/schedstat could not be read")
	}
	c0 := processCPUTime()
	deadline := time.Now().Add(5 * time.Second)
	x := 0
	for processCPUTime() < c0+20*time.Millisecond {
		for i := range 1_000_000 {
			x += i
		}
		if time.Now().After(deadline) {
			t.Fatal("no 20 ms of CPU in 5 s of work")
		}
	}
	_ = x
	d1, _ := schedDemand("/proc/self/task")
	if d1-d0 < 15*time.Millisecond {
		t.Errorf("demand grew %v over 20 ms of CPU", d1-d0)
	}
	if _, ok := schedDemand(t.TempDir()); ok {
		t.Error("an empty directory read as a demand")
	}
}

func TestParseSchedstat(t *testing.T) {
	for in, want := range map[string][3]int64{
		"3709102 120 1\n": {3709102, 120, 1},
		"5 6":             {5, 6, 1},
		"5":               {0, 0, 0},
		"":                {0, 0, 0},
		"x 6 1":           {0, 0, 0},
		"-5 6 1":          {0, 0, 0},
	} {
		run, wait, ok := parseSchedstat([]byte(in))
		if got := [3]int64{run, wait, b2i(ok)}; ok && got != want || !ok && want[2] != 0 {
			t.Errorf("parseSchedstat(%q) = %d %d %v, want %v", in, run, wait, ok, want)
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// scriptClock is a function used as a clock: the script's clock moves a period at each reading.
type scriptClock func() time.Time

func (f scriptClock) Now() time.Time { return f() }
