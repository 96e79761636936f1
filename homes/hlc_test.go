package homes

import (
	"math"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

func TestVersionLess(t *testing.T) {
	tests := map[string]struct {
		a, b Version
		want bool
	}{
		"lower clock":                {Version{1, "z"}, Version{2, "a"}, true},
		"higher clock":               {Version{2, "a"}, Version{1, "z"}, false},
		"equal clock, lower origin":  {Version{5, "a"}, Version{5, "b"}, true},
		"equal clock, higher origin": {Version{5, "b"}, Version{5, "a"}, false},
		"equal":                      {Version{5, "a"}, Version{5, "a"}, false},
		"zero before any":            {Version{}, Version{0, "a"}, true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tt.a.Less(tt.b); got != tt.want {
				t.Errorf("%v.Less(%v) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestVersionTime(t *testing.T) {
	at := time.UnixMilli(1767225600123)
	v := Version{HLC: physical(at) + 7, Origin: "e1"}
	if got := v.Time(); !got.Equal(at) {
		t.Errorf("Time() = %v, want %v", got, at)
	}
	if got := (Version{}).Time(); !got.IsZero() {
		t.Errorf("zero Version Time() = %v, want the zero time", got)
	}
	if got, want := v.String(), "1767225600123.7@e1"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestPhysicalClamps(t *testing.T) {
	tests := map[string]struct {
		at   time.Time
		want uint64
	}{
		"before 1970":    {time.Unix(-10, 0), 0},
		"epoch":          {time.Unix(0, 0), 0},
		"now-ish":        {time.UnixMilli(1767225600123), 1767225600123 << 16},
		"beyond 48 bits": {time.UnixMilli(1 << 50), (1<<48 - 1) << 16},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := physical(tt.at); got != tt.want {
				t.Errorf("physical(%v) = %#x, want %#x", tt.at, got, tt.want)
			}
		})
	}
}

func TestHLCNow(t *testing.T) {
	clk := testutil.NewClock(t0)
	c := hlc{clock: clk}
	pt := physical(t0)

	a, b := c.now(), c.now()
	if a != pt || b != pt+1 {
		t.Errorf("two stamps in one millisecond = %#x, %#x; want %#x, %#x", a, b, pt, pt+1)
	}
	clk.Advance(-time.Hour) // the wall clock steps back
	if d := c.now(); d != b+1 {
		t.Errorf("after the clock stepped back: %#x, want %#x (never backwards)", d, b+1)
	}
	clk.Advance(2 * time.Hour)
	if e, want := c.now(), physical(t0.Add(time.Hour)); e != want {
		t.Errorf("after the clock moved on: %#x, want its physical time %#x", e, want)
	}
	c.last.Store(pt | 0xffff) // logical counter full: carries into the physical part
	clk.Advance(-time.Hour)
	if f := c.now(); f != pt+1<<16 {
		t.Errorf("logical overflow: %#x, want %#x", f, pt+1<<16)
	}
}

func TestHLCObserve(t *testing.T) {
	clk := testutil.NewClock(t0)
	c := hlc{clock: clk}
	local := c.now()
	remote := physical(t0.Add(time.Minute)) + 3 // a peer a minute ahead
	c.observe(remote)
	if got := c.now(); got <= remote {
		t.Errorf("stamp after observing %#x is %#x, want later", remote, got)
	}
	before := c.last.Load()
	c.observe(local) // older: no effect
	if got := c.last.Load(); got != before {
		t.Errorf("observing an older stamp moved the clock from %#x to %#x", before, got)
	}
	c.observe(math.MaxUint64)
	if got := c.now(); got != math.MaxUint64 {
		t.Errorf("after observing the largest stamp: %#x, want it kept (saturate, not wrap)", got)
	}
}
