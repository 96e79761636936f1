package homes

import (
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fenec/fenec-entry/internal/clock"
)

// Version orders observations across entries and restarts: a hybrid logical clock (physical
// unix milliseconds in the high 48 bits, logical counter in the low 16) plus the origin node
// name as a tie-break. Higher HLC wins; equal HLC: greater Origin wins.
//
// The zero Version is older than every other. Versions made by one Table strictly increase,
// and each is newer than every Version that Table has applied (Apply, ApplyMark), so what an
// entry observes after hearing of a change orders after that change.
type Version struct {
	HLC    uint64
	Origin string
}

// Less reports whether v is older than o.
func (v Version) Less(o Version) bool {
	if v.HLC != o.HLC {
		return v.HLC < o.HLC
	}
	return v.Origin < o.Origin
}

// Time is the physical part of v, to the millisecond; the zero time for the zero HLC.
func (v Version) Time() time.Time {
	if v.HLC == 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(v.HLC >> hlcLogicalBits))
}

// String formats v as "<unix ms>.<logical>@<origin>", for logs and status pages.
func (v Version) String() string {
	b := strconv.AppendUint(nil, v.HLC>>hlcLogicalBits, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, v.HLC&(1<<hlcLogicalBits-1), 10)
	b = append(b, '@')
	return string(append(b, v.Origin...))
}

const (
	hlcLogicalBits = 16
	hlcMaxMillis   = 1<<(64-hlcLogicalBits) - 1
)

// physical is t as an HLC with a zero logical part, clamped to [0, 2^48) milliseconds.
func physical(t time.Time) uint64 {
	ms := t.UnixMilli()
	switch {
	case ms <= 0:
		return 0
	case ms > hlcMaxMillis:
		ms = hlcMaxMillis
	}
	return uint64(ms) << hlcLogicalBits
}

// hlc is a hybrid logical clock packed in one word, so that the send rule
// (l' = max(l, pt), c' = l' == l ? c+1 : 0) is max(last+1, pt<<16): a logical counter that
// overflows carries into the physical part instead of wrapping. Lock-free; the zero value
// is ready once clock is set.
type hlc struct {
	clock clock.Clock
	last  atomic.Uint64
}

// now returns a fresh timestamp, greater than every one returned or observed before. At
// the top of the range (a peer sent math.MaxUint64) it saturates instead of wrapping.
func (c *hlc) now() uint64 {
	pt := physical(c.clock.Now())
	for {
		old := c.last.Load()
		next := old
		if next != math.MaxUint64 {
			next++
		}
		next = max(next, pt)
		if c.last.CompareAndSwap(old, next) {
			return next
		}
	}
}

// observe is the receive rule: later timestamps order after remote. It refuses nothing (a
// remote clock far ahead drags this one along); bounding remote clocks is the caller's job.
func (c *hlc) observe(remote uint64) {
	for {
		old := c.last.Load()
		if remote <= old || c.last.CompareAndSwap(old, remote) {
			return
		}
	}
}
