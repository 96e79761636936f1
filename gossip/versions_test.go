package gossip

import (
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/fenec/fenec-entry/gossip/internal/wire"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/testutil"
)

// TestNewerWireVersionsCountedAndSkipped: what a later release may send an entry on the gossip
// port, in a version this one does not know, is counted and skipped, and the entry goes on
// applying what it knows: a direct packet of a newer kind (byte 1 after the magic, sealed
// with the cluster's key), an event payload of a newer format (byte 0), and a serf user
// event of another name.
func TestNewerWireVersionsCountedAndSkipped(t *testing.T) {
	nodes := startCluster(t, 2)
	a, b := nodes[0], nodes[1]
	ver := homes.Version{HLC: uint64(time.Now().UnixMilli()) << 16, Origin: "b"}
	payload := func(tenant string) []byte {
		p, err := wire.NewEncoder("b", wire.DefaultEventSizeLimit, nil).Encode(nil, []homes.Home{{Tenant: tenant, Region: "ap", Version: ver}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	codec := wire.NewCodec(keysOf(clusterKey), DefaultConfig().Label)
	to := memberlist.Address{Addr: a.g.Addr(), Name: "a"}

	// A direct packet of the next kind after the last this build knows (KindAck).
	newer, err := codec.SealAs(wire.KindAck+1, payload("newer-kind"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.g.writeDirect(newer, to); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 3*time.Second, "a counted the direct packet of a newer kind invalid", func() bool {
		return a.metric(t, "fenec_entry_gossip_direct_packets_received_total", "result", "invalid") == 1
	})

	// An event payload of the next format after the last this build writes (DEFLATE, 2).
	p := payload("newer-format")
	p[0] = 3
	if err := b.g.sendEvent(p); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 3*time.Second, "a counted the event of a newer format invalid", func() bool {
		return a.metric(t, "fenec_entry_gossip_events_invalid_total") == 1
	})

	// A user event under another name (a later release's kind of event).
	s := b.g.serfOrNil()
	if s == nil {
		t.Fatal("b has no serf")
	}
	if err := s.UserEvent(wire.EventName+"-v3", payload("other-name"), false); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 3*time.Second, "a counted the user event of another name", func() bool {
		return a.metric(t, "fenec_entry_gossip_events_other_total") == 1
	})

	// None of them changed a's table; what this build knows still applies, both ways.
	for _, tn := range []string{"newer-kind", "newer-format", "other-name"} {
		if _, ok := a.table.Lookup(tn); ok {
			t.Errorf("a applied %s's home", tn)
		}
	}
	pkt, err := codec.Seal(payload("known"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.g.writeDirect(pkt, to); err != nil {
		t.Fatal(err)
	}
	if err := b.g.sendEvent(payload("known-event")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 3*time.Second, "a applied the known packet and event after the newer ones", func() bool {
		return a.has("known", "ap") && a.has("known-event", "ap")
	})
	if got := a.metric(t, "fenec_entry_gossip_events_other_total"); got != 1 {
		t.Errorf("events of another name: %v, want 1 (fenec-homes counted as other?)", got)
	}
}
