package homes

import "unique"

// The table's memory (the goal: at most 64 bytes a home beyond its name, at a million homes).
// Homes are kept in a slab, a ring of fixed slots in insertion order, and each shard indexes
// its tenants with an open-addressing array of 8-byte words. A home costs its slot (40 bytes:
// the name's string header, the version's clock, the version's origin as a unique.Handle, the
// region and the source), its index word at a load of about 0.7 (11 bytes), and its name's
// bytes (one allocation, rounded up to Go's size class). A map[string]entry cost about 174
// bytes beyond the name: the entry with a string origin, the map's slots and growth, a second
// string header in the ring.

// slot is one home of the slab. A free slot (evicted, forgotten, never used) has live false.
// Its fields are written with ringMu held when a home is inserted or removed (and the home's
// shard lock, once it is indexed), and with only the shard lock when a home is updated in
// place; so a reader holding the shard lock reads every field, and one holding ringMu reads
// key and live.
type slot struct {
	key    string // the tenant, the table's own copy
	hlc    uint64 // Version.HLC
	origin unique.Handle[string]
	region uint8
	src    Source
	live   bool
	shard  uint8 // the shard indexing it: Range reads the slot under its lock without hashing the name again
}

func (s *slot) version() Version { return Version{HLC: s.hlc, Origin: s.origin.Value()} }

// slabChunk is the slots allocated at once as the ring first reaches them: a table is cheap
// until it fills.
const slabChunk = 1024

// ring is the slab: Capacity slots, addressed by sequence number (the count of insertions
// before it), slot seq % capacity. Every home held is at one sequence number in [head, tail),
// oldest first; a slot in that span may be free (a home forgotten by SetRegions). Not safe
// for concurrent use: Table.ringMu guards head, tail and the chunk pointers (see slot for
// the slots themselves).
type ring struct {
	chunks     []*[slabChunk]slot // allocated as tail first reaches them, never moved or freed
	head, tail uint64             // seq of the oldest slot in use; seq the next insertion gets
	capacity   uint64
}

func newRing(capacity int) ring {
	n := (capacity + slabChunk - 1) / slabChunk
	return ring{chunks: make([]*[slabChunk]slot, n), capacity: uint64(capacity)}
}

// len is the number of slots in [head, tail): homes held and forgotten ones not yet passed.
func (r *ring) len() int { return int(r.tail - r.head) }

// index is the slab index of seq.
func (r *ring) index(seq uint64) uint32 { return uint32(seq % r.capacity) }

// at is slab slot i. The caller holds ringMu, or the shard lock of the home indexed at i.
func (r *ring) at(i uint32) *slot { return &r.chunks[i/slabChunk][i%slabChunk] }

// push takes the next slot for a new home and returns its index. The caller made room
// (len < capacity) and holds ringMu.
func (r *ring) push() uint32 {
	i := r.index(r.tail)
	if r.chunks[i/slabChunk] == nil {
		r.chunks[i/slabChunk] = new([slabChunk]slot)
	}
	r.tail++
	return i
}

// slotRef is a live slot as Range saw it with ringMu held: where it is, which shard indexes
// it, and its key (to tell, under the shard's lock, that the slot still holds that home).
type slotRef struct {
	key   string
	idx   uint32
	shard uint8
}

// read copies the live slots from seq from (or the head, if from was passed) up to end into
// dst, and returns how many it copied and the seq to continue from.
func (r *ring) read(from, end uint64, dst []slotRef) (n int, next uint64) {
	from = max(from, r.head)
	end = min(end, r.tail)
	for ; n < len(dst) && from < end; from++ {
		i := r.index(from)
		if s := r.at(i); s.live {
			dst[n] = slotRef{key: s.key, idx: i, shard: s.shard}
			n++
		}
	}
	return n, from
}

// index is one shard's open-addressing index over the slab: linear probing, each word the
// tenant's 32-bit hash tag (high half) and its slab index + 1 (low half; 0 is an empty
// word). A word's home position is fixed by its tag, so the array can be grown and a word
// removed (backward shift, no tombstones) without the tenant's name. Guarded by its shard's
// lock.
type index struct {
	words []uint64
	n     int // words in use
}

// maxLoad is when an index grows (twice its size): sized at New for its share of Capacity
// below that, it grows only when a shard gets far more than its share.
const maxLoad = 0.85

func newIndex(expect int) index {
	size := int(float64(expect)/0.72) + 8
	return index{words: make([]uint64, size)}
}

// home is the position a tag's probe starts at (Lemire's multiply-shift reduction).
func (x *index) home(tag uint32) int { return int(uint64(tag) * uint64(len(x.words)) >> 32) }

// find returns the slab index of tenant (tag is its hash's high half), comparing names in
// slab r, or false. The shard lock is held.
func (x *index) find(r *ring, tag uint32, tenant string) (uint32, bool) {
	w := x.words
	for i := x.home(tag); ; {
		e := w[i]
		if e == 0 {
			return 0, false
		}
		if uint32(e>>32) == tag {
			if idx := uint32(e) - 1; r.at(idx).key == tenant {
				return idx, true
			}
		}
		if i++; i == len(w) {
			i = 0
		}
	}
}

// insert adds slab index idx under tag. The tenant is not in the index; the shard lock is
// held for writing.
func (x *index) insert(tag, idx uint32) {
	if float64(x.n+1) > maxLoad*float64(len(x.words)) {
		x.grow()
	}
	x.put(uint64(tag)<<32 | uint64(idx+1))
	x.n++
}

func (x *index) put(e uint64) {
	w := x.words
	i := x.home(uint32(e >> 32))
	for w[i] != 0 {
		if i++; i == len(w) {
			i = 0
		}
	}
	w[i] = e
}

func (x *index) grow() {
	old := x.words
	x.words = make([]uint64, 2*len(old))
	for _, e := range old {
		if e != 0 {
			x.put(e)
		}
	}
}

// remove deletes slab index idx (indexed under tag), shifting later words of its run back
// so that every probe still finds them. The shard lock is held for writing.
func (x *index) remove(tag, idx uint32) {
	w := x.words
	want := uint64(idx + 1)
	i := x.home(tag)
	for uint32(w[i]) != uint32(want) {
		if w[i] == 0 {
			return // not indexed (cannot happen: callers remove what they inserted)
		}
		if i++; i == len(w) {
			i = 0
		}
	}
	// Backward shift: move each later word of the run whose home is not in (i, j] to i.
	for j := i; ; {
		if j++; j == len(w) {
			j = 0
		}
		e := w[j]
		if e == 0 {
			break
		}
		k := x.home(uint32(e >> 32))
		if i <= j {
			if i < k && k <= j {
				continue
			}
		} else if i < k || k <= j {
			continue
		}
		w[i] = e
		i = j
	}
	w[i] = 0
	x.n--
}

// move re-points the word of slab index from (indexed under tag) at slab index to. The shard
// lock is held for writing.
func (x *index) move(tag, from, to uint32) {
	w := x.words
	for i := x.home(tag); w[i] != 0; {
		if uint32(w[i]) == from+1 {
			w[i] = uint64(tag)<<32 | uint64(to+1)
			return
		}
		if i++; i == len(w) {
			i = 0
		}
	}
}
