package homes

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// MarkKind is the kind of a region failure mark. The zero MarkKind is no kind (invalid).
type MarkKind uint8

const (
	MarkRead  MarkKind = iota + 1 // a read or keyed write got no answer: lasts ReadBackoff
	MarkWrite                     // a write may have run: lasts until a clear
)

func (k MarkKind) String() string {
	switch k {
	case MarkRead:
		return "read"
	case MarkWrite:
		return "write"
	}
	return fmt.Sprintf("MarkKind(%d)", uint8(k))
}

// Mark is a region failure mark, or the clear of a region's marks, as observed by one entry.
// A region is marked while it has a live read mark (until Expires) or a write mark (until
// a clear).
type Mark struct {
	Region   string
	Kind     MarkKind  // ignored when Clear
	Clear    bool      // a clear of all the region's marks: a router of it answered
	Observer string    // node that saw it
	Expires  time.Time // read marks: when it ends; zero for write marks and clears
	Version  Version
}

// markResend is how much a local read mark must outlast the one the cluster last heard of
// before it is sent again: a region failing every request does not flood the feed.
const markResend = time.Second

// writeBit is set in regionMarks.word while the region has a write mark.
const writeBit = 1 << 63

type markInfo struct {
	observer string
	version  Version // zero: none
}

// regionState is one region's marks as three registers that only move to a newer Version:
// the newest clear, the newest write mark and the newest read mark (with its end). The region
// is write-marked while the write mark is newer than the clear, read-marked while the read
// mark is newer than the clear and has not ended. Because each register keeps the newest it
// is given, any delivery order of the same marks and clears ends in the same state.
type regionState struct {
	// word is the region's live marks in one atomic word, so that Marked and Clear need one
	// load: writeBit, and in the other bits the unix nanoseconds at which the read mark ends
	// (0: none; it may have passed). Zero: unmarked. Stored only with mu held.
	word atomic.Uint64

	mu          sync.Mutex // guards the following, and stores to word
	clear       Version    // newest clear applied or made here
	read, write markInfo   // newest marks applied or made here, while newer than clear
	sharedUntil int64      // end of the newest read mark sent or received, unix ns
}

type regionMarks struct {
	regionState
	_ [cacheLine - unsafe.Sizeof(regionState{})%cacheLine]byte
}

// Marked reports whether region has a write mark or an unexpired read mark. Out of range:
// false. Hot path: lock-free, no allocation; one atomic load when unmarked, plus a clock
// reading while only a read mark is set.
func (t *Table) Marked(region int) bool {
	if uint(region) >= uint(len(t.marks)) {
		return false
	}
	w := t.marks[region].word.Load()
	if w == 0 {
		return false
	}
	return w&writeBit != 0 || t.clock.Now().UnixNano() < int64(w)
}

// MarkedSet returns the marked regions as a bit set: bit i is Marked(i). One call, and at most
// one clock reading, for a request that orders every region. Lock-free, no allocation.
func (t *Table) MarkedSet() uint64 {
	var set uint64
	var now int64 // read when first needed
	for i := range t.marks {
		w := t.marks[i].word.Load()
		switch {
		case w == 0:
		case w&writeBit != 0:
			set |= 1 << i
		default:
			if now == 0 {
				now = t.clock.Now().UnixNano()
			}
			if now < int64(w) {
				set |= 1 << i
			}
		}
	}
	return set
}

// Mark records that region failed here. A read mark lasts ReadBackoff from now; a write mark
// lasts until Clear or a peer's clear. It sends a ChangeMark on the feed only when the state
// changes: a new mark, a write mark over a read mark, or a read mark extended more than a
// second past the end the cluster last heard of (a local extension under that is kept but
// not sent). A region already write-marked costs one atomic load; otherwise Mark takes the
// region's lock. Out-of-range regions and invalid kinds are ignored. It reports whether it
// sent a change (the caller logs state changes).
func (t *Table) Mark(region int, kind MarkKind) bool {
	if uint(region) >= uint(len(t.marks)) || kind != MarkRead && kind != MarkWrite {
		return false
	}
	r := &t.marks[region]
	if r.word.Load()&writeBit != 0 {
		return false // a write mark: nothing a mark adds until it is cleared
	}
	m, ok := t.mark(r, region, kind)
	if ok {
		t.emit(Change{Kind: ChangeMark, Mark: m})
	}
	return ok
}

func (t *Table) mark(r *regionMarks, region int, kind MarkKind) (Mark, bool) {
	now := t.clock.Now().UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.word.Load()
	if w&writeBit != 0 {
		return Mark{}, false
	}
	m := Mark{Region: t.regions[region], Kind: kind, Observer: t.origin}
	if kind == MarkWrite {
		m.Version = t.newVersion()
		r.word.Store(w | writeBit)
		r.write = markInfo{t.origin, m.Version}
		return m, true
	}
	until := max(now+t.backoff, 1)
	live := now < int64(w)
	if live && until <= int64(w) {
		return Mark{}, false
	}
	r.word.Store(uint64(until))
	if live && until-r.sharedUntil <= int64(markResend) {
		return Mark{}, false // extended here only; the cluster's copy ends soon enough
	}
	m.Version, m.Expires = t.newVersion(), time.Unix(0, until)
	r.read, r.sharedUntil = markInfo{t.origin, m.Version}, until
	return m, true
}

