package homes

import (
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"unique"
	"unsafe"

	"github.com/fenec/fenec-entry/internal/clock"
)

// Source says where a Table heard a home. The zero Source is no source (a home not held).
type Source uint8

const (
	SourceLocal  Source = iota + 1 // heard here, from a router's answer (Learn)
	SourceGossip                   // told by a peer (Apply)
)

func (s Source) String() string {
	switch s {
	case SourceLocal:
		return "local"
	case SourceGossip:
		return "gossip"
	}
	return fmt.Sprintf("Source(%d)", uint8(s))
}

// Home is one tenant's home region as observed at Version. The zero Home is no home.
type Home struct {
	Tenant  string
	Region  string // a configured region name
	Version Version
}

const (
	numShards = 64  // power of two; ~780 homes each at the default capacity
	cacheLine = 128 // padding unit against false sharing (two lines: adjacent-line prefetch)
	rangeStep = 256 // tenants Range copies per hold of ringMu
)

type shard struct {
	mu sync.RWMutex // guards x, and the slab slots of the homes x indexes (see slot)
	x  index
}

type paddedShard struct {
	shard
	_ [cacheLine - unsafe.Sizeof(shard{})%cacheLine]byte
}

// Table is the home table and the region marks. Make one with New; the zero Table is not
// usable. All methods are safe for concurrent use.
//
// Homes live in a slab of Capacity slots in insertion order (ring.go), indexed by 64 shards,
// each an open-addressing index under its own RWMutex, chosen by a seeded hash of the tenant.
// A separate mutex, ringMu, orders the insertion and eviction of tenants (never updates in
// place, never lookups), so the table holds at most Capacity homes at every instant and
// forgets the first inserted first. Lock order: ringMu, then one shard at a time; a region's
// marks lock is never held with either.
type Table struct {
	regs     atomic.Pointer[regionSet] // the configured regions; replaced whole by SetRegions
	regsMu   sync.Mutex                // serialises SetRegions
	origin   string
	clock    clock.Clock
	backoff  atomic.Int64 // ReadBackoff, ns
	capacity int

	seed   maphash.Seed
	shards [numShards]paddedShard

	ringMu sync.Mutex // guards ring; held across every insertion and eviction of a tenant
	ring   ring
	self   unique.Handle[string] // Origin, for the versions made here

	count    atomic.Int64    // homes held; moves only with ringMu held, so never above capacity
	bySource [3]atomic.Int64 // homes held by Source; briefly inconsistent with count

	hlc   hlc
	marks [MaxRegions]regionMarks // by region ID
	feed  chan Change

	evicted, dropped, unknown, regionRemoved atomic.Uint64
	gen                                      atomic.Uint64 // changes to the homes held (Generation)
}

// New returns an empty Table for cfg, or an error from cfg.Validate.
func New(cfg Config) (*Table, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	t := &Table{
		origin:   cfg.Origin,
		clock:    cfg.Clock,
		capacity: cfg.Capacity,
		seed:     maphash.MakeSeed(),
		ring:     newRing(cfg.Capacity),
		self:     unique.Make(cfg.Origin),
		feed:     make(chan Change, cfg.FeedSize),
	}
	t.regs.Store(newRegionSet(cfg.Regions))
	t.backoff.Store(int64(cfg.ReadBackoff))
	t.hlc.clock = t.clock
	// Each index is sized for its share of Capacity and a margin (four standard deviations
	// of a fair hash's spread), so that a full table's indexes stay near a load of 0.7 and
	// never grow on the request path.
	share := float64(cfg.Capacity) / numShards
	for i := range t.shards {
		t.shards[i].x = newIndex(int(share + 4*math.Sqrt(share)))
	}
	return t, nil
}

// RegionID returns the ID of the configured region named name. It counts nothing; LearnName
// does.
func (t *Table) RegionID(name string) (int, bool) {
	id, ok := t.regionSet().ids[name]
	return id, ok
}

// RegionName returns the name of region id, or "" and false if id is not a configured region.
func (t *Table) RegionName(id int) (string, bool) {
	s := t.regionSet()
	if !s.configured(id) {
		return "", false
	}
	return s.names[id], true
}

