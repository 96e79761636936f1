package spread

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus/testutil"
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

// A tenant has one relay in every other group and the own group gets the batch straight, so
// every home reaches every group; every entry computes the same relays (whichever the origin,
// whatever the order of its member list); every member of a group relays about its share of the
// tenants; alone, without a key, or with a member that cannot relay (or relays by an older
// plan), there are none.
func TestPlanRelays(t *testing.T) {
	ms := fleet(100, true)
	origin := ms[7].Name
	p := NewPlan(origin, ms, true)
	if p == nil {
		t.Fatal("no plan for 100 members")
	}
	groups := 20 // ceil(2 sqrt(100))
	if len(p.Groups) != groups || len(p.Others) != groups-1 {
		t.Fatalf("%d groups, %d others, want %d and %d", len(p.Groups), len(p.Others), groups, groups-1)
	}
	tenants := make([]string, 5000)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("tenant-%d", i)
	}
	load := map[string]int{}
	for _, tn := range tenants {
		covered := map[int]bool{groupOf(origin, groups): true}
		for _, r := range p.Relays(tn) {
			g := groupOf(r.Name, groups)
			if covered[g] {
				t.Fatalf("%s: two relays in group %d, or one in the origin's own", tn, g)
			}
			covered[g] = true
			load[r.Name]++
		}
		if len(covered) != groups {
			t.Fatalf("%s reaches %d of %d groups", tn, len(covered), groups)
		}
	}
	// Balance: each member of another group relays about 1/(its group's size) of the tenants.
	for gi, g := range p.Groups {
		if gi == groupOf(origin, groups) {
			continue
		}
		fair := float64(len(tenants)) / float64(len(g))
		for _, a := range g {
			if n := float64(load[a.Name]); n < 0.7*fair || n > 1.3*fair {
				t.Errorf("%s relays %.0f of %d tenants, its fair share %.0f (group of %d)", a.Name, n, len(tenants), fair, len(g))
			}
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
	// (group, tenant): a relay's group gets one stream, not one per origin.
	relayOf := map[string]string{} // "group tenant" -> relay
	for _, tn := range tenants[:500] {
		for _, r := range p.Relays(tn) {
			relayOf[fmt.Sprint(groupOf(r.Name, groups), tn)] = r.Name
		}
	}
	shuffled := append(append([]Member(nil), ms[50:]...), ms[:50]...)
	for _, other := range []string{ms[0].Name, ms[50].Name, ms[99].Name} {
		q := NewPlan(other, shuffled, true)
		for _, tn := range tenants[:500] {
			for _, r := range q.Relays(tn) {
				if want, ok := relayOf[fmt.Sprint(groupOf(r.Name, groups), tn)]; ok && want != r.Name {
					t.Fatalf("%s picks %s for %s in group %d, %s picks %s", other, r.Name, tn,
						groupOf(r.Name, groups), origin, want)
				}
			}
		}
	}
	// The rest of a relay's group: the group but the relay and the origin.
	r := p.Relays("acme")[0]
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
	if NewPlan(origin, ms[:1], true) != nil {
		t.Error("a plan for one member")
	}
	if NewPlan(origin, ms[:2], true) == nil {
		t.Error("no plan for two members")
	}
	if NewPlan(origin, ms, false) != nil {
		t.Error("a plan without a key")
	}
	old := fleet(100, true)
	delete(old[3].Tags, RelayTag)
	if NewPlan(origin, old, true) != nil {
		t.Error("relays on with a member that cannot relay (a rolling deploy)")
	}
	old[3].Tags[RelayTag] = "3"
	if NewPlan(origin, old, true) != nil {
		t.Error("relays on with a member that picks relays by shard (version 3)")
	}
	// A later release's relay version: this entry cannot tell how it picks relays, so the
	// fleet stays on direct until every member runs one version (skipped, never a crash).
	old[3].Tags[RelayTag] = "5"
	if NewPlan(origin, old, true) != nil {
		t.Error("relays on with a member of a newer relay version (5)")
	}
}

// sendToRelays sends each home to its relay in every other group, once, each relay's homes
// in one batch, and keeps nothing for the next flush.
func TestSendToRelays(t *testing.T) {
	acks, w, m := newTestAcked(t, time.Hour)
	p := &publisher{m: m, log: zerolog.Nop(), enc: wire.NewEncoder("origin", wire.DefaultEventSizeLimit, time.Now),
		direct: &directSender{acks: acks, m: m}}
	ms := fleet(16, true)
	plan := NewPlan(ms[0].Name, ms, true)
	var hs []homes.Home
	want := map[string]int{} // relay -> homes
	for i := range 12 {
		h := homes.Home{Tenant: fmt.Sprintf("tenant-%d", i), Region: "eu", Version: homes.Version{HLC: uint64(i + 1), Origin: "origin"}}
		hs = append(hs, h)
		for _, r := range plan.Relays(h.Tenant) {
			want[r.Name]++
		}
	}
	p.sendToRelays(time.Now(), plan, hs)
	for name := range want {
		if got := w.count(name); got != 1 {
			t.Errorf("%s got %d packets, want 1 (its %d homes in one batch)", name, got, want[name])
		}
	}
	for _, m := range ms {
		if _, ok := want[m.Name]; !ok && w.count(m.Name) != 0 {
			t.Errorf("%s, no tenant's relay, got %d packets", m.Name, w.count(m.Name))
		}
	}
	if len(p.scratchR) != 0 {
		t.Errorf("%d relays' homes kept after the flush", len(p.scratchR))
	}
	p.sendToRelays(time.Now(), plan, hs[:1])
	for _, r := range plan.Relays(hs[0].Tenant) {
		if got := w.count(r.Name); got != 2 {
			t.Errorf("after a second flush of %s alone, its relay %s has %d packets, want 2", hs[0].Tenant, r.Name, got)
		}
	}
}

// assignments is every (origin, tenant) -> relay assignment of the members' plans, as
// "origin tenant relay" strings, over tenants: the origins whose names end in 0 (a tenth, by
// name, so that the same origins are looked at whoever joins or leaves), so that the test
// stays quick.
func assignments(t *testing.T, ms []Member, tenants []string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, m := range ms {
		if !strings.HasSuffix(m.Name, "0") {
			continue
		}
		p := NewPlan(m.Name, ms, true)
		if p == nil {
			t.Fatalf("no plan for %d members", len(ms))
		}
		for _, tn := range tenants {
			for _, r := range p.Relays(tn) {
				out[m.Name+" "+tn+" "+r.Name] = true
			}
		}
	}
	return out
}

// changed is the share of a's assignments that b does not have.
func changed(a, b map[string]bool) float64 {
	n := 0
	for k := range a {
		if !b[k] {
			n++
		}
	}
	return float64(n) / float64(len(a))
}

// One member joining or leaving a fleet of about 1,000 (the one leaving a relay) changes at
// most 5 % of the (origin, tenant) to relay assignments, whether or not it changes the count of
// groups (961 members make ceil(2 sqrt(961)) = 62 groups, 962 make 63: with hash mod groups
// nearly every member changed group there). A group more adds an assignment for each (origin, tenant),
// 1/groups of them, and a group fewer takes as many away, on top.
func TestGroupsStableUnderOneJoinOrLeave(t *testing.T) {
	tenants := make([]string, 64)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("tenant-%d", i)
	}
	groups := func(n int) float64 { return float64(relayGroups(n)) }
	for _, n := range []int{1000, 961, 962} { // 64, 62 and 63 groups
		ms := fleet(n+1, true)
		before := assignments(t, ms[:n], tenants)
		joined := assignments(t, ms, tenants)
		relay := NewPlan(ms[0].Name, ms[:n], true).Relays(tenants[0])[0].Name
		var rest []Member
		for _, m := range ms[:n] {
			if m.Name != relay {
				rest = append(rest, m)
			}
		}
		left := assignments(t, rest, tenants)
		// A group more (or fewer) across the change: its share of the assignments.
		more := func(from, to int) float64 {
			if groups(to) > groups(from) {
				return 1 / groups(to)
			}
			return 0
		}
		for _, c := range []struct {
			what       string
			share, max float64
		}{
			{"a join: assignments gone", changed(before, joined), 0.05 + more(n+1, n)},
			{"a join: assignments new", changed(joined, before), 0.05 + more(n, n+1)},
			{"a relay leaving: assignments gone", changed(before, left), 0.05 + more(n-1, n)},
			{"a relay leaving: assignments new", changed(left, before), 0.05 + more(n, n-1)},
		} {
			t.Logf("%d members, %s: %.2f %%", n, c.what, 100*c.share)
			if c.share > c.max {
				t.Errorf("%d members, %s: %.1f %% of the assignments, want at most %.1f %%", n, c.what, 100*c.share, 100*c.max)
			}
		}
	}
}

