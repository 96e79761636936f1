package homes

// ring is the table's insertion order: every tenant held, oldest first, each once. It is
// addressed by sequence number (the count of insertions before it), so a reader can copy a
// stretch, drop the lock, and find its place again after evictions moved the head.
// Not safe for concurrent use: Table.ringMu guards it.
type ring struct {
	buf        []string // grows to capacity, then reused circularly: seq s lives at s % capacity
	head, tail uint64   // seq of the oldest tenant held; seq the next insertion gets
	capacity   uint64
}

func (r *ring) len() int { return int(r.tail - r.head) }

// push appends key as the newest. The caller has made room (len < capacity).
func (r *ring) push(key string) {
	if i := r.tail % r.capacity; i < uint64(len(r.buf)) {
		r.buf[i] = key
	} else {
		r.buf = append(r.buf, key)
	}
	r.tail++
}

// pop removes and returns the oldest. The ring is not empty.
func (r *ring) pop() string {
	i := r.head % r.capacity
	key := r.buf[i]
	r.buf[i] = ""
	r.head++
	return key
}

// read copies the keys from seq from (or the head, if from was evicted) up to end into dst,
// and returns how many it copied and the seq to continue from.
func (r *ring) read(from, end uint64, dst []string) (n int, next uint64) {
	from = max(from, r.head)
	end = min(end, r.tail)
	for ; n < len(dst) && from < end; n, from = n+1, from+1 {
		dst[n] = r.buf[from%r.capacity]
	}
	return n, from
}

// filter keeps, in order, only the keys keep reports true for. The kept keys take new
// sequence numbers after the old tail, so a reader holding an old seq finds the head past it
// and stops: it may miss keys, never see one twice. It copies the kept keys once.
func (r *ring) filter(keep func(string) bool) {
	kept := make([]string, 0, r.len())
	for s := r.head; s < r.tail; s++ {
		if k := r.buf[s%r.capacity]; keep(k) {
			kept = append(kept, k)
		}
	}
	for s := r.head; s < r.tail; s++ {
		r.buf[s%r.capacity] = ""
	}
	r.head = r.tail
	for _, k := range kept {
		i := r.tail % r.capacity
		if i < uint64(len(r.buf)) {
			r.buf[i] = k
		} else {
			r.buf = append(r.buf, k)
		}
		r.tail++
	}
}