// NumRegions is the number of region IDs the table has handed out: IDs run from 0 to
// NumRegions-1, and those of removed regions are not configured (RegionName says which are).
// Without SetRegions it is the number of configured regions.
func (t *Table) NumRegions() int { return len(t.regionSet().names) }

// Regions returns the configured region names by ID ("" for a removed one's ID).
func (t *Table) Regions() []string {
	s := t.regionSet()
	out := make([]string, len(s.names))
	for i, n := range s.names {
		if s.configured(i) {
			out[i] = n
		}
	}
	return out
}

// name is the name of region ID id, configured or removed (IDs are never reused).
func (t *Table) name(id uint8) string { return t.regionSet().names[id] }

// shardIndex is the index of s in t.shards.
func (t *Table) shardIndex(s *shard) uint8 {
	return uint8((uintptr(unsafe.Pointer(s)) - uintptr(unsafe.Pointer(&t.shards[0]))) / unsafe.Sizeof(t.shards[0]))
}

// locate returns tenant's shard and its hash tag (the hash's high half; the shard is chosen by
// its low bits).
func (t *Table) locate(tenant string) (*shard, uint32) {
	h := maphash.String(t.seed, tenant)
	return &t.shards[h%numShards].shard, uint32(h >> 32)
}

// Lookup returns the home region ID of tenant, or -1 and false if it holds none.
// Hot path: O(1), no allocation, one shard read lock.
func (t *Table) Lookup(tenant string) (region int, ok bool) {
	s, tag := t.locate(tenant)
	s.mu.RLock()
	idx, ok := s.x.find(&t.ring, tag, tenant)
	if ok {
		region = int(t.ring.at(idx).region)
	}
	s.mu.RUnlock()
	if !ok {
		return -1, false
	}
	return region, true
}

// Learn records that a router said region is tenant's home. If the table already holds tenant
// at region, whatever the source, nothing changes and Learn returns false, under a read lock
// and without allocating. Otherwise it stores the home with a fresh local Version (newer than
// anything this table holds, so it replaces a gossiped home) as SourceLocal, sends a
// ChangeHome on the feed and returns true; a new tenant at full capacity evicts the oldest.
// A region out of range is ignored and counted (Stats.UnknownRegion). The tenant name is not
// validated; a new one is copied, so the caller's string is not retained.
func (t *Table) Learn(tenant string, region int) bool {
	if !t.regionSet().configured(region) {
		t.unknown.Add(1)
		return false
	}
	s, tag := t.locate(tenant)
	s.mu.RLock()
	idx, ok := s.x.find(&t.ring, tag, tenant)
	same := ok && int(t.ring.at(idx).region) == region
	s.mu.RUnlock()
	if same {
		return false
	}
	h, changed := t.put(s, tag, tenant, uint8(region), SourceLocal, Version{}, true)
	if changed {
		t.emit(Change{Kind: ChangeHome, Home: h})
	}
	return changed
}

// LearnName is Learn for a region given by name, as a router's Fenec-Home names it. An unknown
// name is ignored and counted (Stats.UnknownRegion). It does not allocate when nothing changes.
func (t *Table) LearnName(tenant, region string) bool {
	id, ok := t.regionSet().ids[region]
	if !ok {
		t.unknown.Add(1)
		return false
	}
	return t.Learn(tenant, id)
}

// Apply stores a home a peer observed, as SourceGossip, if the table holds no home for
// h.Tenant or holds an older one (Version order; equal Versions are broken by region name, so
// any delivery order of the same set of homes, duplicates included, ends in the same table).
// It advances the clock past h.Version even when it applies nothing, so homes learned here
// later are newer. It sends nothing on the feed. An unknown region is ignored, counted
// (Stats.UnknownRegion), and returns false.
//
// Apply validates nothing else: bounding a peer's clock (a Version far in the future drags
// this table's clock along and wins until the real clock catches up) and the tenant name are
// the caller's job. A new tenant at full capacity evicts the oldest, so once the table is full
// which homes remain depends on arrival order.
func (t *Table) Apply(h Home) bool {
	_, changed := t.store(h, SourceGossip)
	return changed
}

