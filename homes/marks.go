package homes

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Region failure marks (docs/REFERENCE.md, "Which region, which router"). A region holds two
// registers, each moving only to a newer Version: its latest failure (a request could get no answer
// from it) and its latest clear (one of its routers answered). The region is failing while its
// latest failure is newer than its latest clear. How long a failure counts depends on the request
// being planned, not on the one that failed:
//   - a plain write (Strict) asks a failing region last until a clear;
//   - a read or keyed write (Lenient) asks it last only while the failure is also younger
//     than ReadBackoff.
//
// Because each register keeps the newest it is given and the state is a function of the two,
// failures and clears delivered in any order, any number of times, end in the same state.

// Planned is the kind of request a plan is for: it decides how long a failure counts.
type Planned uint8

const (
	// Lenient is a read (GET, HEAD, OPTIONS) or a keyed write (Idempotency-Key): it can move
	// on if the region fails again, so a failure counts for ReadBackoff after it happened.
	Lenient Planned = iota
	// Strict is any other write: it cannot be sent to a second router once it may have
	// reached one, so a failure counts until one of the region's routers answers.
	Strict
)

func (p Planned) String() string {
	switch p {
	case Lenient:
		return "lenient"
	case Strict:
		return "strict"
	}
	return fmt.Sprintf("Planned(%d)", uint8(p))
}

// Mark is a region's failure, or its clear, as one entry observed it.
type Mark struct {
	Region   string
	Clear    bool      // a router of the region answered; false: the region failed
	Observer string    // node that saw it
	At       time.Time // when it happened, on the observer's clock
	Version  Version   // orders failures against clears, across entries
}

// markResend is how much newer a local failure must be than the one the cluster last heard
// of before it is sent again: a region failing every request does not flood the feed (a
// peer's read backoff then ends at most this much early). The failure is recorded here
// either way, and repair carries it.
const markResend = time.Second

// failingBit is set in regionMarks.word while the region is failing.
const failingBit = 1 << 63

type markReg struct {
	observer string
	at       int64   // unix ns on the observer's clock
	version  Version // zero: none
}

func (r markReg) mark(region string, clear bool) Mark {
	return Mark{Region: region, Clear: clear, Observer: r.observer, At: time.Unix(0, r.at), Version: r.version}
}

// regionState is one region's two registers.
type regionState struct {
	// word is what a plan reads, in one atomic load: 0 while the region is not failing, else
	// failingBit and, in the other bits, the unix ns of the latest failure as this entry
	// counts it (a peer's time no later than when it arrived here: a peer's clock may be
	// ahead). Stored only with mu held.
	word atomic.Uint64

	mu       sync.Mutex // guards the following, and stores to word
	failure  markReg    // newest failure made here or applied
	clear    markReg    // newest clear made here or applied
	failedAt int64      // failure's time as counted here (see word)
	sharedAt int64      // time of the newest failure sent on the feed, unix ns
}

type regionMarks struct {
	regionState
	_ [cacheLine - unsafe.Sizeof(regionState{})%cacheLine]byte
}

// updateLocked stores word from the registers.
func (r *regionMarks) updateLocked() {
	if r.failure.version.HLC == 0 || !r.clear.version.Less(r.failure.version) {
		r.word.Store(0)
		return
	}
	r.word.Store(failingBit | uint64(max(r.failedAt, 1))&^failingBit)
}

// Marked reports whether a req planned now asks region last. Out of range: false. Hot path:
// lock-free, no allocation; one atomic load when the region is not failing, plus a clock
// reading for a Lenient request while it is.
func (t *Table) Marked(region int, req Planned) bool {
	if uint(region) >= MaxRegions {
		return false
	}
	w := t.marks[region].word.Load()
	switch {
	case w == 0:
		return false
	case req == Strict:
		return true
	}
	return t.clock.Now().UnixNano() < int64(w&^failingBit)+t.backoff.Load()
}

// MarkedSet returns the regions a req planned now asks last, as a bit set: bit i is
// Marked(i, req). One call, and at most one clock reading, for a request that orders every
// region. Lock-free, no allocation.
func (t *Table) MarkedSet(req Planned) uint64 {
	var set uint64
	var now int64 // read when first needed
	for i := range t.NumRegions() {
		w := t.marks[i].word.Load()
		switch {
		case w == 0:
			continue
		case req == Strict:
			set |= 1 << i
			continue
		}
		if now == 0 {
			now = t.clock.Now().UnixNano()
		}
		if now < int64(w&^failingBit)+t.backoff.Load() {
			set |= 1 << i
		}
	}
	return set
}

// Failing returns the regions whose latest failure is newer than their latest clear (the
// regions a Strict request asks last), as a bit set. Lock-free, no allocation.
func (t *Table) Failing() uint64 { return t.MarkedSet(Strict) }

