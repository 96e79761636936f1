package homes

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"testing/synctest"
	"time"
)

const backoff = 10 * time.Second // the default ReadBackoff the tests rely on

func TestReadMarkExpires(t *testing.T) {
	tbl, clk := newTestTable(t, nil)
	tbl.Mark(us, MarkRead)
	if !tbl.Marked(us) || tbl.Marked(eu) || tbl.Marked(ap) {
		t.Fatalf("after a read mark of us: marked eu %v us %v ap %v", tbl.Marked(eu), tbl.Marked(us), tbl.Marked(ap))
	}
	marks := tbl.Marks()
	if len(marks) != 1 || marks[0].Region != "us" || marks[0].Kind != MarkRead || marks[0].Clear ||
		marks[0].Observer != "e1" || !marks[0].Expires.Equal(t0.Add(backoff)) || marks[0].Version.Origin != "e1" {
		t.Errorf("Marks() = %+v, want us read by e1 until %v", marks, t0.Add(backoff))
	}
	clk.Advance(backoff - time.Nanosecond)
	if !tbl.Marked(us) {
		t.Error("read mark ended before ReadBackoff")
	}
	if st := tbl.Stats(); st.Marked != 1 {
		t.Errorf("Stats().Marked = %d, want 1", st.Marked)
	}
	clk.Advance(time.Nanosecond)
	if tbl.Marked(us) {
		t.Error("read mark outlived ReadBackoff")
	}
	if m := tbl.Marks(); m != nil {
		t.Errorf("Marks() after expiry = %+v, want none", m)
	}
	if st := tbl.Stats(); st.Marked != 0 {
		t.Errorf("Stats().Marked = %d after expiry, want 0", st.Marked)
	}
}

func TestReadBackoffConfigured(t *testing.T) {
	tbl, clk := newTestTable(t, func(c *Config) { c.ReadBackoff = 3 * time.Second })
	tbl.Mark(eu, MarkRead)
	clk.Advance(3*time.Second - 1)
	if !tbl.Marked(eu) {
		t.Error("read mark ended before the configured ReadBackoff")
	}
	clk.Advance(1)
	if tbl.Marked(eu) {
		t.Error("read mark outlived the configured ReadBackoff")
	}
}

// TestReadMarkRealClock runs the system clock (nil Config.Clock) in a synctest bubble, whose
// time moves only when every goroutine in it sleeps: no real waiting.
func TestReadMarkRealClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tbl, err := New(Config{Regions: testRegions, Origin: "e1"})
		if err != nil {
			t.Fatal(err)
		}
		tbl.Mark(ap, MarkRead)
		time.Sleep(backoff - time.Nanosecond)
		if !tbl.Marked(ap) {
			t.Error("read mark ended before ReadBackoff")
		}
		time.Sleep(time.Nanosecond)
		if tbl.Marked(ap) {
			t.Error("read mark outlived ReadBackoff")
		}
	})
}

func TestMarkedSet(t *testing.T) {
	many := make([]string, MaxRegions)
	for i := range many {
		many[i] = fmt.Sprint("r", i)
	}
	tbl, clk := newTestTable(t, func(c *Config) { c.Regions = many })
	if s := tbl.MarkedSet(); s != 0 {
		t.Fatalf("MarkedSet of an unmarked table = %#x", s)
	}
	tbl.Mark(0, MarkRead)
	tbl.Mark(5, MarkWrite)
	tbl.Mark(63, MarkRead)
	clk.Advance(time.Second)
	tbl.Mark(7, MarkRead) // ends a second after the others
	if got, want := tbl.MarkedSet(), uint64(1<<0|1<<5|1<<7|1<<63); got != want {
		t.Errorf("MarkedSet = %#x, want %#x", got, want)
	}
	clk.Advance(backoff - time.Second)
	if got, want := tbl.MarkedSet(), uint64(1<<5|1<<7); got != want {
		t.Errorf("MarkedSet after the first read marks ended = %#x, want %#x", got, want)
	}
	for i := range many {
		if got, want := tbl.Marked(i), tbl.MarkedSet()&(1<<i) != 0; got != want {
			t.Errorf("Marked(%d) = %v, MarkedSet says %v", i, got, want)
		}
	}
	if st := tbl.Stats(); st.Marked != 2 {
		t.Errorf("Stats().Marked = %d, want 2", st.Marked)
	}
}

