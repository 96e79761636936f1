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