// Mark records that region failed here now. It sends a ChangeMark on the feed when the
// region was not failing, or when the failure is more than a second newer than the one last
// sent (a failure under that is recorded here but not sent). It takes the region's lock; a
// failing request is rare next to the requests that answer. Out of range: ignored. It reports
// whether the region was not failing before (the caller logs state changes).
func (t *Table) Mark(region int) bool {
	if !t.regionSet().configured(region) {
		return false
	}
	r := &t.marks[region]
	now := t.clock.Now().UnixNano()
	r.mu.Lock()
	was := r.word.Load() != 0
	v := t.newVersion()
	r.failure = markReg{observer: t.origin, at: now, version: v}
	r.failedAt = now
	r.updateLocked()
	send := !was || now-r.sharedAt > int64(markResend)
	if send {
		r.sharedAt = now
	}
	m := r.failure.mark(t.name(uint8(region)), false)
	r.mu.Unlock()
	if send {
		t.emit(Change{Kind: ChangeMark, Mark: m})
	}
	return !was
}

// Clear records that a router of region answered here. When the region is not failing (the
// common case: Clear follows every answer) it is one atomic load: no lock, no clock, no feed
// entry. Otherwise it records a clear newer than the failure and sends it on the feed.
// Out of range: ignored. It reports whether the region was failing.
func (t *Table) Clear(region int) bool {
	if uint(region) >= MaxRegions || t.marks[region].word.Load() == 0 {
		return false
	}
	r := &t.marks[region]
	r.mu.Lock()
	if r.word.Load() == 0 {
		r.mu.Unlock()
		return false
	}
	r.clear = markReg{observer: t.origin, at: t.clock.Now().UnixNano(), version: t.newVersion()}
	r.sharedAt = 0
	r.updateLocked()
	m := r.clear.mark(t.name(uint8(region)), true)
	r.mu.Unlock()
	t.emit(Change{Kind: ChangeMark, Mark: m})
	return true
}

// ApplyMark applies a failure or a clear a peer observed, and reports whether it changed a
// register (false: not newer than what the region holds, or an unknown region, counted in
// Stats.UnknownRegion). A failure's time is counted no later than now (a peer's clock may be
// ahead). Like Apply it advances the clock past m.Version, and it sends nothing on the feed.
func (t *Table) ApplyMark(m Mark) bool {
	return t.applyMark(m)
}

func (t *Table) applyMark(m Mark) bool {
	id, ok := t.regionSet().ids[m.Region]
	if !ok {
		t.unknown.Add(1)
		return false
	}
	t.hlc.observe(m.Version.HLC)
	if m.Version.HLC == 0 {
		return false
	}
	now := t.clock.Now().UnixNano()
	at := m.At.UnixNano()
	if m.At.IsZero() {
		at = m.Version.Time().UnixNano()
	}
	reg := markReg{observer: m.Observer, at: at, version: m.Version}
	r := &t.marks[id]
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.Clear {
		if !r.clear.version.Less(m.Version) {
			return false
		}
		r.clear = reg
	} else {
		if !r.failure.version.Less(m.Version) {
			return false
		}
		r.failure = reg
		r.failedAt = min(at, now)
		r.sharedAt = max(r.sharedAt, r.failedAt)
	}
	r.updateLocked()
	return true
}

// Marks returns every region's latest failure and latest clear (those it has), by region ID,
// the older first within a region, so that a peer applying them in turn ends in this
// table's state: what a snapshot and repair carry. Nil if none. It takes each region's lock.
func (t *Table) Marks() []Mark {
	var out []Mark
	rs := t.regionSet()
	for i := range rs.names {
		if !rs.configured(i) {
			continue
		}
		r := &t.marks[i]
		r.mu.Lock()
		f, c := r.failure, r.clear
		r.mu.Unlock()
		var ms []Mark
		if f.version.HLC != 0 {
			ms = append(ms, f.mark(rs.names[i], false))
		}
		if c.version.HLC != 0 {
			ms = append(ms, c.mark(rs.names[i], true))
		}
		if len(ms) == 2 && ms[1].Version.Less(ms[0].Version) {
			ms[0], ms[1] = ms[1], ms[0]
		}
		out = append(out, ms...)
	}
	return out
}

// MarkState is one failing region as a status page shows it.
type MarkState struct {
	Mark                 // the latest failure
	ReadsUntil time.Time // when Lenient requests ask the region first again (At + ReadBackoff, as counted here)
}

// FailingMarks returns the latest failure of every failing region, by region ID. Nil if none.
func (t *Table) FailingMarks() []MarkState {
	var out []MarkState
	rs := t.regionSet()
	for i := range rs.names {
		if !rs.configured(i) {
			continue
		}
		r := &t.marks[i]
		if r.word.Load() == 0 {
			continue
		}
		r.mu.Lock()
		if r.word.Load() != 0 {
			m := r.failure.mark(rs.names[i], false)
			out = append(out, MarkState{Mark: m, ReadsUntil: time.Unix(0, r.failedAt+t.backoff.Load())})
		}
		r.mu.Unlock()
	}
	return out
}
