package gossip

import "testing"

// A host name in --gossip-bind is resolved, so memberlist binds that address only (given a
// name, memberlist would bind every interface).
func TestBindHostNameResolved(t *testing.T) {
	g := &Gossip{cfg: Config{NodeName: "n", BindAddr: "localhost:0"}.withDefaults()}
	mc, err := g.memberlistConfigLocked()
	if err != nil {
		t.Fatal(err)
	}
	if mc.BindAddr != "127.0.0.1" && mc.BindAddr != "::1" {
		t.Errorf("BindAddr = %q, want localhost's address", mc.BindAddr)
	}
}
