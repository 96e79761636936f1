package homes

import (
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// t0 is the fake clock's start: a whole second, so expiries compare exactly.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

var testRegions = []string{"eu", "us", "ap"}

const (
	eu = 0
	us = 1
	ap = 2
)

// newTestTable returns a Table over testRegions with origin "e1", a fake clock, and cfg
// changed by edit (if not nil).
func newTestTable(tb testing.TB, edit func(*Config)) (*Table, *testutil.Clock) {
	tb.Helper()
	clk := testutil.NewClock(t0)
	cfg := Config{Regions: testRegions, Origin: "e1", Clock: clk}
	if edit != nil {
		edit(&cfg)
	}
	tbl, err := New(cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return tbl, clk
}

// drain returns the changes waiting on the feed, without blocking.
func drain(t *Table) []Change {
	var out []Change
	for {
		select {
		case c := <-t.Changes():
			out = append(out, c)
		default:
			return out
		}
	}
}

// ver is a Version with physical part ms (relative to t0) and logical part 0.
func ver(ms int64, origin string) Version {
	return Version{HLC: physical(t0.Add(time.Duration(ms) * time.Millisecond)), Origin: origin}
}

// snapshot returns the table's homes by tenant, with their source.
type held struct {
	Home
	Src Source
}

func snapshot(t *Table) map[string]held {
	out := map[string]held{}
	t.Range(func(h Home, src Source) bool {
		out[h.Tenant] = held{h, src}
		return true
	})
	return out
}

// checkInvariants stops every insertion and checks that the ring, the shards' indexes and
// the counters agree and hold at most capacity homes.
func checkInvariants(tb testing.TB, t *Table) {
	tb.Helper()
	t.ringMu.Lock()
	defer t.ringMu.Unlock()
	n, bySrc := 0, map[Source]int{}
	for i := range t.shards {
		s := &t.shards[i].shard
		s.mu.RLock()
		inUse := 0
		for _, e := range s.x.words {
			if e == 0 {
				continue
			}
			inUse++
			sl := t.ring.at(uint32(e) - 1)
			if !sl.live {
				tb.Errorf("index word %x names a free slot", e)
				continue
			}
			n++
			bySrc[sl.src]++
			if got, tag := t.locate(sl.key); got != s || tag != uint32(e>>32) {
				tb.Errorf("tenant %q in the wrong shard or under the wrong tag", sl.key)
			}
		}
		if inUse != s.x.n {
			tb.Errorf("shard %d: %d words in use, counted %d", i, inUse, s.x.n)
		}
		s.mu.RUnlock()
	}
	if n > t.capacity {
		tb.Errorf("%d homes held, capacity %d", n, t.capacity)
	}
	live := 0
	for seq := t.ring.head; seq < t.ring.tail; seq++ {
		sl := t.ring.at(t.ring.index(seq))
		if !sl.live {
			continue
		}
		live++
		if _, _, ok := t.Get(sl.key); !ok {
			tb.Errorf("ring tenant %q not held", sl.key)
		}
	}
	if live != n {
		tb.Errorf("ring holds %d tenants, shards %d", live, n)
	}
	if t.ring.len() > t.capacity {
		tb.Errorf("ring spans %d slots, capacity %d", t.ring.len(), t.capacity)
	}
	if c := t.Len(); c != n {
		tb.Errorf("Len %d, shards hold %d", c, n)
	}
	for _, src := range []Source{SourceLocal, SourceGossip} {
		if got := int(t.bySource[src].Load()); got != bySrc[src] {
			tb.Errorf("%v count %d, shards hold %d", src, got, bySrc[src])
		}
	}
}
