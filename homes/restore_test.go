package homes

import (
	"testing"
)

// TestRestoreKeepsVersionAndSource: a restored home keeps the Version and the Source it had,
// goes on the feed never, and a home learned afterwards is newer than every restored one.
func TestRestoreKeepsVersionAndSource(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	future := ver(60_000, "e1") // a minute ahead of the fake clock: the clock must follow
	if !tbl.Restore(Home{Tenant: "acme", Region: "eu", Version: future}, SourceLocal) {
		t.Fatal("Restore of a new tenant returned false")
	}
	if !tbl.Restore(Home{Tenant: "globex", Region: "us", Version: ver(5, "e2")}, SourceGossip) {
		t.Fatal("Restore of a second tenant returned false")
	}
	for _, tt := range []struct {
		tenant, region string
		v              Version
		src            Source
	}{{"acme", "eu", future, SourceLocal}, {"globex", "us", ver(5, "e2"), SourceGossip}} {
		h, src, ok := tbl.Get(tt.tenant)
		if !ok || h.Region != tt.region || h.Version != tt.v || src != tt.src {
			t.Errorf("Get(%s) = %+v %v %v, want %s at %v, %v", tt.tenant, h, src, ok, tt.region, tt.v, tt.src)
		}
	}
	if st := tbl.Stats(); st.Local != 1 || st.Gossip != 1 {
		t.Errorf("Stats local %d gossip %d, want 1 and 1", st.Local, st.Gossip)
	}
	if c := drain(tbl); len(c) != 0 {
		t.Errorf("Restore sent %d changes on the feed, want none", len(c))
	}
	tbl.Learn("initech", ap)
	h, _, _ := tbl.Get("initech")
	if !future.Less(h.Version) {
		t.Errorf("a home learned after the restore has version %v, not newer than the restored %v", h.Version, future)
	}
	checkInvariants(t, tbl)
}

// TestRestoreNewerRule: Restore goes through the rule Apply does; a peer's newer home then
// replaces a restored one, an older one does not.
func TestRestoreNewerRule(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	tbl.Restore(Home{Tenant: "acme", Region: "eu", Version: ver(10, "e1")}, SourceLocal)
	if tbl.Restore(Home{Tenant: "acme", Region: "us", Version: ver(5, "e1")}, SourceLocal) {
		t.Error("an older restored home replaced a newer one")
	}
	if tbl.Apply(Home{Tenant: "acme", Region: "ap", Version: ver(9, "e2")}) {
		t.Error("a peer's older home replaced a restored one")
	}
	if h, src, _ := tbl.Get("acme"); h.Region != "eu" || src != SourceLocal {
		t.Errorf("acme = %s %v, want the restored eu, local", h.Region, src)
	}
	if !tbl.Apply(Home{Tenant: "acme", Region: "ap", Version: ver(11, "e2")}) {
		t.Error("a peer's newer home did not replace a restored one")
	}
	if h, src, _ := tbl.Get("acme"); h.Region != "ap" || src != SourceGossip {
		t.Errorf("acme = %s %v, want the peer's ap, gossip", h.Region, src)
	}
	checkInvariants(t, tbl)
}

// TestRestoreOrderAndUnknownRegion: homes restored oldest first are evicted first, as before
// the restart; an unknown region is skipped and counted.
func TestRestoreOrderAndUnknownRegion(t *testing.T) {
	tbl, _ := newTestTable(t, func(c *Config) { c.Capacity = 3 })
	for i, tenant := range []string{"a", "b", "c"} {
		tbl.Restore(Home{Tenant: tenant, Region: "eu", Version: ver(int64(i), "e1")}, SourceLocal)
	}
	if tbl.Restore(Home{Tenant: "d", Region: "mars", Version: ver(4, "e1")}, SourceLocal) {
		t.Error("a home in an unknown region was restored")
	}
	if got := tbl.Stats().UnknownRegion; got != 1 {
		t.Errorf("UnknownRegion = %d, want 1", got)
	}
	var order []string
	tbl.Range(func(h Home, _ Source) bool { order = append(order, h.Tenant); return true })
	if len(order) != 3 || order[0] != "a" || order[2] != "c" {
		t.Errorf("Range after restore = %v, want [a b c]", order)
	}
	tbl.Learn("e", us) // full: the oldest restored goes first
	if _, _, ok := tbl.Get("a"); ok {
		t.Error("the oldest restored home was not the first evicted")
	}
	checkInvariants(t, tbl)
}

// TestGeneration moves with every change to the homes held and with nothing else.
func TestGeneration(t *testing.T) {
	tbl, _ := newTestTable(t, func(c *Config) { c.Capacity = 2 })
	g := tbl.Generation()
	step := func(what string, changes bool, fn func()) {
		t.Helper()
		fn()
		now := tbl.Generation()
		if moved := now != g; moved != changes {
			t.Errorf("%s: Generation moved %v, want %v", what, moved, changes)
		}
		g = now
	}
	step("Learn new", true, func() { tbl.Learn("a", eu) })
	step("Learn same", false, func() { tbl.Learn("a", eu) })
	step("Lookup", false, func() { tbl.Lookup("a") })
	step("Learn moved", true, func() { tbl.Learn("a", us) })
	step("Apply older", false, func() { tbl.Apply(Home{Tenant: "a", Region: "ap", Version: ver(-1000, "e2")}) })
	step("Apply new", true, func() { tbl.Apply(Home{Tenant: "b", Region: "ap", Version: ver(1, "e2")}) })
	step("Restore evicting", true, func() { tbl.Restore(Home{Tenant: "c", Region: "ap", Version: ver(2, "e2")}, SourceGossip) })
	step("Mark", false, func() { tbl.Mark(eu) })
}
