package spread

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/gossip/internal/wire"
	"github.com/fenec/fenec-entry/homes"
)

func fleet(n int, tagged bool) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{Name: fmt.Sprintf("entry-%03d", i), Addr: fmt.Sprintf("10.0.%d.%d:7946", i/256, i%256),
			Tags: map[string]string{}}
		if tagged {
			ms[i].Tags[RelayTag] = RelayVersion
		}
	}
	return ms
}

// Above RelayAbove, each shard has one relay in every other group and the own group gets the
// batch straight, so every home reaches every group; every entry computes the same relays
// (whichever the origin, whatever the order of its member list); below the threshold,
// without a key, or with a member that cannot relay (or relays by copies, version 1), relays
// are off.
func TestPlanRelays(t *testing.T) {
	const shards = 4
	ms := fleet(100, true)
	origin := ms[7].Name
	p := NewPlan(origin, ms, 64, shards, true)
	if p == nil {
		t.Fatal("no plan for 100 members above 64")
	}
	groups := 10 // ceil(sqrt(100))
	if len(p.Groups) != groups || len(p.Relays) != shards {
		t.Fatalf("%d groups and %d shards, want %d and %d", len(p.Groups), len(p.Relays), groups, shards)
	}
	for s, relays := range p.Relays {
		covered := map[int]bool{groupOf(origin, groups): true}
		for _, r := range relays {
			g := groupOf(r.Name, groups)
			if covered[g] {
				t.Errorf("shard %d: two relays in group %d, or one in the origin's own", s, g)
			}
			covered[g] = true
		}
		if len(covered) != groups {
			t.Errorf("shard %d reaches %d of %d groups", s, len(covered), groups)
		}
	}
	for _, m := range p.Own {
		if groupOf(m.Name, groups) != groupOf(origin, groups) || m.Name == origin {
			t.Errorf("%s in the origin's own list", m.Name)
		}
	}
	total := 0
	for _, g := range p.Groups {
		total += len(g)
	}
	if total != len(ms) {
		t.Errorf("the groups hold %d members, want %d", total, len(ms))
	}
	// Every other entry, with its members in another order, picks the same relay for a
	// (group, shard): a relay's group gets one stream per shard, not one per origin.
	relayOf := map[[2]int]string{}
	for s, relays := range p.Relays {
		for _, r := range relays {
			relayOf[[2]int{groupOf(r.Name, groups), s}] = r.Name
		}
	}
	shuffled := append(append([]Member(nil), ms[50:]...), ms[:50]...)
	for _, other := range []string{ms[0].Name, ms[50].Name, ms[99].Name} {
		q := NewPlan(other, shuffled, 64, shards, true)
		for s, relays := range q.Relays {
			for _, r := range relays {
				if want, ok := relayOf[[2]int{groupOf(r.Name, groups), s}]; ok && want != r.Name {
					t.Errorf("%s picks %s for shard %d of group %d, %s picks %s", other, r.Name, s,
						groupOf(r.Name, groups), origin, want)
				}
			}
		}
	}
	// A tenant's shard is the same everywhere.
	if q := NewPlan(ms[50].Name, shuffled, 64, shards, true); q.Shard("acme") != p.Shard("acme") {
		t.Error("two entries put acme in different shards")
	}
	// The rest of a relay's group: the group but the relay and the origin.
	r := p.Relays[0][0]
	rest := p.Rest(r.Name, origin)
	if len(rest) != len(p.Groups[groupOf(r.Name, groups)])-1 {
		t.Errorf("rest of %s's group: %d members, want its group's %d but one", r.Name, len(rest),
			len(p.Groups[groupOf(r.Name, groups)]))
	}
	for _, a := range rest {
		if a.Name == r.Name || a.Name == origin || groupOf(a.Name, groups) != groupOf(r.Name, groups) {
			t.Errorf("%s in the rest of %s's group", a.Name, r.Name)
		}
	}
	if NewPlan(origin, ms[:64], 64, shards, true) != nil {
		t.Error("relays on at 64 members, RelayAbove 64")
	}
	if NewPlan(origin, ms, 64, shards, false) != nil {
		t.Error("relays on without a key")
	}
	if NewPlan(origin, ms, -1, shards, true) != nil {
		t.Error("relays on with RelayAbove negative")
	}
	old := fleet(100, true)
	delete(old[3].Tags, RelayTag)
	if NewPlan(origin, old, 64, shards, true) != nil {
		t.Error("relays on with a member that cannot relay (a rolling deploy)")
	}
	old[3].Tags[RelayTag] = "1"
	if NewPlan(origin, old, 64, shards, true) != nil {
		t.Error("relays on with a member that relays by copies (version 1), not acks")
	}
}

// sendShards sends each shard's homes to that shard's relays, once: a shard with no relays
// (a group of one) keeps nothing for the next flush, which sends only its own homes.
func TestSendShardsKeepsNothing(t *testing.T) {
	acks, w, m := newTestAcked(t, time.Hour)
	p := &publisher{m: m, log: zerolog.Nop(), enc: wire.NewEncoder("origin", wire.DefaultEventSizeLimit, time.Now),
		direct: &directSender{acks: acks, m: m}}
	plan := &Plan{Relays: [][]memberlist.Address{nil, addrs("relay-1")}}
	// Two homes of each shard a flush.
	var flushes [2][]homes.Home
	count := map[[2]int]int{}
	for i := 0; len(flushes[0])+len(flushes[1]) < 8; i++ {
		h := homes.Home{Tenant: fmt.Sprintf("tenant-%d", i), Region: "eu", Version: homes.Version{HLC: uint64(i + 1), Origin: "origin"}}
		for f := range flushes {
			if k := [2]int{f, plan.Shard(h.Tenant)}; count[k] < 2 {
				count[k]++
				flushes[f] = append(flushes[f], h)
				break
			}
		}
	}
	first, second := flushes[0], flushes[1]
	p.sendShards(time.Now(), plan, first)
	sent1 := w.count("relay-1")
	p.sendShards(time.Now(), plan, second)
	for s, part := range p.scratchS {
		if len(part) != 0 {
			t.Errorf("shard %d keeps %d homes after the flush", s, len(part))
		}
	}
	if sent1 == 0 || w.count("relay-1") != 2*sent1 {
		t.Errorf("relay-1 got %d packets, then %d: want the same number from each flush", sent1, w.count("relay-1")-sent1)
	}
}
