package homes

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrent runs every method at once (meant for -race) over a small table that evicts
// all the time, while a checker watches the bound, and then checks the table's invariants.
func TestConcurrent(t *testing.T) {
	const (
		capacity = 64
		workers  = 8
		ops      = 3000
	)
	tbl, clk := newTestTable(t, func(c *Config) { c.Capacity = capacity; c.FeedSize = 16 })

	var stop atomic.Bool
	var bg sync.WaitGroup
	var over atomic.Int64
	bg.Go(func() { // the bound holds at every instant, not only at the end
		for !stop.Load() {
			if n := tbl.Len(); n > capacity {
				over.Store(int64(n))
			}
			if st := tbl.Stats(); st.Homes > capacity {
				over.Store(int64(st.Homes))
			}
		}
	})
	bg.Go(func() { // a subscriber that reads the feed slowly
		for !stop.Load() {
			select {
			case <-tbl.Changes():
			default:
			}
		}
	})
	bg.Go(func() {
		for !stop.Load() {
			clk.Advance(time.Millisecond)
		}
	})

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range ops {
				tenant := fmt.Sprint("t", rng.IntN(4*capacity)) // shared between workers
				region := rng.IntN(len(testRegions))
				switch rng.IntN(12) {
				case 0, 1, 2:
					tbl.Learn(tenant, region)
				case 3, 4:
					tbl.Apply(Home{tenant, testRegions[region], ver(int64(rng.IntN(1000)), fmt.Sprint("e", w))})
				case 5, 6, 7:
					if r, ok := tbl.Lookup(tenant); ok && (r < 0 || r >= len(testRegions)) {
						t.Errorf("Lookup(%s) = %d", tenant, r)
					}
				case 8:
					tbl.Mark(region)
					tbl.Marked(region, Planned(rng.IntN(2)))
				case 9:
					tbl.Clear(region)
					tbl.ApplyMark(failure(testRegions[region], int64(i), "e9"))
				case 10:
					if i%50 == 0 {
						n := 0
						tbl.Range(func(Home, Source) bool { n++; return true })
						tbl.Marks()
					}
				case 11:
					if h, src, ok := tbl.Get(tenant); ok && (h.Tenant != tenant || src == 0) {
						t.Errorf("Get(%s) = %+v, %v", tenant, h, src)
					}
				}
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	bg.Wait()

	if n := over.Load(); n != 0 {
		t.Errorf("the table held %d homes at one point, capacity %d", n, capacity)
	}
	checkInvariants(t, tbl)
	if tbl.Len() != capacity {
		t.Errorf("Len %d, want %d after many more insertions", tbl.Len(), capacity)
	}
	st := tbl.Stats()
	if st.Local+st.Gossip != st.Homes {
		t.Errorf("stats %+v: local and gossip do not add up", st)
	}
}

// TestConcurrentInsertBound is the bound alone: many goroutines insert distinct tenants into
// a full table; the checker looks for one instant above capacity.
func TestConcurrentInsertBound(t *testing.T) {
	const capacity = 16
	tbl, _ := newTestTable(t, func(c *Config) { c.Capacity = capacity })
	var stop atomic.Bool
	var maxSeen atomic.Int64
	var bg sync.WaitGroup
	bg.Go(func() {
		for !stop.Load() {
			if n := int64(tbl.Len()); n > maxSeen.Load() {
				maxSeen.Store(n)
			}
		}
	})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				tbl.Learn(fmt.Sprintf("w%d-%d", w, i), i%3)
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	bg.Wait()
	if n := maxSeen.Load(); n > capacity {
		t.Errorf("Len reached %d, capacity %d", n, capacity)
	}
	checkInvariants(t, tbl)
	if got, want := tbl.Stats().Evicted, uint64(8*2000-capacity); got != want {
		t.Errorf("Evicted %d, want %d", got, want)
	}
}