// store is Apply, Adopt and Restore without what each does after: h stored as src if news
// (Apply's rule), the clock advanced past h.Version, an unknown region counted.
func (t *Table) store(h Home, src Source) (Home, bool) {
	id, ok := t.regionSet().ids[h.Region]
	if !ok {
		t.unknown.Add(1)
		return Home{}, false
	}
	t.hlc.observe(h.Version.HLC)
	s, tag := t.locate(h.Tenant)
	return t.put(s, tag, h.Tenant, uint8(id), src, h.Version, false)
}

// Restore stores a home read back from this entry's own earlier run (a state file) with the
// Version and the Source it had then: what the entry heard itself stays SourceLocal. It is
// Apply otherwise: the same rule (stored only if the table holds no home for h.Tenant or an
// older one), the clock advanced past h.Version so that homes learned later are newer, nothing
// sent on the feed, an unknown region ignored, counted (Stats.UnknownRegion) and false. Restoring
// homes oldest first keeps their eviction order. A src other than SourceLocal and SourceGossip
// is stored as SourceGossip.
func (t *Table) Restore(h Home, src Source) bool {
	if src != SourceLocal {
		src = SourceGossip
	}
	_, changed := t.store(h, src)
	return changed
}

// Generation counts the changes to the homes held since New: it moves on every insertion
// (an eviction comes with one) and every update in place, and never otherwise. Two equal
// readings mean the homes held did not change in between. Lock-free; what a state writer polls.
func (t *Table) Generation() uint64 { return t.gen.Load() }

// put stores an observation of tenant (in shard s, under tag) at region. With fresh (Learn) the
// Version is made here, under the shard lock, so that it orders after whatever it replaces;
// otherwise (Apply, Restore) v is used, if newer. It returns the home as stored and whether
// anything changed.
func (t *Table) put(s *shard, tag uint32, tenant string, region uint8, src Source, v Version, fresh bool) (Home, bool) {
	origin := t.self
	if !fresh && v.Origin != t.origin {
		origin = unique.Make(v.Origin) // before the locks: a lookup in the runtime's own map
	}
	s.mu.Lock()
	if idx, ok := s.x.find(&t.ring, tag, tenant); ok {
		h, changed := t.updateLocked(t.ring.at(idx), region, src, v, origin, fresh)
		s.mu.Unlock()
		return h, changed
	}
	s.mu.Unlock()

	// A new tenant. Every insertion and eviction holds ringMu, so from here until it is
	// released the set of tenants held is stable.
	t.ringMu.Lock()
	defer t.ringMu.Unlock()
	s.mu.Lock()
	if idx, ok := s.x.find(&t.ring, tag, tenant); ok { // another goroutine inserted it first
		h, changed := t.updateLocked(t.ring.at(idx), region, src, v, origin, fresh)
		s.mu.Unlock()
		return h, changed
	}
	s.mu.Unlock()
	if t.ring.len() >= t.capacity {
		t.evictOldestLocked() // before inserting: never above capacity, even for a moment
	}
	key := strings.Clone(tenant)
	idx := t.ring.push()
	sl := t.ring.at(idx)
	s.mu.Lock()
	if fresh {
		v = t.newVersion()
	}
	*sl = slot{key: key, hlc: v.HLC, origin: origin, region: region, src: src, live: true, shard: t.shardIndex(s)}
	s.x.insert(tag, idx)
	s.mu.Unlock()
	t.count.Add(1)
	t.bySource[src].Add(1)
	t.gen.Add(1)
	return Home{Tenant: key, Region: t.name(region), Version: v}, true
}

// updateLocked replaces the home in sl if the observation is news: with fresh (Learn) a
// different region, otherwise a newer version (origin is v.Origin's handle, or this table's
// for fresh). Its shard's lock is held.
func (t *Table) updateLocked(sl *slot, region uint8, src Source, v Version, origin unique.Handle[string], fresh bool) (Home, bool) {
	if fresh {
		if sl.region == region {
			return Home{}, false
		}
		v = t.newVersion()
	} else if !newer(v, t.name(region), sl.version(), t.name(sl.region)) {
		return Home{}, false
	}
	if sl.src != src {
		t.bySource[sl.src].Add(-1)
		t.bySource[src].Add(1)
	}
	sl.hlc, sl.origin, sl.region, sl.src = v.HLC, origin, region, src
	t.gen.Add(1)
	return Home{Tenant: sl.key, Region: t.name(region), Version: v}, true
}

