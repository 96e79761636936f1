package spread

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/fenec/fenec-entry/gossip/internal/stablehash"
	"github.com/fenec/fenec-entry/gossip/internal/wire"
	"github.com/fenec/fenec-entry/homes"
)

// Relays, for large fleets. Direct homes cost the origin
// N-1 packets a batch, and a member receives a batch of one home (89 B, three times) from every
// origin that learns little: at 1,000 entries and 500 homes a second about 130 KB/s each, and
// 30,000 packets a second from an origin at 5,000 entries. While the fleet's new homes, sent
// straight, would cost each entry more than DirectLimit bytes a second (relayRule), in a keyed
// cluster, and every member able to (tag relay=4, so a rolling deploy keeps older members on
// direct), the members are split into ceil(2 sqrt(N)) groups (relayGroups) by a jump consistent
// hash of their names (a member joining or leaving moves few others: when the count of groups grows by one,
// only the members that go to the new group move). Every member of a group relays its share
// of the tenants: a tenant's relay in a group is the member with the highest rendezvous hash
// of (tenant, member), so that every entry picks the same one, each member relays about
// 1/(group size) of the homes, and a member joining or leaving a group moves only the tenants
// it takes or had:
//
//   - the origin sends each batch once to the other members of its own group, and each home,
//     in batches of its own (one for each relay), once to its relay in each other group
//     (wire.KindRelay);
//   - a relay applies what it takes and queues its homes for its group; every relayFlush it
//     packs the homes it queued, from many origins, into full batches (each home keeps its
//     origin's version: the wire carries the origin when it is not the sender) and sends
//     them once to the other members of its group;
//   - every packet on both hops is acked, and sent again where no ack came (acked.go); a
//     relay that never acks (dead, partitioned) makes the origin send the batch straight to
//     the rest of the relay's group.
//
// An origin sends about 2.5 sqrt(N) packets a home (its group, and a relay in each other group)
// instead of N-1, a member receives each home about once, in packed batches, and a relay
// sends its group its share of everything, so that what a member sends and what it receives
// are about the same whichever it is. A home takes two hops and up to a relay flush more.
// Entries whose member lists differ for a moment (a join, a failure) may group differently:
// a home a group then misses is repair's, as a lost packet is.

// relayRule decides whether this entry's homes go through relays, by one rule every entry
// computes alike: sending the fleet's new homes straight to every member costs each entry
// about the rate of new homes x homeBytes (a home is a batch of its own at one entry in most
// fleets: 89 bytes, DirectCopies times), sent and received alike, whatever the fleet's size.
// While that is above limit bytes a second (DirectLimit; negative: never), smoothed over
// relayWindow, homes go through relays; below half of it, straight again, so that a rate near
// the limit does not flap. Every entry counts the same homes (those it learns and those it
// applies from peers), so the fleet switches nearly as one; for a moment between, members take
// homes both ways, and a relay passes on what it is sent whatever its own homes do. The rate
// of the whole fleet's homes is steady where one origin's, a few a minute, would turn relays
// on at every burst of two. The publisher's goroutine observes; seen and state may be used
// from any.
type relayRule struct {
	limit     float64
	homeBytes float64      // a home's direct cost to one member: directHomeBytes x copies
	seen      atomic.Int64 // homes learned here or applied from peers since the last observe
	rate      float64      // bytes a second, an exponentially weighted average over relayWindow
	at        time.Time
	on        atomic.Bool
	est       atomic.Uint64 // rate's float64 bits, for state
}

// directHomeBytes is a batch of one home, sealed (wire.Overhead and all), on the direct path.
const directHomeBytes = 89

// relayWindow is the relay rule's averaging time: a burst shorter than it moves the estimate
// by its share of it.
const relayWindow = 10 * time.Second

// observe takes the homes seen since the last call into the estimate, at now.
func (r *relayRule) observe(now time.Time) {
	bytes := float64(r.seen.Swap(0)) * r.homeBytes
	if !r.at.IsZero() {
		if dt := now.Sub(r.at); dt > 0 {
			r.rate *= math.Exp(-dt.Seconds() / relayWindow.Seconds())
		}
	}
	r.at = now
	r.rate += bytes / relayWindow.Seconds()
	r.est.Store(math.Float64bits(r.rate))
	switch on := r.on.Load(); {
	case r.limit < 0:
		r.on.Store(false)
	case !on && r.rate > r.limit:
		r.on.Store(true)
	case on && r.rate < r.limit/2:
		r.on.Store(false)
	}
}

// state is whether homes go through relays now, and the estimate of the direct bytes a second.
func (r *relayRule) state() (bool, float64) {
	return r.on.Load(), math.Float64frombits(r.est.Load())
}

