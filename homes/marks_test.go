package homes

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

const backoff = 10 * time.Second // the default ReadBackoff the tests rely on

// TestMarksByPlannedRequest is the failure marks of docs/REFERENCE.md, row by row, at the
// table: how long a failure counts depends on the request being planned, not on the one that
// failed (the failing request's kind is not even recorded).
func TestMarksByPlannedRequest(t *testing.T) {
	type probe struct {
		after           time.Duration // since the failure
		lenient, strict bool          // asked last by a read or keyed write / by a plain write
	}
	tests := map[string]struct {
		clearAfter time.Duration // a router answered this long after the failure (0: never)
		probes     []probe
	}{
		"reads and keyed writes ask it last for the read backoff, then first again": {
			probes: []probe{{0, true, true}, {backoff - time.Nanosecond, true, true}, {backoff, false, true}},
		},
		"plain writes ask it last until a router answers, however long": {
			probes: []probe{{backoff, false, true}, {24 * time.Hour, false, true}},
		},
		"an answer clears it for every request, before the backoff": {
			clearAfter: time.Second,
			probes:     []probe{{time.Second - 1, true, true}, {time.Second, false, false}},
		},
		"an answer after the backoff clears it for plain writes": {
			clearAfter: time.Minute,
			probes:     []probe{{time.Minute - 1, false, true}, {time.Minute, false, false}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tbl, clk := newTestTable(t, nil)
			tbl.Mark(us)
			var at time.Duration
			for _, p := range tt.probes {
				if tt.clearAfter != 0 && at < tt.clearAfter && p.after >= tt.clearAfter {
					clk.Advance(tt.clearAfter - at)
					at = tt.clearAfter
					if !tbl.Clear(us) {
						t.Fatal("Clear of a failing region reported it was not failing")
					}
				}
				clk.Advance(p.after - at)
				at = p.after
				if got := tbl.Marked(us, Lenient); got != p.lenient {
					t.Errorf("%v after the failure: Marked(us, Lenient) = %v, want %v", p.after, got, p.lenient)
				}
				if got := tbl.Marked(us, Strict); got != p.strict {
					t.Errorf("%v after the failure: Marked(us, Strict) = %v, want %v", p.after, got, p.strict)
				}
				if tbl.Marked(eu, Strict) || tbl.Marked(ap, Strict) {
					t.Error("another region is marked")
				}
			}
		})
	}
}

// TestLatestFailureCounts pins that a new failure restarts the read backoff.
func TestLatestFailureCounts(t *testing.T) {
	tbl, clk := newTestTable(t, nil)
	tbl.Mark(eu)
	clk.Advance(backoff)
	if tbl.Marked(eu, Lenient) {
		t.Fatal("still asked last by reads after the backoff")
	}
	tbl.Mark(eu) // a read asked it first again and it failed again
	clk.Advance(backoff - time.Nanosecond)
	if !tbl.Marked(eu, Lenient) {
		t.Error("the backoff did not restart at the latest failure")
	}
	clk.Advance(time.Nanosecond)
	if tbl.Marked(eu, Lenient) || !tbl.Marked(eu, Strict) {
		t.Errorf("after the latest failure's backoff: lenient %v strict %v, want false true",
			tbl.Marked(eu, Lenient), tbl.Marked(eu, Strict))
	}
}

func TestReadBackoffConfigured(t *testing.T) {
	tbl, clk := newTestTable(t, func(c *Config) { c.ReadBackoff = 3 * time.Second })
	tbl.Mark(eu)
	clk.Advance(3*time.Second - 1)
	if !tbl.Marked(eu, Lenient) {
		t.Error("failure stopped counting for reads before the configured ReadBackoff")
	}
	clk.Advance(1)
	if tbl.Marked(eu, Lenient) {
		t.Error("failure counted for reads past the configured ReadBackoff")
	}
}

