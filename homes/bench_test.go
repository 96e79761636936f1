package homes

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

const benchHomes = 50000 // the default capacity, full

// benchTable returns a full table on the system clock and its tenants, as fresh strings
// (not the stored ones), the way the request path holds them.
func benchTable(b *testing.B) (*Table, []string) {
	b.Helper()
	tbl, err := New(Config{Regions: testRegions, Origin: "e1"})
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, benchHomes)
	for i := range names {
		tbl.Learn(fmt.Sprintf("tenant-%06d", i), i%3)
		names[i] = fmt.Sprintf("tenant-%06d", i)
	}
	return tbl, names
}

func BenchmarkLookup(b *testing.B) {
	tbl, names := benchTable(b)
	misses := make([]string, len(names))
	for i := range misses {
		misses[i] = fmt.Sprintf("nobody-%06d", i)
	}
	for name, keys := range map[string][]string{"hit": names, "miss": misses} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				tbl.Lookup(keys[i])
				if i++; i == len(keys) {
					i = 0
				}
			}
		})
	}
}

func BenchmarkLookupParallel(b *testing.B) {
	tbl, names := benchTable(b)
	var seq atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seq.Add(7919)) % len(names)
		for pb.Next() {
			tbl.Lookup(names[i])
			if i++; i == len(names) {
				i = 0
			}
		}
	})
}

// BenchmarkLookupParallelLearn is lookups while one request in 16 learns its (known) home,
// as the request path does.
func BenchmarkLookupParallelLearn(b *testing.B) {
	tbl, names := benchTable(b)
	var seq atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seq.Add(7919)) % len(names)
		for pb.Next() {
			r, _ := tbl.Lookup(names[i])
			if i&15 == 0 {
				tbl.Learn(names[i], r)
			}
			if i++; i == len(names) {
				i = 0
			}
		}
	})
}

func BenchmarkLearnSame(b *testing.B) {
	tbl, names := benchTable(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tbl.Learn(names[i], i%3)
		if i++; i == len(names) {
			i = 0
		}
	}
}

// BenchmarkLearnNew is a new tenant into a full table: a clone, an eviction, a feed send.
func BenchmarkLearnNew(b *testing.B) {
	tbl, _ := benchTable(b)
	go func() {
		for range tbl.Changes() {
		}
	}()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tbl.Learn(fmt.Sprint("new-", i), i%3) // fmt.Sprint's allocation is counted too
		i++
	}
}

func BenchmarkMarked(b *testing.B) {
	tbl, _ := benchTable(b)
	tbl.Mark(us)
	for name, c := range map[string]struct {
		region int
		req    Planned
	}{"unmarked": {eu, Lenient}, "failing, lenient": {us, Lenient}, "failing, strict": {us, Strict}} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tbl.Marked(c.region, c.req)
			}
		})
	}
}

// BenchmarkMarkedSet is every region's mark in one call (3 regions, one failing), for a read.
func BenchmarkMarkedSet(b *testing.B) {
	tbl, _ := benchTable(b)
	tbl.Mark(us)
	b.ReportAllocs()
	for b.Loop() {
		tbl.MarkedSet(Lenient)
	}
}

func BenchmarkClearUnmarked(b *testing.B) {
	tbl, _ := benchTable(b)
	b.ReportAllocs()
	for b.Loop() {
		tbl.Clear(eu)
	}
}

func BenchmarkClearUnmarkedParallel(b *testing.B) {
	tbl, _ := benchTable(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tbl.Clear(eu)
		}
	})
}

// BenchmarkMarkRepeated is every request failing on the same region: the lock, no feed.
func BenchmarkMarkRepeated(b *testing.B) {
	tbl, _ := benchTable(b)
	drain(tbl)
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		tbl.Mark(us)
	}
	// About one change per second of marking, however many marks.
	if sent, limit := len(drain(tbl)), int(time.Since(start)/time.Second)+2; sent > limit {
		b.Errorf("%d changes for %d marks in %v: the feed is flooded", sent, b.N, time.Since(start))
	}
}

func BenchmarkRange(b *testing.B) {
	tbl, _ := benchTable(b)
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		tbl.Range(func(Home, Source) bool { n++; return true })
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchHomes, "ns/home")
}
