package homes

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkTableMemory reports what a full table costs per home beyond the tenant's name (the
// heap after a GC, less the table when empty and the names' own bytes), with 19-byte names as
// "B/home" is the number to hold to 64 (docs/BENCHMARKS.md). One iteration fills a table of n.
//
//	go test -run '^$' -bench TableMemory -benchtime 1x ./homes
func BenchmarkTableMemory(b *testing.B) {
	for _, n := range []int{50_000, 1_000_000, 5_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				perHome, learnNS := tableMemory(b, n)
				b.ReportMetric(perHome, "B/home")
				b.ReportMetric(learnNS, "ns/learn")
			}
		})
	}
}

// tableMemory fills a table of capacity n with n homes and returns the heap bytes per home
// beyond the name, and the mean time of a Learn of a new tenant.
func tableMemory(b *testing.B, n int) (perHome, learnNS float64) {
	b.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("tenant-%012d", i) // 19 bytes
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	tbl, err := New(Config{Regions: testRegions, Origin: "entry-fra-1", Capacity: n, FeedSize: 1})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for i, name := range names {
		tbl.Learn(name, i%3)
	}
	took := time.Since(start)
	after := heap()
	if tbl.Len() != n {
		b.Fatalf("%d homes held, want %d", tbl.Len(), n)
	}
	runtime.KeepAlive(names)
	runtime.KeepAlive(tbl)
	// The names slice is the caller's (the table keeps its own copy of each name): leave it
	// and its strings out, and the table's copies of the names' bytes too.
	return (float64(after-before) - float64(n)*19) / float64(n), float64(took.Nanoseconds()) / float64(n)
}
