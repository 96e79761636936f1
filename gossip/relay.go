package gossip

import (
	"context"
	"encoding/binary"
	"math"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
)

// Relays, for large fleets (issue 12; bench/msgsim's proposal, first hop by copies). Direct
// homes cost the origin N-1 packets a batch, and a member receives a batch of one home (89 B,
// three times) from every origin that learns little: at 1,000 entries and 500 homes a second
// about 130 KB/s each, and 30,000 packets a second from an origin at 5,000 entries. With more
// than RelayAbove alive members, in a keyed cluster, and every member able to (tag relay=1,
// so a rolling deploy keeps older members on direct), the members are split into
// ceil(sqrt(N)) groups by a hash of their names:
//
//   - the origin sends each batch, with its copies, to the other members of its own group and
//     to one relay in each other group (directRelay): the member of that group with the
//     highest rendezvous hash of (origin, member), so every entry picks the same one and an
//     origin's batches are spread over a group's members;
//   - a relay applies the batch and, once, queues it for its group; every RelayFlush it packs
//     what it queued, from many origins, into full packets (directBundle) and sends them,
//     DirectCopies times, to the other members of its group.
//
// An origin sends about 2 sqrt(N) packets a batch instead of N-1, and a member receives each
// home in full packets. A home takes two hops and up to RelayFlush more. Entries whose member
// lists differ for a moment (a join, a failure) may group differently: a home a group then
// misses is repair's, as a lost packet is.

// relayTag marks a member able to relay and to read bundles.
const relayTag = "relay"

// relayQueue bounds the payloads a relay holds for its next bundles; beyond it they are
// dropped, counted (eventsDropped "relay_queue_full"), and left to repair.
const relayQueue = 4096

// relayPlan is what this entry does with a batch when relays are on: own is its group but
// itself, relays one member of each other group.
type relayPlan struct {
	own, relays []memberlist.Address
}

// planRelays returns the relay plan for self among members (alive, self included), or nil
// when relays are off: insecure gossip, RelayAbove members or fewer, or a member without
// the relay tag.
func planRelays(self string, members []serf.Member, above int, secure bool) *relayPlan {
	if !secure || above < 0 || len(members) <= above {
		return nil
	}
	for _, m := range members {
		if m.Tags[relayTag] != "1" {
			return nil
		}
	}
	groups := int(math.Ceil(math.Sqrt(float64(len(members)))))
	mine := groupOf(self, groups)
	best := make([]*serf.Member, groups)
	var bestScore []uint64 = make([]uint64, groups)
	p := &relayPlan{}
	for i := range members {
		m := &members[i]
		if m.Name == self {
			continue
		}
		g := groupOf(m.Name, groups)
		if g == mine {
			p.own = append(p.own, memberlist.Address{Addr: memberAddr(*m), Name: m.Name})
			continue
		}
		if score := mix64(fnvStr(fnvStr(fnvOffset, self), m.Name)); best[g] == nil || score > bestScore[g] {
			best[g], bestScore[g] = m, score
		}
	}
	for g, m := range best {
		if g != mine && m != nil {
			p.relays = append(p.relays, memberlist.Address{Addr: memberAddr(*m), Name: m.Name})
		}
	}
	return p
}

func groupOf(name string, groups int) int {
	return int(mix64(fnvStr(fnvOffset, name)) % uint64(groups))
}

// relayer is a relay's side: the payloads to forward to its group, packed into bundles
// every RelayFlush by its own goroutine (run), which owns the sender.
type relayer struct {
	in     chan []byte
	every  time.Duration
	max    int // a bundle's largest plaintext
	plan   func() *relayPlan
	sender *directSender // copies, DirectCopies times; its peers are set per bundle
	m      *metrics
}

// forward queues payload for the group; never blocks.
func (r *relayer) forward(payload []byte) {
	select {
	case r.in <- payload:
	default:
		r.m.eventsDropped.WithLabelValues("relay_queue_full").Inc()
	}
}

func (r *relayer) run(ctx context.Context) {
	tick := time.NewTicker(r.every)
	defer tick.Stop()
	copyT := time.NewTimer(time.Hour)
	copyT.Stop()
	armed := false
	var held [][]byte
	for {
		if !armed && len(r.sender.queue) > 0 {
			copyT.Reset(time.Until(r.sender.queue[0].due))
			armed = true
		}
		select {
		case <-ctx.Done():
			return
		case p := <-r.in:
			held = append(held, p)
		case now := <-copyT.C:
			armed = false
			r.sender.sendCopies(now)
		case now := <-tick.C:
			held = r.flush(now, held)
		}
	}
}

// flush sends what is held in bundles to the group, and returns held emptied.
func (r *relayer) flush(now time.Time, held [][]byte) [][]byte {
	if len(held) == 0 {
		return held
	}
	plan := r.plan()
	if plan == nil || len(plan.own) == 0 {
		clear(held)
		return held[:0] // relays went off, or a group of one: the origin's own sends did it
	}
	own := plan.own
	r.sender.peers = func() []memberlist.Address { return own }
	var bundle []byte
	send := func() {
		if len(bundle) > 0 {
			if err := r.sender.sendAs(now, directBundle, bundle); err == nil {
				r.m.bundlesSent.Inc()
			}
			bundle = nil
		}
	}
	for _, p := range held {
		if len(bundle)+binary.MaxVarintLen16+len(p) > r.max {
			send()
		}
		bundle = binary.AppendUvarint(bundle, uint64(len(p)))
		bundle = append(bundle, p...)
		r.m.relayed.Inc()
	}
	send()
	clear(held)
	return held[:0]
}

// splitBundle returns the payloads of a bundle, or false if it is malformed.
func splitBundle(b []byte) ([][]byte, bool) {
	var out [][]byte
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n == 0 || n > uint64(len(b)-k) {
			return nil, false
		}
		out = append(out, b[k:k+int(n)])
		b = b[k+int(n):]
	}
	return out, true
}