func TestWriteMarkLastsUntilClear(t *testing.T) {
	tbl, clk := newTestTable(t, nil)
	tbl.Mark(eu, MarkWrite)
	clk.Advance(24 * time.Hour)
	if !tbl.Marked(eu) {
		t.Fatal("write mark ended without a clear")
	}
	tbl.Clear(us) // another region's answer clears nothing here
	if !tbl.Marked(eu) {
		t.Fatal("a clear of us ended eu's write mark")
	}
	tbl.Clear(eu)
	if tbl.Marked(eu) {
		t.Error("write mark outlived Clear")
	}
	feed := drain(tbl)
	if len(feed) != 2 || feed[0].Mark.Kind != MarkWrite || feed[0].Mark.Clear ||
		!feed[1].Mark.Clear || feed[1].Mark.Region != "eu" || feed[1].Mark.Observer != "e1" {
		t.Fatalf("feed %+v, want eu's write mark then its clear", feed)
	}
	if !feed[0].Mark.Version.Less(feed[1].Mark.Version) || !feed[0].Mark.Expires.IsZero() {
		t.Errorf("mark %+v then clear %+v: want increasing versions, no expiry", feed[0].Mark, feed[1].Mark)
	}
}

func TestClear(t *testing.T) {
	tests := map[string]struct {
		before    func(*Table, *fakeClock)
		wantClear bool // a clear on the feed
	}{
		"unmarked":         {func(*Table, *fakeClock) {}, false},
		"read mark":        {func(t *Table, _ *fakeClock) { t.Mark(eu, MarkRead) }, true},
		"write mark":       {func(t *Table, _ *fakeClock) { t.Mark(eu, MarkWrite) }, true},
		"both":             {func(t *Table, _ *fakeClock) { t.Mark(eu, MarkRead); t.Mark(eu, MarkWrite) }, true},
		"peer's read mark": {func(t *Table, _ *fakeClock) { t.ApplyMark(readMark("eu", 5, "e2", backoff)) }, true},
		"expired read mark": {func(t *Table, c *fakeClock) {
			t.Mark(eu, MarkRead)
			c.Advance(backoff)
		}, false},
		"already cleared": {func(t *Table, _ *fakeClock) { t.Mark(eu, MarkWrite); t.Clear(eu) }, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tbl, clk := newTestTable(t, nil)
			tt.before(tbl, clk)
			drain(tbl)
			hlcBefore := tbl.hlc.last.Load()
			tbl.Clear(eu)
			feed := drain(tbl)
			if got := len(feed) == 1 && feed[0].Kind == ChangeMark && feed[0].Mark.Clear; got != tt.wantClear || len(feed) > 1 {
				t.Errorf("feed after Clear %+v, want a clear: %v", feed, tt.wantClear)
			}
			if !tt.wantClear && tbl.hlc.last.Load() != hlcBefore {
				t.Error("a Clear that ended nothing made a version")
			}
			if tbl.Marked(eu) {
				t.Error("still marked after Clear")
			}
			if w := tbl.marks[eu].word.Load(); w != 0 {
				t.Errorf("mark word %#x after Clear, want 0 so the next Clear is one load", w)
			}
		})
	}
}

// TestMarkFeed pins when Mark publishes: only when the region's state changes.
func TestMarkFeed(t *testing.T) {
	type step struct {
		advance time.Duration
		kind    MarkKind
		region  int
		sends   bool
	}
	tests := map[string][]step{
		"new read mark, then the same every request": {
			{0, MarkRead, eu, true}, {0, MarkRead, eu, false}, {0, MarkRead, eu, false},
		},
		"read mark extended": {
			{0, MarkRead, eu, true},
			{500 * time.Millisecond, MarkRead, eu, false}, // extended by 0.5 s: kept here only
			{500 * time.Millisecond, MarkRead, eu, false}, // 1 s past the one sent: not more than 1 s
			{time.Millisecond, MarkRead, eu, true},        // 1.001 s: sent
			{100 * time.Millisecond, MarkRead, eu, false},
		},
		"read mark after expiry is new": {
			{0, MarkRead, eu, true}, {backoff, MarkRead, eu, true},
		},
		"write upgrades read": {
			{0, MarkRead, eu, true}, {0, MarkWrite, eu, true}, {0, MarkWrite, eu, false},
		},
		"read adds nothing to write": {
			{0, MarkWrite, eu, true}, {0, MarkRead, eu, false}, {time.Hour, MarkRead, eu, false},
		},
		"regions are separate": {
			{0, MarkRead, eu, true}, {0, MarkRead, us, true}, {0, MarkWrite, ap, true},
		},
		"out of range and invalid kinds": {
			{0, MarkRead, 3, false}, {0, MarkWrite, -1, false}, {0, 0, eu, false}, {0, 7, eu, false},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			tbl, clk := newTestTable(t, nil)
			for i, st := range steps {
				clk.Advance(st.advance)
				tbl.Mark(st.region, st.kind)
				feed := drain(tbl)
				if sent := len(feed) > 0; sent != st.sends || len(feed) > 1 {
					t.Fatalf("step %d (%v on %d): %d changes, want sent=%v", i, st.kind, st.region, len(feed), st.sends)
				}
				if len(feed) == 1 {
					m := feed[0].Mark
					if feed[0].Kind != ChangeMark || m.Kind != st.kind || m.Region != testRegions[st.region] || m.Observer != "e1" {
						t.Errorf("step %d: sent %+v", i, feed[0])
					}
					now := clk.Now()
					if st.kind == MarkRead && !m.Expires.Equal(now.Add(backoff)) {
						t.Errorf("step %d: expires %v, want %v", i, m.Expires, now.Add(backoff))
					}
				}
			}
		})
	}
}