// newer reports whether an observation (v, region) replaces a held one (hv, hregion). Equal
// versions are broken by region name, so that even a misbehaving origin that stamps two homes
// alike cannot make the outcome depend on arrival order.
func newer(v Version, region string, hv Version, hregion string) bool {
	if v != hv {
		return hv.Less(v)
	}
	return region > hregion
}

// evictOldestLocked frees the oldest slot of the ring, forgetting its home if it holds one.
// ringMu is held; no shard lock is.
func (t *Table) evictOldestLocked() {
	idx := t.ring.index(t.ring.head)
	t.ring.head++
	sl := t.ring.at(idx)
	if !sl.live {
		return // forgotten already (SetRegions)
	}
	t.removeLocked(idx, sl, nil)
	t.evicted.Add(1)
}

// removeLocked forgets the home at slab index idx if drop (called with its shard's lock
// held) says so, and reports whether it did. ringMu is held; no shard lock is.
func (t *Table) removeLocked(idx uint32, sl *slot, drop func(*slot) bool) bool {
	s, tag := t.locate(sl.key)
	s.mu.Lock()
	if drop != nil && !drop(sl) {
		s.mu.Unlock()
		return false
	}
	src := sl.src
	s.x.remove(tag, idx)
	*sl = slot{}
	s.mu.Unlock()
	t.count.Add(-1)
	t.bySource[src].Add(-1)
	return true
}

func (t *Table) newVersion() Version { return Version{HLC: t.hlc.now(), Origin: t.origin} }

// Get returns tenant's home and where it was heard, or false if the table holds none.
func (t *Table) Get(tenant string) (Home, Source, bool) {
	s, tag := t.locate(tenant)
	s.mu.RLock()
	idx, ok := s.x.find(&t.ring, tag, tenant)
	if !ok {
		s.mu.RUnlock()
		return Home{}, 0, false
	}
	sl := t.ring.at(idx)
	h, src := Home{Tenant: sl.key, Region: t.name(sl.region), Version: sl.version()}, sl.src
	s.mu.RUnlock()
	return h, src, true
}

// Range calls fn for each home, oldest first (insertion order, so that a peer applying them in
// turn keeps the same ones when it is full), until fn returns false. It visits each home held
// when Range began that is still held when reached, at most once, as it is then; homes
// inserted meanwhile are not visited.
//
// fn runs with no lock held and may call any Table method. Cost: ringMu, which only the
// insertion of a new tenant waits for, is held while up to 256 slots are noted, and again
// while each home is read from its slot under its shard's read lock (no hashing, no probe),
// so Lookup and updates in place never wait. It allocates nothing but what fn does.
func (t *Table) Range(fn func(Home, Source) bool) {
	var refs [rangeStep]slotRef
	t.ringMu.Lock()
	next, end := t.ring.head, t.ring.tail
	t.ringMu.Unlock()
	for next < end {
		t.ringMu.Lock()
		var n int
		n, next = t.ring.read(next, end, refs[:])
		t.ringMu.Unlock()
		for _, r := range refs[:n] {
			// The slot may have been freed, or taken by a home inserted since (its key is
			// another string then): both are skipped. It is read with ringMu held: a freed
			// slot is taken again only by an insertion, which holds ringMu, so the slot
			// belongs to the shard its ref names while it is read, and that shard's lock
			// orders the read with an update in place. (Without ringMu, a slot taken by
			// another shard's home was written under that shard's lock while this read held
			// the old one's: a data race, and a torn read.)
			s := &t.shards[r.shard].shard
			t.ringMu.Lock()
			s.mu.RLock()
			sl := t.ring.at(r.idx)
			ok := sl.live && unsafe.StringData(sl.key) == unsafe.StringData(r.key)
			var h Home
			var src Source
			if ok {
				h, src = Home{Tenant: sl.key, Region: t.name(sl.region), Version: sl.version()}, sl.src
			}
			s.mu.RUnlock()
			t.ringMu.Unlock()
			if ok && !fn(h, src) {
				return
			}
		}
		if n == 0 {
			return
		}
	}
}

// Len is the number of homes held, at most Capacity at every instant.
func (t *Table) Len() int { return int(t.count.Load()) }