// TestReadBackoffRealClock runs the system clock (nil Config.Clock) in a synctest bubble,
// whose time moves only when every goroutine in it sleeps: no real waiting.
func TestReadBackoffRealClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tbl, err := New(Config{Regions: testRegions, Origin: "e1"})
		if err != nil {
			t.Fatal(err)
		}
		tbl.Mark(ap)
		time.Sleep(backoff - time.Nanosecond)
		if !tbl.Marked(ap, Lenient) {
			t.Error("failure stopped counting for reads before ReadBackoff")
		}
		time.Sleep(time.Nanosecond)
		if tbl.Marked(ap, Lenient) || !tbl.Marked(ap, Strict) {
			t.Error("after ReadBackoff: want asked last by plain writes only")
		}
	})
}

func TestMarkedSet(t *testing.T) {
	many := make([]string, MaxRegions)
	for i := range many {
		many[i] = fmt.Sprint("r", i)
	}
	tbl, clk := newTestTable(t, func(c *Config) { c.Regions = many })
	if s := tbl.MarkedSet(Strict) | tbl.MarkedSet(Lenient); s != 0 {
		t.Fatalf("MarkedSet of an unmarked table = %#x", s)
	}
	tbl.Mark(0)
	tbl.Mark(5)
	tbl.Mark(63)
	clk.Advance(time.Second)
	tbl.Mark(7) // a second after the others
	all := uint64(1<<0 | 1<<5 | 1<<7 | 1<<63)
	if got := tbl.MarkedSet(Lenient); got != all {
		t.Errorf("MarkedSet(Lenient) = %#x, want %#x", got, all)
	}
	clk.Advance(backoff - time.Second)
	if got, want := tbl.MarkedSet(Lenient), uint64(1<<7); got != want {
		t.Errorf("MarkedSet(Lenient) after the first backoffs ended = %#x, want %#x", got, want)
	}
	if got := tbl.MarkedSet(Strict); got != all {
		t.Errorf("MarkedSet(Strict) = %#x, want %#x", got, all)
	}
	if got := tbl.Failing(); got != all {
		t.Errorf("Failing() = %#x, want %#x", got, all)
	}
	for i := range many {
		for _, req := range []Planned{Lenient, Strict} {
			if got, want := tbl.Marked(i, req), tbl.MarkedSet(req)&(1<<i) != 0; got != want {
				t.Errorf("Marked(%d, %v) = %v, MarkedSet says %v", i, req, got, want)
			}
		}
	}
	if st := tbl.Stats(); st.Marked != 4 {
		t.Errorf("Stats().Marked = %d, want 4 (failing regions)", st.Marked)
	}
	tbl.Clear(5)
	if st := tbl.Stats(); st.Marked != 3 {
		t.Errorf("Stats().Marked after a clear = %d, want 3", st.Marked)
	}
}

func TestClear(t *testing.T) {
	tests := map[string]struct {
		before    func(*Table, *testutil.Clock)
		wantClear bool // a clear on the feed
	}{
		"not failing": {func(*Table, *testutil.Clock) {}, false},
		"failed":      {func(t *Table, _ *testutil.Clock) { t.Mark(eu) }, true},
		"failed twice": {func(t *Table, c *testutil.Clock) {
			t.Mark(eu)
			c.Advance(2 * time.Second)
			t.Mark(eu)
		}, true},
		"a peer's failure": {func(t *Table, _ *testutil.Clock) { t.ApplyMark(failure("eu", 5, "e2")) }, true},
		"failed past the read backoff": {func(t *Table, c *testutil.Clock) {
			t.Mark(eu)
			c.Advance(backoff)
		}, true}, // plain writes still ask it last: the clear must travel
		"already cleared":      {func(t *Table, _ *testutil.Clock) { t.Mark(eu); t.Clear(eu) }, false},
		"cleared by a peer":    {func(t *Table, _ *testutil.Clock) { t.Mark(eu); t.ApplyMark(clearOf("eu", 60_000, "e2")) }, false},
		"a peer's older clear": {func(t *Table, _ *testutil.Clock) { t.Mark(eu); t.ApplyMark(clearOf("eu", -1, "e2")) }, true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tbl, clk := newTestTable(t, nil)
			tt.before(tbl, clk)
			drain(tbl)
			hlcBefore := tbl.hlc.last.Load()
			if got := tbl.Clear(eu); got != tt.wantClear {
				t.Errorf("Clear = %v, want %v", got, tt.wantClear)
			}
			feed := drain(tbl)
			if got := len(feed) == 1 && feed[0].Kind == ChangeMark && feed[0].Mark.Clear; got != tt.wantClear || len(feed) > 1 {
				t.Errorf("feed after Clear %+v, want a clear: %v", feed, tt.wantClear)
			}
			if !tt.wantClear && tbl.hlc.last.Load() != hlcBefore {
				t.Error("a Clear that ended nothing made a version")
			}
			if tbl.Marked(eu, Strict) {
				t.Error("still failing after Clear")
			}
			if w := tbl.marks[eu].word.Load(); w != 0 {
				t.Errorf("mark word %#x after Clear, want 0 so the next Clear is one load", w)
			}
			if len(feed) == 1 && (!feed[0].Mark.At.Equal(clk.Now()) || feed[0].Mark.Observer != "e1") {
				t.Errorf("clear %+v, want at %v by e1", feed[0].Mark, clk.Now())
			}
		})
	}
}

