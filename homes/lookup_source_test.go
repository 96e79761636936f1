package homes

import "testing"

func TestLookupSource(t *testing.T) {
	tb, _ := newTestTable(t, nil)
	if _, _, ok := tb.LookupSource("acme"); ok {
		t.Fatal("empty table found acme")
	}
	tb.Learn("acme", 1)
	if reg, src, ok := tb.LookupSource("acme"); !ok || reg != 1 || src != SourceLocal {
		t.Errorf("after Learn: %d %v %v, want 1 local", reg, src, ok)
	}
	h, _, _ := tb.Get("acme")
	h.Tenant, h.Version.HLC = "globex", h.Version.HLC+1
	tb.Apply(h)
	if reg, src, ok := tb.LookupSource("globex"); !ok || reg != 1 || src != SourceGossip {
		t.Errorf("after Apply: %d %v %v, want 1 gossip", reg, src, ok)
	}
	if n := testing.AllocsPerRun(100, func() { tb.LookupSource("acme") }); n != 0 {
		t.Errorf("LookupSource allocates %v", n)
	}
}