// TestReadMarkExtendedLocally pins that a mark not sent still extends the local mark.
func TestReadMarkExtendedLocally(t *testing.T) {
	tbl, clk := newTestTable(t, nil)
	tbl.Mark(eu, MarkRead)
	clk.Advance(800 * time.Millisecond)
	tbl.Mark(eu, MarkRead) // not sent
	clk.Advance(backoff - 500*time.Millisecond)
	if !tbl.Marked(eu) {
		t.Error("the read mark ended at the first failure's end, not the last's")
	}
}

func readMark(region string, ms int64, origin string, lasts time.Duration) Mark {
	return Mark{Region: region, Kind: MarkRead, Observer: origin, Expires: t0.Add(lasts), Version: ver(ms, origin)}
}

func writeMark(region string, ms int64, origin string) Mark {
	return Mark{Region: region, Kind: MarkWrite, Observer: origin, Version: ver(ms, origin)}
}

func clearMark(region string, ms int64, origin string) Mark {
	return Mark{Region: region, Clear: true, Observer: origin, Version: ver(ms, origin)}
}

func TestApplyMark(t *testing.T) {
	tests := map[string]struct {
		before      []Mark
		local       MarkKind // a local Mark of eu before, if set
		in          Mark
		want        bool
		marked      bool          // eu marked just after
		markedAfter time.Duration // and still marked this much later (0: not checked)
		unknown     uint64
	}{
		"read mark":                {in: readMark("eu", 5, "e2", backoff), want: true, marked: true},
		"write mark":               {in: writeMark("eu", 5, "e2"), want: true, marked: true, markedAfter: time.Hour},
		"clear of nothing":         {in: clearMark("eu", 5, "e2"), want: true},
		"expired read mark":        {in: readMark("eu", 5, "e2", 0), want: false},
		"read mark ended long ago": {in: readMark("eu", 5, "e2", -time.Hour), want: false},
		"unknown region":           {in: writeMark("mars", 5, "e2"), want: false, unknown: 1},
		"no kind":                  {in: Mark{Region: "eu", Version: ver(5, "e2")}, want: false},
		"newer clear ends write": {
			before: []Mark{writeMark("eu", 4, "e2")}, in: clearMark("eu", 5, "e3"), want: true,
		},
		"newer clear ends read": {
			before: []Mark{readMark("eu", 4, "e2", backoff)}, in: clearMark("eu", 5, "e3"), want: true,
		},
		"older clear leaves a newer mark": {
			before: []Mark{writeMark("eu", 5, "e2")}, in: clearMark("eu", 4, "e3"), want: true, marked: true,
		},
		"mark older than a clear ignored": {
			before: []Mark{clearMark("eu", 5, "e3")}, in: writeMark("eu", 4, "e2"), want: false,
		},
		"mark older than a clear ignored under a newer mark": {
			before: []Mark{writeMark("eu", 6, "e2"), clearMark("eu", 5, "e3")}, in: readMark("eu", 4, "e2", backoff),
			want: false, marked: true,
		},
		"duplicate mark ignored": {
			before: []Mark{writeMark("eu", 5, "e2")}, in: writeMark("eu", 5, "e2"), want: false, marked: true,
		},
		"duplicate clear ignored": {
			before: []Mark{clearMark("eu", 5, "e2")}, in: clearMark("eu", 5, "e2"), want: false,
		},
		"older mark of the same kind ignored": {
			before: []Mark{readMark("eu", 6, "e2", 2*time.Second)}, in: readMark("eu", 5, "e3", backoff),
			want: false, marked: true, markedAfter: 2*time.Second - 1,
		},
		"clear older than a local mark leaves it": {
			local: MarkWrite, in: clearMark("eu", -1, "e2"), want: true, marked: true,
		},
		"older write mark under a newer read mark still applies": {
			before: []Mark{readMark("eu", 6, "e2", backoff)}, in: writeMark("eu", 5, "e3"),
			want: true, marked: true, markedAfter: time.Hour,
		},
		"clear between read and write ends only the older": {
			before: []Mark{readMark("eu", 4, "e2", backoff), writeMark("eu", 6, "e2")}, in: clearMark("eu", 5, "e3"),
			want: true, marked: true, markedAfter: time.Hour,
		},
		"read mark capped at ReadBackoff": {
			in: readMark("eu", 5, "e2", time.Hour), want: true, marked: true, markedAfter: backoff - 1,
		},
		"newer read mark replaces the end": {
			before: []Mark{readMark("eu", 4, "e2", backoff)}, in: readMark("eu", 5, "e3", 2*time.Second),
			want: true, marked: true, markedAfter: 2*time.Second - 1,
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
			if tt.local != 0 {
				tbl.Mark(eu, tt.local)
				drain(tbl)
			}
			if got := tbl.ApplyMark(tt.in); got != tt.want {
				t.Errorf("ApplyMark(%+v) = %v, want %v", tt.in, got, tt.want)
			}
			if c := drain(tbl); len(c) != 0 {
				t.Errorf("ApplyMark sent %+v on the feed, want nothing", c)
			}
			if got := tbl.Marked(eu); got != tt.marked {
				t.Errorf("Marked(eu) = %v, want %v", got, tt.marked)
			}
			if tt.markedAfter != 0 {
				clk.Advance(tt.markedAfter)
				if !tbl.Marked(eu) {
					t.Errorf("mark ended before %v", tt.markedAfter)
				}
				clk.Advance(1)
				if tt.in.Kind == MarkRead && tbl.Marked(eu) {
					t.Errorf("read mark lasted past %v", tt.markedAfter)
				}
			}
			if got := tbl.Stats().UnknownRegion; got != tt.unknown {
				t.Errorf("UnknownRegion %d, want %d", got, tt.unknown)
			}
		})
	}
}