// TestMarkFeed pins when Mark publishes: when the region starts failing, and when a failure
// is more than a second newer than the one last sent.
func TestMarkFeed(t *testing.T) {
	type step struct {
		advance time.Duration
		region  int
		clear   bool // Clear instead of Mark
		sends   bool
	}
	tests := map[string][]step{
		"new failure, then the same every request": {
			{0, eu, false, true}, {0, eu, false, false}, {0, eu, false, false},
		},
		"failures a second apart": {
			{0, eu, false, true},
			{500 * time.Millisecond, eu, false, false},
			{500 * time.Millisecond, eu, false, false}, // 1 s past the one sent: not more than 1 s
			{time.Millisecond, eu, false, true},        // 1.001 s: sent
			{100 * time.Millisecond, eu, false, false},
		},
		"failure after a clear is new": {
			{0, eu, false, true}, {0, eu, true, true}, {0, eu, false, true},
		},
		"failure after the read backoff is sent": {
			{0, eu, false, true}, {backoff, eu, false, true},
		},
		"regions are separate": {
			{0, eu, false, true}, {0, us, false, true}, {0, ap, false, true},
		},
		"out of range": {
			{0, 3, false, false}, {0, -1, false, false},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			tbl, clk := newTestTable(t, nil)
			for i, st := range steps {
				clk.Advance(st.advance)
				if st.clear {
					tbl.Clear(st.region)
				} else {
					tbl.Mark(st.region)
				}
				feed := drain(tbl)
				if sent := len(feed) > 0; sent != st.sends || len(feed) > 1 {
					t.Fatalf("step %d (region %d): %d changes, want sent=%v", i, st.region, len(feed), st.sends)
				}
				if len(feed) == 1 {
					m := feed[0].Mark
					if feed[0].Kind != ChangeMark || m.Clear != st.clear || m.Region != testRegions[st.region] ||
						m.Observer != "e1" || !m.At.Equal(clk.Now()) {
						t.Errorf("step %d: sent %+v", i, feed[0])
					}
				}
			}
		})
	}
}

// TestFailureNotSentStillCounts pins that a failure not sent still restarts the local backoff.
func TestFailureNotSentStillCounts(t *testing.T) {
	tbl, clk := newTestTable(t, nil)
	tbl.Mark(eu)
	clk.Advance(800 * time.Millisecond)
	tbl.Mark(eu) // not sent
	clk.Advance(backoff - 500*time.Millisecond)
	if !tbl.Marked(eu, Lenient) {
		t.Error("the backoff ended at the first failure's end, not the last's")
	}
}

// failure is a peer's failure of region at t0+ms, with a version of the same time.
func failure(region string, ms int64, origin string) Mark {
	at := t0.Add(time.Duration(ms) * time.Millisecond)
	return Mark{Region: region, Observer: origin, At: at, Version: ver(ms, origin)}
}

func clearOf(region string, ms int64, origin string) Mark {
	m := failure(region, ms, origin)
	m.Clear = true
	return m
}