// newOwnBudget is what an entry's own homes sent straight may cost it while the fleet's go
// straight (directSender.route): 1.5 x limit bytes a second, 10 s of it saved up. At 100
// entries a home costs its origin 26 KB and an origin learns one every 2 s on average at 50 a
// second: the burst holds 11, and a home goes through relays about never; at 5,000 entries
// one home costs 1.3 MB, and they all do.
func newOwnBudget(limit float64, now time.Time) *tokenBucket {
	rate := 1.5 * limit
	return &tokenBucket{rate: rate, burst: 10 * rate, tokens: 10 * rate, at: now}
}

// RelayTag marks a member able to relay, with RelayVersion: 4, every member relays its share
// of the tenants (3 grouped by jump hash with a relay a shard, 2 grouped by hash mod groups, 1
// sent copies, never released). Members of two versions pick different relays, so any member
// without this one keeps every entry on direct. Every entry of this build carries it.
const (
	RelayTag     = "relay"
	RelayVersion = "4"
)

// relayQueue bounds the homes a relay holds for its next batches, and the batches waiting
// to be decoded; beyond it they are dropped, counted (eventsDropped "relay_queue_full"), and
// left to repair.
const relayQueue = 4096

// relayPacketRate bounds the relay batches a member receives a second from its group's relays:
// each of the group's other members flushes at most once every (group members) / relayPacketRate
// seconds, and at most once every RelayFlush (relayFlushEvery). A relay packet costs its receiver
// about 100 bytes besides its homes (the seal, the sender, the ack it sends back), so this keeps
// that part near 4 KB/s whatever the group's size: in groups of 5 and 16 (100 and 1,000
// entries) a relay flushes every RelayFlush (500 ms), in groups of 35 (5,000) every 880 ms.
const relayPacketRate = 40

// relayGroups is how many groups n members form: 2 sqrt(n), so that groups of sqrt(n)/2 keep
// what a member receives from its group's relays small (relayPacketRate) at a relay flush
// short enough for p99 (docs/DECISIONS.md, "Relay groups": at 1,000 entries and 500 homes a
// second, p99 1.52 s with 64 groups, 1.75 s with 32, on a protocol model), for an origin's
// 2.5 sqrt(n) packets a home instead of 2 sqrt(n).
func relayGroups(n int) int {
	return int(math.Ceil(2 * math.Sqrt(float64(n))))
}

// relayFlushEvery is how long a relay of a group of members packs what it holds: at least
// least, longer in large groups (relayPacketRate).
func relayFlushEvery(least time.Duration, members int) time.Duration {
	return max(least, time.Duration(float64(members)/relayPacketRate*float64(time.Second)))
}

// Member is an alive member as spread is handed it: its name, its memberlist address
// (ip:port) and its tags.
type Member struct {
	Name string
	Addr string
	Tags map[string]string
}

// Plan is what this entry does with a batch when relays are on (NewPlan). It is shared and
// never changed once made.
type Plan struct {
	// Own is this entry's group but itself.
	Own []memberlist.Address
	// Others are the other groups, each with what picks a tenant's relay in it.
	Others []Group
	// Groups are every group's members, by group (this entry's included, itself too).
	Groups [][]memberlist.Address
}

// Group is a group's members, with their rendezvous keys (Relay).
type Group struct {
	Members []memberlist.Address
	keys    []uint64
}

// Relay is the index in Members of the relay of the tenant whose hash is tenant
// (stablehash.Of): the member with the highest rendezvous score.
func (g *Group) Relay(tenant uint64) int {
	best, at := uint64(0), 0
	for i, k := range g.keys {
		if s := stablehash.Mix(tenant ^ k); i == 0 || s > best {
			best, at = s, i
		}
	}
	return at
}

// Relays is tenant's relay in each other group.
func (p *Plan) Relays(tenant string) []memberlist.Address {
	t := stablehash.Of(tenant)
	out := make([]memberlist.Address, len(p.Others))
	for i := range p.Others {
		g := &p.Others[i]
		out[i] = g.Members[g.Relay(t)]
	}
	return out
}

// Rest is the members of relay's group but relay and self: where a batch goes when relay
// never acked it.
func (p *Plan) Rest(relay, self string) []memberlist.Address {
	var out []memberlist.Address
	for _, a := range p.Groups[groupOf(relay, len(p.Groups))] {
		if a.Name != relay && a.Name != self {
			out = append(out, a)
		}
	}
	return out
}