// Clear records that a router of region answered here: it ends the region's read and write
// marks. When the region is unmarked (the common case: Clear follows every successful
// answer) it is one atomic load: no lock, no clock, no feed entry. It sends a ChangeMark with
// Clear set only if it ended a live mark; an expired read mark is reset silently.
// Out of range: ignored. It reports whether it ended a live mark.
func (t *Table) Clear(region int) bool {
	if uint(region) >= uint(len(t.marks)) || t.marks[region].word.Load() == 0 {
		return false
	}
	m, ok := t.clear(region)
	if ok {
		t.emit(Change{Kind: ChangeMark, Mark: m})
	}
	return ok
}

func (t *Table) clear(region int) (Mark, bool) {
	r := &t.marks[region]
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.word.Load()
	if w == 0 {
		return Mark{}, false
	}
	r.word.Store(0)
	if w&writeBit == 0 && t.clock.Now().UnixNano() >= int64(w) {
		return Mark{}, false // the read mark had ended: reset, so the next Clear is one load
	}
	m := Mark{Region: t.regions[region], Clear: true, Observer: t.origin, Version: t.newVersion()}
	r.clear, r.read, r.write, r.sharedUntil = m.Version, markInfo{}, markInfo{}, 0
	return m, true
}

// ApplyMark applies a mark or a clear a peer observed and reports whether it did (false:
// ignored). A clear applies if newer than the region's newest clear: it ends the marks it is
// newer than, and is kept so that older marks arriving later stay ended. A mark applies if newer than both the region's newest clear and its newest
// mark of the same kind: a write mark sets the write mark, a read mark replaces the read mark,
// ending when it says but no later than ReadBackoff from now (a peer's clock may be ahead).
// Each kind keeps its own newest version, so a newer read mark does not hide an older write
// mark that no clear has ended, and any delivery order of the same set ends in the same state.
// Ignored: an unknown region (counted, Stats.UnknownRegion), a read mark already ended, a mark
// of no valid kind. Like Apply it advances the clock past m.Version, and it sends nothing on
// the feed.
func (t *Table) ApplyMark(m Mark) bool {
	id, ok := t.regionID[m.Region]
	if !ok {
		t.unknown.Add(1)
		return false
	}
	t.hlc.observe(m.Version.HLC)
	if !m.Clear && m.Kind != MarkRead && m.Kind != MarkWrite {
		return false
	}
	var until int64
	if !m.Clear && m.Kind == MarkRead {
		now := t.clock.Now()
		if !m.Expires.After(now) {
			return false
		}
		limit := now.Add(time.Duration(t.backoff))
		if m.Expires.Before(limit) {
			limit = m.Expires
		}
		until = limit.UnixNano()
	}
	r := &t.marks[id]
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.clear.Less(m.Version) {
		return false
	}
	info, w := markInfo{m.Observer, m.Version}, r.word.Load()
	switch {
	case m.Clear:
		r.clear = m.Version
		if r.write.version.Less(m.Version) {
			w &^= writeBit
			r.write = markInfo{}
		}
		if r.read.version.Less(m.Version) {
			w &= writeBit
			r.read, r.sharedUntil = markInfo{}, 0
		}
	case m.Kind == MarkWrite:
		if !r.write.version.Less(m.Version) {
			return false
		}
		w |= writeBit
		r.write = info
	default:
		if !r.read.version.Less(m.Version) {
			return false
		}
		w = w&writeBit | uint64(until)
		r.read, r.sharedUntil = info, until
	}
	r.word.Store(w)
	return true
}

// Marks returns the live marks, by region ID, the older first within a region (so that a
// peer applying them in turn takes both). Nil if none. It takes each marked region's lock.
func (t *Table) Marks() []Mark {
	var out []Mark
	for i := range t.marks {
		r := &t.marks[i]
		if r.word.Load() == 0 {
			continue
		}
		now := t.clock.Now().UnixNano()
		r.mu.Lock()
		w := r.word.Load()
		var read, write Mark
		hasWrite, hasRead := w&writeBit != 0, now < int64(w&^writeBit)
		if hasWrite {
			write = Mark{Region: t.regions[i], Kind: MarkWrite, Observer: r.write.observer, Version: r.write.version}
		}
		if hasRead {
			read = Mark{Region: t.regions[i], Kind: MarkRead, Observer: r.read.observer,
				Expires: time.Unix(0, int64(w&^writeBit)), Version: r.read.version}
		}
		r.mu.Unlock()
		switch {
		case hasRead && hasWrite && write.Version.Less(read.Version):
			out = append(out, write, read)
		case hasRead && hasWrite:
			out = append(out, read, write)
		case hasRead:
			out = append(out, read)
		case hasWrite:
			out = append(out, write)
		}
	}
	return out
}