func TestApplyMark(t *testing.T) {
	type want struct{ lenient, strict bool }
	tests := map[string]struct {
		before  []Mark
		local   bool // a local failure of eu (at t0) before
		in      Mark
		applied bool
		now     want          // just after
		later   time.Duration // and this much later (0: not checked)
		then    want
		unknown uint64
	}{
		"failure":                    {in: failure("eu", 0, "e2"), applied: true, now: want{true, true}, later: backoff, then: want{false, true}},
		"failure half a backoff ago": {in: failure("eu", -5000, "e2"), applied: true, now: want{true, true}, later: 5 * time.Second, then: want{false, true}},
		"failure long ago":           {in: failure("eu", -3600_000, "e2"), applied: true, now: want{false, true}},
		"failure dated ahead counts from now": {
			in: failure("eu", 30_000, "e2"), applied: true, now: want{true, true}, later: backoff, then: want{false, true},
		},
		"clear of nothing": {in: clearOf("eu", 5, "e2"), applied: true},
		"unknown region":   {in: failure("mars", 5, "e2"), unknown: 1},
		"no version":       {in: Mark{Region: "eu", Observer: "e2", At: t0}},
		"newer clear ends it": {
			before: []Mark{failure("eu", 4, "e2")}, in: clearOf("eu", 5, "e3"), applied: true,
		},
		"older clear leaves a newer failure": {
			before: []Mark{failure("eu", 5, "e2")}, in: clearOf("eu", 4, "e3"), applied: true, now: want{true, true},
		},
		"failure older than a clear: recorded, not failing": {
			before: []Mark{clearOf("eu", 5, "e3")}, in: failure("eu", 4, "e2"), applied: true,
		},
		"older failure under a newer one ignored": {
			before: []Mark{failure("eu", -2000, "e2")}, in: failure("eu", -3000, "e3"),
			now: want{true, true}, later: 8*time.Second - 1, then: want{true, true},
		},
		"newer failure restarts the backoff": {
			before: []Mark{failure("eu", -9000, "e2")}, in: failure("eu", -1000, "e3"), applied: true,
			now: want{true, true}, later: 9*time.Second - 1, then: want{true, true},
		},
		"duplicate failure ignored": {
			before: []Mark{failure("eu", 5, "e2")}, in: failure("eu", 5, "e2"), now: want{true, true},
		},
		"duplicate clear ignored": {
			before: []Mark{clearOf("eu", 5, "e2")}, in: clearOf("eu", 5, "e2"),
		},
		"clear older than a local failure leaves it": {
			local: true, in: clearOf("eu", -1, "e2"), applied: true, now: want{true, true},
		},
		"a peer's clear ends a local failure": {
			local: true, in: clearOf("eu", 60_000, "e2"), applied: true,
		},
		"a clear with no time": {
			before: []Mark{failure("eu", 4, "e2")}, in: Mark{Region: "eu", Clear: true, Observer: "e3", Version: ver(5, "e3")},
			applied: true,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tbl, clk := newTestTable(t, nil)
			for _, m := range tt.before {
				if !tbl.ApplyMark(m) {
					t.Fatalf("setup: ApplyMark(%+v) = false", m)
				}
			}
			if tt.local {
				tbl.Mark(eu)
				drain(tbl)
			}
			if got := tbl.ApplyMark(tt.in); got != tt.applied {
				t.Errorf("ApplyMark(%+v) = %v, want %v", tt.in, got, tt.applied)
			}
			if c := drain(tbl); len(c) != 0 {
				t.Errorf("ApplyMark sent %+v on the feed, want nothing", c)
			}
			check := func(when string, w want) {
				t.Helper()
				if l, s := tbl.Marked(eu, Lenient), tbl.Marked(eu, Strict); l != w.lenient || s != w.strict {
					t.Errorf("%s: Marked(eu) lenient %v strict %v, want %v %v", when, l, s, w.lenient, w.strict)
				}
			}
			check("just after", tt.now)
			if tt.later != 0 {
				clk.Advance(tt.later)
				check(fmt.Sprint(tt.later, " later"), tt.then)
			}
			if got := tbl.Stats().UnknownRegion; got != tt.unknown {
				t.Errorf("UnknownRegion %d, want %d", got, tt.unknown)
			}
		})
	}
}