// NewPlan returns the relay plan for self among members (alive, self included), or nil
// when there can be no relays: insecure gossip, fewer than two members, or a member without
// the relay tag. Every entry that is handed the same members makes the same plan. Whether an
// origin's homes go through it is the relay rule's (relayRule).
func NewPlan(self string, members []Member, secure bool) *Plan {
	if !secure || len(members) < 2 {
		return nil
	}
	for _, m := range members {
		if m.Tags[RelayTag] != RelayVersion {
			return nil
		}
	}
	groups := relayGroups(len(members))
	mine := groupOf(self, groups)
	p := &Plan{Groups: make([][]memberlist.Address, groups)}
	others := make([]Group, groups)
	for i := range members {
		m := &members[i]
		g := groupOf(m.Name, groups)
		a := memberlist.Address{Addr: m.Addr, Name: m.Name}
		p.Groups[g] = append(p.Groups[g], a)
		switch {
		case m.Name == self:
		case g == mine:
			p.Own = append(p.Own, a)
		default:
			others[g].Members = append(others[g].Members, a)
			others[g].keys = append(others[g].keys, relayKey(m.Name))
		}
	}
	for g := range others {
		if g != mine && len(others[g].Members) > 0 {
			p.Others = append(p.Others, others[g])
		}
	}
	return p
}

// RelayStatus is how homes travel from this entry now (Gossip.Relays).
type RelayStatus struct {
	// On: this entry's homes go through relays (relayRule); off: straight to every member.
	On bool `json:"on"`
	// DirectBytes is what sending them straight to every member costs, bytes a second, by
	// the relay rule's estimate (relays above DirectLimit, direct again below half of it).
	DirectBytes float64 `json:"direct_bytes_per_s"`
	// Groups is the relay plan's count of groups (keyed, every member able to relay, whether or
	// not this entry's homes use it); Group is how many members this entry's group has, itself
	// included: it relays about 1/Group of the other groups' homes to them.
	Groups int `json:"groups,omitempty"`
	Group  int `json:"group_members,omitempty"`
}

// Status is self's part in this plan, the plan's entry (On and DirectBytes are the relay
// rule's: Spread.Relaying); empty for a nil plan.
func (p *Plan) Status() RelayStatus {
	if p == nil {
		return RelayStatus{}
	}
	return RelayStatus{Groups: len(p.Groups), Group: len(p.Own) + 1}
}

// relayKey is a member's rendezvous key (Group.Relay).
func relayKey(name string) uint64 {
	return stablehash.Mix(stablehash.String(stablehash.Offset, name) ^ 0x9E3779B97F4A7C15)
}

func groupOf(name string, groups int) int {
	return stablehash.Jump(stablehash.Of(name), groups)
}

// relayer is a relay's side: the batches to pass on to its group, decoded and their homes
// packed again, with their origins' versions, into full batches every relayFlushEvery (of
// RelayFlush, every, and its group's size), by its own goroutine (run), which owns the
// decoder and the encoder.
type relayer struct {
	in    chan []byte
	every time.Duration
	plan  func() *Plan
	dec   *wire.Decoder
	enc   *wire.Encoder
	acks  *ackedSender
	m     *metrics
	now   func() time.Time
}

// forward queues payload for the group; never blocks.
func (r *relayer) forward(payload []byte) {
	select {
	case r.in <- payload:
	default:
		r.m.eventsDropped.WithLabelValues("relay_queue_full").Inc()
	}
}

// wait is how long until the next flush, by the group's size now.
func (r *relayer) wait() time.Duration {
	members := 1
	if p := r.plan(); p != nil {
		members = len(p.Own) + 1
	}
	return relayFlushEvery(r.every, members)
}

func (r *relayer) run(ctx context.Context) {
	timer := time.NewTimer(r.wait())
	defer timer.Stop()
	var held []homes.Home
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-r.in:
			sender, b, err := r.dec.Decode(p)
			if err != nil {
				continue // counted where it was received: it was valid then
			}
			r.m.relayed.Inc()
			for _, w := range b.H {
				if len(held) == relayQueue {
					r.m.eventsDropped.WithLabelValues("relay_queue_full").Inc()
					break
				}
				held = append(held, w.Home(sender))
			}
		case <-timer.C:
			held = r.flush(r.now(), held)
			timer.Reset(r.wait())
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
	if plan != nil && len(plan.Own) > 0 {
		events, _, _, _, err := r.enc.Split(nil, held, len(held), false)
		if err == nil {
			for _, ev := range events {
				if r.acks.send(now, wire.KindAcked, ev.Payload, plan.Own, nil) == nil {
					r.m.relayBatches.Inc()
				}
			}
		}
	} // else relays went off, or a group of one: the origin's own sends did it
	clear(held)
	return held[:0]
}
