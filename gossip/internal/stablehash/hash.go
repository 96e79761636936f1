package stablehash

// FNV-1a 64 with murmur3's finaliser: fixed across processes and releases (unlike maphash),
// fast, and well mixed so that sums of hashes do not cancel.
const (
	Offset   = 14695981039346656037 // the hash of nothing: where String and Uint64 start
	fnvPrime = 1099511628211
)

// String folds s, with its length, into h.
func String(h uint64, s string) uint64 {
	h = Uint64(h, uint64(len(s)))
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// Uint64 folds v, byte by byte, into h.
func Uint64(h, v uint64) uint64 {
	for range 8 {
		h ^= v & 0xff
		h *= fnvPrime
		v >>= 8
	}
	return h
}

// Mix is murmur3's 64-bit finaliser: every bit of x moves every bit of the result.
func Mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Of is the hash of s alone, mixed: String from Offset, then Mix.
func Of(s string) uint64 { return Mix(String(Offset, s)) }

// Jump is key's bucket of buckets (at least 1), by Lamping and Veach's jump consistent hash
// ("A Fast, Minimal Memory, Consistent Hash Algorithm", 2014): when buckets grows by one,
// only the keys that move to the new bucket change, 1/buckets of them, where key % buckets
// moves nearly all.
func Jump(key uint64, buckets int) int {
	var b, j int64 = -1, 0
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}