// The relay rule: homes go straight to every member while the fleet's new homes, so sent,
// cost each entry at most the limit a second (smoothed over relayWindow), through relays above
// it, and straight again only below half of it; a negative limit never relays.
func TestRelayRule(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	const tick = 50 * time.Millisecond
	now := t0
	// run sees rate homes a second, tick by tick, for span, and says whether the rule was on at
	// the end and whether it changed its mind in the span's second half.
	run := func(r *relayRule, rate float64, span time.Duration) (on, flapped bool) {
		var owed float64
		var last bool
		first := true
		for end := now.Add(span); now.Before(end); now = now.Add(tick) {
			owed += rate * tick.Seconds()
			r.seen.Add(int64(owed))
			owed -= float64(int64(owed))
			r.observe(now)
			on, _ = r.state()
			if end.Sub(now) < span/2 {
				if !first && on != last {
					flapped = true
				}
				first, last = false, on
			}
		}
		return on, flapped
	}
	rule := func(limit float64) *relayRule { return &relayRule{limit: limit, homeBytes: directHomeBytes * 3} }
	r := rule(20_000)
	if on, _ := run(r, 50, time.Minute); on { // 50 x 89 x 3 = 13.4 KB/s
		t.Fatal("50 homes a second (13.4 KB/s direct), limit 20 KB/s: relays on")
	}
	if _, est := r.state(); est < 12_500 || est > 14_200 {
		t.Errorf("estimate %.0f bytes a second, want about 13,350", est)
	}
	if on, _ := run(r, 500, 10*time.Second); !on {
		t.Fatal("500 homes a second (134 KB/s direct): relays off")
	}
	if on, flapped := run(r, 60, 2*time.Minute); !on || flapped { // 16 KB/s: between half and the limit
		t.Fatalf("60 homes a second after 500: relays on %v, flapped %v; want on, steady", on, flapped)
	}
	if on, _ := run(r, 20, time.Minute); on { // 5.3 KB/s
		t.Fatal("20 homes a second, under half the limit: relays still on")
	}
	// A burst shorter than the window moves the estimate by its share of it: 3 s at 150 a
	// second (40 KB/s) gives about 10 KB/s, under the limit.
	if on, _ := run(rule(20_000), 150, 3*time.Second); on {
		t.Error("a 3 s burst at 40 KB/s turned relays on")
	}
	if on, _ := run(rule(-1), 1e5, 10*time.Second); on {
		t.Error("relays on with a negative limit")
	}
}

