package spread

import (
	"hash/maphash"
	"time"

	"github.com/hashicorp/memberlist"
)

// Direct homes. serf re-sends every user event RetransmitMult x ceil(log10(N+1)) times from
// every entry (8 sends per entry at 10 entries, 12 at 100), and an entry learns only R/N of
// the R homes a second the cluster learns, so per-entry batching cannot fill events: every
// home costs a dozen event sends at every entry, and 50 homes/s saturates serf's packets at
// 100 entries (bench/gossipsim/README.md). Homes therefore go straight from the entry that
// learned them to every member, in one hop, on memberlist's own port: the packet is
// sent to each member DirectCopies times, DirectCopyInterval apart, so that with 1 % loss a
// (home, entry) pair is missed with probability 0.01^DirectCopies, and repair carries those.
// Cost: an entry sends each of its batches (N-1) x DirectCopies times, against serf's
// N x 12 event sends per event cluster-wide, and a home arrives after one network hop, not
// log(N) gossip rounds. Marks and clears, rare and urgent, stay on serf user events, whose
// epidemic reaches members the origin does not know yet.

// directDedup remembers the last directDedupSize payloads applied, so that the copies of a
// packet are decoded and applied once. Not safe for concurrent use.
type directDedup struct {
	seed maphash.Seed
	seen map[uint64]struct{}
	ring [directDedupSize]uint64
	next int
}

const directDedupSize = 1024

func newDirectDedup() *directDedup {
	return &directDedup{seed: maphash.MakeSeed(), seen: make(map[uint64]struct{}, directDedupSize)}
}

// has reports whether payload was added and not forgotten yet.
func (d *directDedup) has(payload []byte) bool {
	_, ok := d.seen[maphash.Bytes(d.seed, payload)]
	return ok
}

// add remembers payload, forgetting the oldest beyond directDedupSize.
func (d *directDedup) add(payload []byte) {
	h := maphash.Bytes(d.seed, payload)
	if _, ok := d.seen[h]; ok {
		return
	}
	delete(d.seen, d.ring[d.next])
	d.ring[d.next] = h
	d.next = (d.next + 1) % directDedupSize
	d.seen[h] = struct{}{}
}

// directCopy is a sealed packet with copies still to send.
type directCopy struct {
	pkt   []byte
	peers []memberlist.Address
	left  int
	due   time.Time
}
