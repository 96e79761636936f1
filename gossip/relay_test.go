package gossip

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fenec/fenec-entry/internal/testutil"
)

func fleet(n int, tagged bool) []serf.Member {
	ms := make([]serf.Member, n)
	for i := range ms {
		ms[i] = serf.Member{Name: fmt.Sprintf("entry-%03d", i), Status: serf.StatusAlive, Port: 7946,
			Tags: map[string]string{}}
		if tagged {
			ms[i].Tags[relayTag] = "1"
		}
	}
	return ms
}

// Above RelayAbove, every other group gets one relay and the own group the rest, so a batch
// reaches every group; every entry computes the same relay for an origin; below the
// threshold, without a key, or with a member that cannot relay, relays are off.
func TestPlanRelays(t *testing.T) {
	ms := fleet(100, true)
	origin := ms[7].Name
	p := planRelays(origin, ms, 64, true)
	if p == nil {
		t.Fatal("no plan for 100 members above 64")
	}
	groups := 10 // ceil(sqrt(100))
	covered := map[int]bool{groupOf(origin, groups): true}
	for _, r := range p.relays {
		g := groupOf(r.Name, groups)
		if covered[g] {
			t.Errorf("two relays in group %d, or one in the origin's own", g)
		}
		covered[g] = true
	}
	if len(covered) != groups {
		t.Errorf("the batch reaches %d of %d groups", len(covered), groups)
	}
	for _, m := range p.own {
		if groupOf(m.Name, groups) != groupOf(origin, groups) || m.Name == origin {
			t.Errorf("%s in the origin's own list", m.Name)
		}
	}
	if sent := len(p.own) + len(p.relays); sent > 2*groups+10 {
		t.Errorf("the origin sends %d packets a batch, want about 2 sqrt(N)", sent)
	}
	// Another entry's view of the same members picks the same relays for this origin.
	shuffled := append(append([]serf.Member(nil), ms[50:]...), ms[:50]...)
	q := planRelays(origin, shuffled, 64, true)
	want := map[string]bool{}
	for _, r := range p.relays {
		want[r.Name] = true
	}
	for _, r := range q.relays {
		if !want[r.Name] {
			t.Errorf("relay %s chosen from another order of the members", r.Name)
		}
	}
	if planRelays(origin, ms[:64], 64, true) != nil {
		t.Error("relays on at 64 members, RelayAbove 64")
	}
	if planRelays(origin, ms, 64, false) != nil {
		t.Error("relays on without a key")
	}
	if planRelays(origin, ms, -1, true) != nil {
		t.Error("relays on with RelayAbove negative")
	}
	old := fleet(100, true)
	delete(old[3].Tags, relayTag)
	if planRelays(origin, old, 64, true) != nil {
		t.Error("relays on with a member that cannot relay (a rolling deploy)")
	}
}

// A relay's kind is sealed: a relay packet changed into a plain direct one (or back) opens
// under no key.
func TestRelayKindIsSealed(t *testing.T) {
	c := newDirectCodec(keysOf(clusterKey), "lbl")
	pkt, err := c.sealAs(directRelay, []byte("\x01\x01apayload"))
	if err != nil {
		t.Fatal(err)
	}
	if _, kind, err := c.openKind(pkt); err != nil || kind != directRelay {
		t.Fatalf("open: kind %d, %v", kind, err)
	}
	pkt[1] = directSealed
	if _, _, err := c.openKind(pkt); err == nil {
		t.Error("a relay packet opened as a plain direct one")
	}
}

// A cluster above RelayAbove: homes learned at one entry reach every other through relays,
// with the origin's versions, and the origin sends fewer packets a batch than one to each
// member.
func TestHomesTravelThroughRelays(t *testing.T) {
	const n = 10
	nodes := startCluster(t, n, func(c *Config) { c.RelayAbove = 4; c.RelayFlush = 50 * time.Millisecond })
	origin := nodes[0]
	testutil.Eventually(t, 5*time.Second, "relays on at the origin", func() bool { return origin.g.relayPlan() != nil })
	for i := range 40 {
		origin.table.Learn(fmt.Sprintf("tenant-%d", i), i%len(testRegions))
	}
	origin.flush(t)
	testutil.Eventually(t, 10*time.Second, "every home at every entry", func() bool {
		for _, nd := range nodes[1:] {
			for i := range 40 {
				if !nd.has(fmt.Sprintf("tenant-%d", i), testRegions[i%len(testRegions)]) {
					return false
				}
			}
		}
		return true
	})
	relayed, packed := 0.0, 0.0
	for _, nd := range nodes {
		relayed += promtest.ToFloat64(nd.g.m.relayed)
		packed += promtest.ToFloat64(nd.g.m.relayBatches)
	}
	if relayed == 0 || packed == 0 {
		t.Errorf("relays took %v batches and sent %v: the homes did not go through relays", relayed, packed)
	}
	// Versions travel through relays unchanged: the origin's, not the relay's.
	for _, nd := range nodes[1:] {
		if h, _, _ := nd.table.Get("tenant-3"); h.Version.Origin != origin.name {
			t.Errorf("%s holds tenant-3 from %q, want the origin %q", nd.name, h.Version.Origin, origin.name)
		}
	}
	batches := promtest.ToFloat64(origin.g.m.directBatches)
	packets := promtest.ToFloat64(origin.g.m.directPackets)
	if per := packets / batches / float64(origin.g.cfg.DirectCopies); per >= n-1 {
		t.Errorf("the origin sent %.1f packets a batch, %d members: no fewer than direct", per, n)
	}
}