// route is the plan while the relay rule says relays; otherwise straight to every member
// (nil), but for a flush that would cost this entry more than its own budget holds: that one
// goes through the plan, counted. Never through relays while there is no plan.
func TestRouteFollowsTheRule(t *testing.T) {
	ms := fleet(100, true)
	plan := NewPlan(ms[0].Name, ms, true)
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	peers := make([]memberlist.Address, 99)
	now := time.Unix(1_800_000_000, 0)
	d := &directSender{plan: func() *Plan { return plan }, acks: &ackedSender{}, m: m, copies: 3,
		peers: func() []memberlist.Address { return peers }, own: newOwnBudget(20_000, now)}
	batch := []wire.Event{{Payload: make([]byte, directHomeBytes-wire.Overhead)}} // 26.4 KB to 99 peers, 3 copies
	if d.route(now, batch) != nil {
		t.Fatal("a route through relays with the rule off and the budget full")
	}
	d.rule.on.Store(true)
	if d.route(now, batch) != plan {
		t.Fatal("no route through relays with the rule on")
	}
	d.rule.on.Store(false)
	// The budget holds 300 KB and refills 30 KB/s: 11 homes at once, then one a second.
	straight := 1 // the first, above
	for range 20 {
		if d.route(now, batch) == nil {
			straight++
		}
	}
	if straight != 11 {
		t.Errorf("%d of 21 flushes at once went straight, want 11 (300 KB of 26.4 KB each)", straight)
	}
	if n := testutil.ToFloat64(m.ownRelayed); n != 10 {
		t.Errorf("fenec_entry_gossip_relayed_over_budget_total %v, want 10", n)
	}
	if d.route(now.Add(time.Second), batch) != nil {
		t.Error("a second later, 30 KB refilled: the flush did not go straight")
	}
	d.plan = func() *Plan { return nil }
	if d.route(now, batch) != nil {
		t.Error("a route through relays with no plan")
	}
}