func TestApplyMarkAdvancesClock(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	future := failure("eu", int64(time.Hour/time.Millisecond), "e2") // a peer an hour ahead
	tbl.ApplyMark(future)
	tbl.Clear(eu)
	feed := drain(tbl)
	if len(feed) != 1 || !future.Version.Less(feed[0].Mark.Version) {
		t.Fatalf("feed %+v: want a clear newer than %v", feed, future.Version)
	}
	if tbl.ApplyMark(future) || tbl.Marked(eu, Strict) {
		t.Error("the peer's failure applied again after the newer local clear")
	}
}

// TestApplyMarkConverges delivers the same failures and clears in many orders, some twice,
// and checks that each table ends in the same state for both kinds of request, at every
// later time.
func TestApplyMarkConverges(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	origins := []string{"e2", "e3", "e4"}
	var set []Mark
	for range 12 {
		ms, o := int64(rng.IntN(12000))-6000, origins[rng.IntN(len(origins))]
		if rng.IntN(2) == 0 {
			set = append(set, failure("eu", ms, o))
		} else {
			set = append(set, clearOf("eu", ms, o))
		}
	}
	probe := func(tbl *Table, clk *testutil.Clock) []bool {
		var out []bool
		for range 11 {
			out = append(out, tbl.Marked(eu, Lenient), tbl.Marked(eu, Strict))
			clk.Advance(time.Second)
		}
		return out
	}
	var want []bool
	var wantMarks []Mark
	for i := range 300 {
		tbl, clk := newTestTable(t, nil)
		order := append([]Mark(nil), set...)
		order = append(order, set[:rng.IntN(len(set))]...)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, m := range order {
			tbl.ApplyMark(m)
		}
		marks := tbl.Marks()
		got := probe(tbl, clk)
		if i == 0 {
			want, wantMarks = got, marks
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("order %d marked %v by second, order 0 %v", i, got, want)
		}
		if !reflect.DeepEqual(marks, wantMarks) {
			t.Fatalf("order %d Marks() %+v, order 0 %+v", i, marks, wantMarks)
		}
	}
}

// TestMarksSnapshot pins what a snapshot and repair carry: every region's latest failure and
// latest clear (a clear too, so that a peer that missed it is mended), the older first.
func TestMarksSnapshot(t *testing.T) {
	src, clk := newTestTable(t, nil)
	src.ApplyMark(failure("eu", 6, "e2"))
	src.ApplyMark(clearOf("eu", 5, "e3")) // older than the failure: listed first
	src.Mark(us)
	src.Mark(ap)
	clk.Advance(time.Second)
	src.Clear(ap)

	marks := src.Marks()
	var got []string
	for _, m := range marks {
		what := "failure"
		if m.Clear {
			what = "clear"
		}
		got = append(got, m.Region+" "+what+" by "+m.Observer)
	}
	want := []string{"eu clear by e3", "eu failure by e2", "us failure by e1", "ap failure by e1", "ap clear by e1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Marks() = %q, want %q", got, want)
	}

	// A peer that missed ap's clear (it holds only the failure) is mended by applying them.
	dst, dclk := newTestTable(t, func(c *Config) { c.Origin = "e9" })
	dclk.Advance(time.Second)
	dst.ApplyMark(marks[3])
	if !dst.Marked(ap, Strict) {
		t.Fatal("setup: the peer does not hold ap's failure")
	}
	for _, m := range marks {
		dst.ApplyMark(m)
	}
	if !reflect.DeepEqual(dst.Marks(), marks) {
		t.Errorf("joiner Marks() = %+v, want %+v", dst.Marks(), marks)
	}
	if dst.Marked(ap, Strict) || !dst.Marked(eu, Strict) || !dst.Marked(us, Strict) {
		t.Errorf("joiner failing %#b, want eu and us", dst.Failing())
	}
	fm := dst.FailingMarks()
	if len(fm) != 2 || fm[0].Region != "eu" || fm[1].Region != "us" ||
		!fm[1].ReadsUntil.Equal(t0.Add(backoff)) {
		t.Errorf("FailingMarks() = %+v", fm)
	}
}
