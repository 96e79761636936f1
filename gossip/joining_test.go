package gossip

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// What a join costs the peer that serves it (bench/joiner, docs/BENCHMARKS.md): the joiner
// starts no repair and answers none while it fetches.

// Regression (bench/joiner, pinned: A's p99 2.5-3.4x its idle one while B joined): the peer
// that saw the joiner come alive repaired with it, computing a digest of its million homes
// and pulling buckets of homes it held. An entry fetching its table from empty refuses
// digests and pulls; a warm one answers them.
func TestRepairRefusedByBootstrappingPeer(t *testing.T) {
	ms := newMembers("a", "b", "c")
	a, b, c := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms), newSyncNode(t, "c", ms)
	fill(a.table, 0, 2000, ver(-time.Minute, 0, "a"))
	fill(c.table, 0, 10, ver(-time.Minute, 0, "a")) // warm: restored from its state file

	endB := b.sync.beginBootstrap()
	endC := c.sync.beginBootstrap()
	_, err := a.sync.Repair(context.Background(), b.peer())
	if se := (*StatusError)(nil); !errors.As(err, &se) || se.Status != http.StatusServiceUnavailable || se.Code != "bootstrapping" {
		t.Fatalf("Repair with a bootstrapping peer: %v, want 503 bootstrapping", err)
	}
	if got := b.served("digest", "bootstrapping"); got != 1 {
		t.Errorf("b refused %d digests, want 1", got)
	}
	if got := testutil.ToFloat64(a.sync.m.rounds.WithLabelValues("peer_bootstrapping")); got != 1 {
		t.Errorf("a's peer_bootstrapping rounds %v, want 1", got)
	}
	body := make([]byte, digestBuckets/8)
	_, _, err = a.sync.call(context.Background(), b.peer(), http.MethodPost, pathPull,
		mustMarshalPull(t, body))
	if se := (*StatusError)(nil); !errors.As(err, &se) || se.Code != "bootstrapping" {
		t.Errorf("pull from a bootstrapping peer: %v, want 503 bootstrapping", err)
	}
	if r, err := a.sync.Repair(context.Background(), c.peer()); err != nil || r.Buckets == 0 {
		t.Errorf("Repair with a warm bootstrapping peer: %+v, %v; want a pull", r, err)
	}

	endB()
	endB() // once only
	endC()
	if r, err := a.sync.Repair(context.Background(), b.peer()); err != nil || r.Buckets == 0 {
		t.Errorf("Repair once b's fetch ended: %+v, %v; want a pull", r, err)
	}
}

func mustMarshalPull(t *testing.T, buckets []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := newStreamWriter(&buf, newStreamMAC(nil, "", ""), nil).enc
	if err := enc.Encode(&pullRequest{Version: wireVersion, Buckets: buckets}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// An entry fetching its table starts no repair round of its own.
func TestNoRepairRoundWhileBootstrapping(t *testing.T) {
	ms := newMembers("a", "b")
	a, b := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms)
	fill(b.table, 0, 100, ver(-time.Minute, 0, "b"))
	a.peers = []Peer{b.peer()}

	end := a.sync.beginBootstrap()
	a.sync.repairRound(context.Background())
	if got := b.served("digest", "ok"); got != 0 {
		t.Errorf("b served %d digests while a bootstrapped", got)
	}
	if got := testutil.ToFloat64(a.sync.m.rounds.WithLabelValues("bootstrapping")); got != 1 {
		t.Errorf("a's bootstrapping rounds %v, want 1", got)
	}
	end()
	a.sync.repairRound(context.Background())
	if got := testutil.ToFloat64(a.sync.m.rounds.WithLabelValues("pulled")); got != 1 {
		t.Errorf("a's pulled rounds after its fetch %v, want 1", got)
	}
}

// Sync.Bootstrap holds the mark for as long as it fetches, and only then.
func TestSyncBootstrapPausesRepair(t *testing.T) {
	ms := newMembers("a", "b")
	a, b := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms)
	fill(a.table, 0, 100, ver(-time.Minute, 0, "a"))
	b.peers = []Peer{a.peer()}
	var paused, partial bool
	a.wrap(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.URL.Path == pathSnapshot {
			paused, partial = b.sync.repairPaused(), b.sync.partial.Load()
		}
		next.ServeHTTP(w, r)
	})
	if err := b.sync.Bootstrap(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !paused || !partial {
		t.Errorf("during the fetch: repair paused %v, digests refused %v; want both", paused, partial)
	}
	if b.sync.repairPaused() || b.sync.partial.Load() {
		t.Error("still paused after Bootstrap returned")
	}
}

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
