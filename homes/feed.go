package homes

import (
	"fmt"
	"math/bits"
)

// ChangeKind says which field of a Change is set. The zero ChangeKind is invalid.
type ChangeKind uint8

const (
	ChangeHome ChangeKind = iota + 1 // Home: a home learned here, new or moved
	ChangeMark                       // Mark: a mark made or a clear observed here
)

func (k ChangeKind) String() string {
	switch k {
	case ChangeHome:
		return "home"
	case ChangeMark:
		return "mark"
	}
	return fmt.Sprintf("ChangeKind(%d)", uint8(k))
}

// Change is something this entry observed itself and should publish: a Learn that changed
// the table, a Mark that changed a region's state, or a Clear that ended a mark. What peers
// told it (Apply, ApplyMark) is never on the feed.
type Change struct {
	Kind ChangeKind
	Home Home // set for ChangeHome
	Mark Mark // set for ChangeMark
}

// Changes returns the change feed: one channel, the same on every call, for one subscriber
// (the gossip publisher). It is never closed. Sends never block the request path: a change
// that finds the buffer (Config.FeedSize) full is dropped and counted (Stats.FeedDropped), and
// the subscriber's periodic anti-entropy (Range, Marks) must carry it. With no subscriber, the
// first FeedSize changes wait in the buffer and later ones are dropped.
func (t *Table) Changes() <-chan Change { return t.feed }

func (t *Table) emit(c Change) {
	select {
	case t.feed <- c:
	default:
		t.dropped.Add(1)
	}
}

// Stats are the table's gauges and counters. Each field is read atomically but not all at
// one instant, so Local+Gossip may briefly differ from Homes.
type Stats struct {
	Homes  int // homes held, at most Capacity
	Local  int // of which heard here (SourceLocal)
	Gossip int // of which told by a peer (SourceGossip)

	Evicted       uint64 // homes forgotten to make room, since New
	FeedDropped   uint64 // changes dropped because the feed was full, since New
	UnknownRegion uint64 // Learn, LearnName, Apply, ApplyMark naming no configured region, since New
	RegionRemoved uint64 // homes forgotten because SetRegions removed their region, since New

	Marked int // regions failing now (asked last by plain writes)
}

// Stats returns the current Stats. It takes no lock and does not allocate.
func (t *Table) Stats() Stats {
	st := Stats{
		Homes:         t.Len(),
		Local:         int(t.bySource[SourceLocal].Load()),
		Gossip:        int(t.bySource[SourceGossip].Load()),
		Evicted:       t.evicted.Load(),
		FeedDropped:   t.dropped.Load(),
		UnknownRegion: t.unknown.Load(),
		RegionRemoved: t.regionRemoved.Load(),
	}
	st.Marked = bits.OnesCount64(t.Failing())
	return st
}
