package gossip

import (
	"reflect"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/gossip/internal/tablesync"
)

func TestRejoined(t *testing.T) {
	pa, pb := Peer{Name: "a"}, Peer{Name: "b"}
	rows := []struct {
		name   string
		known  map[string]bool
		now    []Peer
		paused bool
		want   []Peer
	}{
		{"first look", nil, []Peer{pa}, false, nil},
		{"no one new", map[string]bool{"a": true}, []Peer{pa}, false, nil},
		{"b came alive", map[string]bool{"a": true}, []Peer{pa, pb}, false, []Peer{pb}},
		{"b came back after the first look saw none", map[string]bool{}, []Peer{pb}, false, []Peer{pb}},
		{"b came alive while this entry bootstraps", map[string]bool{"a": true}, []Peer{pa, pb}, true, nil},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			alive, back := rejoined(r.known, r.now, r.paused)
			if !reflect.DeepEqual(back, r.want) {
				t.Errorf("repair with %v, want %v", back, r.want)
			}
			if len(alive) != len(r.now) {
				t.Errorf("alive %v, want %v", alive, r.now)
			}
		})
	}
	// Once a bootstrap ends, the peers that came meanwhile are known: no repair with them.
	alive, _ := rejoined(map[string]bool{"a": true}, []Peer{pa, pb}, true)
	if _, back := rejoined(alive, []Peer{pa, pb}, false); back != nil {
		t.Errorf("after the bootstrap: repair with %v, want none", back)
	}
}

// TestRepairPlanCatchesUpAfterAFetch: once a fetch of this entry's table ends, one round is
// due a RepairSettle later, with another peer than the one fetched from, and only one.
func TestRepairPlanCatchesUpAfterAFetch(t *testing.T) {
	pa, pb, pc := Peer{Name: "a"}, Peer{Name: "b"}, Peer{Name: "c"}
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	p := repairPlan{settle: 2 * time.Second}

	if back := p.look([]Peer{pa, pb, pc}, true, nil); back != nil {
		t.Fatalf("while fetching: repair with %v", back)
	}
	if _, ok := p.catchUpDue(); ok {
		t.Fatal("a round is due before any fetch ended")
	}
	f := &tablesync.Fetched{At: at, From: "b"}
	if back := p.look([]Peer{pa, pb, pc}, false, f); back != nil {
		t.Fatalf("after the fetch: repair with %v, want none (the peers are known)", back)
	}
	due, ok := p.catchUpDue()
	if !ok || !due.Equal(at.Add(2*time.Second)) {
		t.Fatalf("round due %v %v, want %v", due, ok, at.Add(2*time.Second))
	}
	if _, ok := p.catchUpDue(); ok {
		t.Error("the same round given twice")
	}
	for range 50 { // a random peer: never the one fetched from while another is there
		q := p
		peer, ok := q.catchUp([]Peer{pa, pb, pc})
		if !ok || peer.Name == "b" {
			t.Fatalf("round with %v %v, want a or c", peer, ok)
		}
	}
	if peer, ok := p.catchUp([]Peer{pb}); !ok || peer.Name != "b" {
		t.Errorf("with only the fetched-from peer: %v %v, want b", peer, ok)
	}
	if _, ok := p.catchUp([]Peer{pa}); ok {
		t.Error("a second round for one fetch")
	}
	// The same fetch seen again plans nothing; a new one plans its own round.
	p.look([]Peer{pa, pb, pc}, false, f)
	if _, ok := p.catchUpDue(); ok {
		t.Error("a round planned again for the same fetch")
	}
	g := &tablesync.Fetched{At: at.Add(time.Minute)}
	p.look([]Peer{pa, pb, pc}, false, g)
	if due, ok := p.catchUpDue(); !ok || !due.Equal(g.At.Add(2*time.Second)) {
		t.Errorf("a second fetch: round due %v %v", due, ok)
	}
}