func TestApplyMarkAdvancesClock(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	future := writeMark("eu", int64(time.Hour/time.Millisecond), "e2") // a peer an hour ahead
	tbl.ApplyMark(future)
	tbl.Clear(eu)
	feed := drain(tbl)
	if len(feed) != 1 || !future.Version.Less(feed[0].Mark.Version) {
		t.Fatalf("feed %+v: want a clear newer than %v", feed, future.Version)
	}
	if tbl.ApplyMark(future) {
		t.Error("the peer's mark applied again after the newer local clear")
	}
}

// TestApplyMarkConverges delivers the same marks and clears in many orders and checks that
// each table ends marked the same way, at every later time.
func TestApplyMarkConverges(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	origins := []string{"e2", "e3", "e4"}
	var set []Mark
	for range 12 {
		ms, o := int64(rng.IntN(6)), origins[rng.IntN(len(origins))]
		switch rng.IntN(3) {
		case 0:
			set = append(set, readMark("eu", ms, o, time.Duration(1+rng.IntN(9))*time.Second))
		case 1:
			set = append(set, writeMark("eu", ms, o))
		default:
			set = append(set, clearMark("eu", ms, o))
		}
	}
	probe := func(tbl *Table, clk *fakeClock) []bool {
		var out []bool
		for range 11 {
			out = append(out, tbl.Marked(eu))
			clk.Advance(time.Second)
		}
		return out
	}
	var want []bool
	for i := range 300 {
		tbl, clk := newTestTable(t, nil)
		order := append([]Mark(nil), set...)
		order = append(order, set[:rng.IntN(len(set))]...)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, m := range order {
			tbl.ApplyMark(m)
		}
		got := probe(tbl, clk)
		if i == 0 {
			want = got
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("order %d marked %v by second, order 0 %v", i, got, want)
		}
	}
}

func TestMarksSnapshot(t *testing.T) {
	src, clk := newTestTable(t, nil)
	src.ApplyMark(readMark("eu", 6, "e2", backoff))
	src.ApplyMark(writeMark("eu", 5, "e3")) // older than the read mark: listed first
	src.Mark(us, MarkWrite)
	src.Mark(ap, MarkRead)
	clk.Advance(time.Second)

	marks := src.Marks()
	var got []string
	for _, m := range marks {
		got = append(got, m.Region+" "+m.Kind.String()+" by "+m.Observer)
	}
	want := []string{"eu write by e3", "eu read by e2", "us write by e1", "ap read by e1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Marks() = %q, want %q", got, want)
	}

	// A joining peer that applies them in turn is marked the same way.
	dst, dclk := newTestTable(t, func(c *Config) { c.Origin = "e9" })
	dclk.Advance(time.Second)
	for _, m := range marks {
		if !dst.ApplyMark(m) {
			t.Errorf("the joiner refused %+v", m)
		}
	}
	if !reflect.DeepEqual(dst.Marks(), marks) {
		t.Errorf("joiner Marks() = %+v, want %+v", dst.Marks(), marks)
	}
}
