package gossip

import (
	"context"
	"math"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"

	"github.com/fenec/fenec-entry/homes"
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
//   - a relay applies the batch and, once, queues its homes for its group; every RelayFlush it
//     packs the homes it queued, from many origins, into full batches (each home keeps its
//     origin's version: the wire carries the origin when it is not the sender) and sends
//     them, DirectCopies times, to the other members of its group.
//
// An origin sends about 2 sqrt(N) packets a batch instead of N-1, and a member receives each
// home in full packets. A home takes two hops and up to RelayFlush more. Entries whose member
// lists differ for a moment (a join, a failure) may group differently: a home a group then
// misses is repair's, as a lost packet is.

// relayTag marks a member able to relay.
const relayTag = "relay"

// relayQueue bounds the homes a relay holds for its next batches, and the batches waiting
// to be decoded; beyond it they are dropped, counted (eventsDropped "relay_queue_full"), and
// left to repair.
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
	bestScore := make([]uint64, groups)
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

// relayer is a relay's side: the batches to pass on to its group, decoded and their homes
// packed again, with their origins' versions, into full batches every RelayFlush, by its
// own goroutine (run), which owns the decoder, the encoder and the sender.
type relayer struct {
	in     chan []byte
	every  time.Duration
	plan   func() *relayPlan
	dec    *decoder
	enc    *encoder
	sender *directSender // copies, DirectCopies times; its peers are set per flush
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
	var held []homes.Home
	for {
		if !armed && len(r.sender.queue) > 0 {
			copyT.Reset(time.Until(r.sender.queue[0].due))
			armed = true
		}
		select {
		case <-ctx.Done():
			return
		case p := <-r.in:
			sender, b, err := r.dec.decode(p)
			if err != nil {
				continue // counted where it was received: it was valid then
			}
			r.m.relayed.Inc()
			for _, w := range b.H {
				if len(held) == relayQueue {
					r.m.eventsDropped.WithLabelValues("relay_queue_full").Inc()
					break
				}
				held = append(held, w.home(sender))
			}
		case now := <-copyT.C:
			armed = false
			r.sender.sendCopies(now)
		case now := <-tick.C:
			held = r.flush(now, held)
		}
	}
}

// flush sends the held homes to the group in full batches (each home with its origin's
// version), and returns held emptied.
func (r *relayer) flush(now time.Time, held []homes.Home) []homes.Home {
	if len(held) == 0 {
		return held
	}
	plan := r.plan()
	if plan != nil && len(plan.own) > 0 {
		own := plan.own
		r.sender.peers = func() []memberlist.Address { return own }
		events, _, _, _, err := r.enc.split(nil, held, len(held), false)
		if err == nil {
			for _, ev := range events {
				if r.sender.sendAs(now, directSealed, ev.payload) == nil {
					r.m.relayBatches.Inc()
				}
			}
		}
	} // else relays went off, or a group of one: the origin's own sends did it
	clear(held)
	return held[:0]
}
