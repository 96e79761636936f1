package homes

import (
	"fmt"
	"slices"
	"time"
)

// regionSet is the configured regions at one moment. A region's ID is stable for the Table's
// life: a region added later takes the next unused ID, one removed keeps its ID (and its name,
// so that an ID read just before the removal still names the same region), and the same name
// added back takes its old ID again. So an ID a request read under one configuration never
// means another region under the next, and at most MaxRegions names are ever held.
type regionSet struct {
	names  []string       // by ID: every region the Table has held
	ids    map[string]int // configured name -> ID (removed names are absent)
	active uint64         // bit i: region i is configured
}

func newRegionSet(names []string) *regionSet {
	s := &regionSet{names: append([]string(nil), names...), ids: make(map[string]int, len(names))}
	for i, r := range names {
		s.ids[r] = i
		s.active |= 1 << i
	}
	return s
}

// configured reports whether id is a configured region.
func (s *regionSet) configured(id int) bool {
	return uint(id) < MaxRegions && s.active>>uint(id)&1 == 1
}

func (t *Table) regionSet() *regionSet { return t.regs.Load() }

// RegionChange is what SetRegions did.
type RegionChange struct {
	Added, Removed []string // region names
	Forgotten      int      // homes forgotten because their region was removed
}

// SetRegions makes names the configured regions, in any order (a region's ID does not depend
// on it). Regions no longer named are removed: their homes are forgotten (counted in
// Stats.RegionRemoved), their marks cleared, and from then on Learn, Apply and ApplyMark for
// them are ignored and counted as unknown. New names take new IDs. It fails, changing
// nothing, when names breaks Config's rules for Regions or when the Table would hold more
// than MaxRegions names over its life (a restart starts afresh).
//
// It takes ringMu and each shard's lock in turn, and costs a pass over the homes only when a
// region is removed. Safe for concurrent use with every other method; a home learned by a
// request that read the old set while the removal ran may stay at the removed region, and is
// never looked up by a plan that does not configure it.
func (t *Table) SetRegions(names []string) (RegionChange, error) {
	t.regsMu.Lock()
	defer t.regsMu.Unlock()
	old := t.regs.Load()
	next, ch, err := old.with(names)
	if err != nil {
		return RegionChange{}, err
	}
	var gone uint64
	for i, n := range old.names {
		if old.configured(i) && next.active>>i&1 == 0 {
			ch.Removed = append(ch.Removed, n)
			gone |= 1 << i
		}
	}
	t.regs.Store(next)
	if gone != 0 {
		ch.Forgotten = t.forgetRegions(gone)
		for i := range MaxRegions {
			if gone>>i&1 == 1 {
				r := &t.marks[i]
				r.mu.Lock()
				r.failure, r.clear, r.failedAt, r.sharedAt = markReg{}, markReg{}, 0, 0
				r.updateLocked()
				r.mu.Unlock()
			}
		}
	}
	return ch, nil
}

// CheckRegions reports the error SetRegions(names) would return now, changing nothing.
func (t *Table) CheckRegions(names []string) error {
	t.regsMu.Lock()
	defer t.regsMu.Unlock()
	_, _, err := t.regs.Load().with(names)
	return err
}

// with returns the set configuring names, keeping s's IDs, and what is added.
func (s *regionSet) with(names []string) (*regionSet, RegionChange, error) {
	if err := (Config{Regions: names, Origin: "x"}).Validate(); err != nil {
		return nil, RegionChange{}, err
	}
	next := &regionSet{names: append([]string(nil), s.names...), ids: make(map[string]int, len(names))}
	var ch RegionChange
	for _, name := range names {
		id := slices.Index(next.names, name)
		if id < 0 {
			if len(next.names) == MaxRegions {
				return nil, RegionChange{}, fmt.Errorf("%w: Regions: region %q would be the %dth region this entry has held; at most %d over its life (restart to start afresh)",
					ErrConfig, name, MaxRegions+1, MaxRegions)
			}
			id = len(next.names)
			next.names = append(next.names, name)
		}
		next.ids[name] = id
		next.active |= 1 << id
		if !s.configured(id) {
			ch.Added = append(ch.Added, name)
		}
	}
	return next, ch, nil
}

// forgetRegions removes every home whose region is in the set gone, and returns how many,
// then compacts the ring over their slots. Each home's region is read under its shard's lock,
// where an update in place would move it.
func (t *Table) forgetRegions(gone uint64) int {
	t.ringMu.Lock()
	defer t.ringMu.Unlock()
	var n int
	for seq := t.ring.head; seq < t.ring.tail; seq++ {
		idx := t.ring.index(seq)
		sl := t.ring.at(idx)
		if !sl.live {
			continue
		}
		if t.removeLocked(idx, sl, func(sl *slot) bool { return gone>>sl.region&1 == 1 }) {
			n++
		}
	}
	if n > 0 {
		t.compactLocked()
		t.gen.Add(1) // the homes held changed: a state writer writes again
	}
	t.regionRemoved.Add(uint64(n))
	return n
}

// compactLocked slides the live slots of [head, tail) down over the free ones, in order, so
// that the ring spans only homes held and the table again has room for Capacity of them. A
// home's sequence number only decreases, so a Range under way may miss a home, never see one
// twice. ringMu is held; each home moved is moved under its shard's lock.
func (t *Table) compactLocked() {
	w := t.ring.head
	for r := t.ring.head; r < t.ring.tail; r++ {
		from := t.ring.index(r)
		src := t.ring.at(from)
		if !src.live {
			continue
		}
		if r != w {
			to := t.ring.index(w)
			s, tag := t.locate(src.key)
			s.mu.Lock()
			*t.ring.at(to) = *src
			*src = slot{}
			s.x.move(tag, from, to)
			s.mu.Unlock()
		}
		w++
	}
	t.ring.tail = w
}

// ReadBackoff returns how long a read mark counts now (Config.ReadBackoff, or the latest
// SetReadBackoff). Safe for concurrent use.
func (t *Table) ReadBackoff() time.Duration { return time.Duration(t.backoff.Load()) }

// SetReadBackoff changes how long a read mark counts (Config.ReadBackoff), from the next plan
// on. d <= 0 means DefaultReadBackoff.
func (t *Table) SetReadBackoff(d time.Duration) {
	if d <= 0 {
		d = DefaultReadBackoff
	}
	t.backoff.Store(int64(d))
}
