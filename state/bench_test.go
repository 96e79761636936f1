package state

import (
	"fmt"
	"testing"
)

// BenchmarkWrite: one write of a full table (stream from Range, fsync, rename), at the
// default --homes and at a million. Reports the file's size and its cost per home.
func BenchmarkWrite(b *testing.B) {
	for _, n := range []int{50_000, 1_000_000} {
		b.Run(fmt.Sprintf("homes=%d", n), func(b *testing.B) {
			tbl := newTable(b, "entry-fra-1", n)
			for i := range n {
				tbl.LearnName(fmt.Sprintf("tenant-%07d", i), regions[i%3])
			}
			s := open(b, b.TempDir(), "entry-fra-1", tbl, nil)
			var size int64
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				s.mu.Lock()
				_, sz, err := s.writeLocked()
				s.mu.Unlock()
				if err != nil {
					b.Fatal(err)
				}
				size = sz
			}
			b.SetBytes(size)
			b.ReportMetric(float64(size), "file-bytes")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/home")
		})
	}
}

// BenchmarkRestore: reading a full table back (check pass, then restore pass).
func BenchmarkRestore(b *testing.B) {
	for _, n := range []int{50_000, 1_000_000} {
		b.Run(fmt.Sprintf("homes=%d", n), func(b *testing.B) {
			src := newTable(b, "entry-fra-1", n)
			for i := range n {
				src.LearnName(fmt.Sprintf("tenant-%07d", i), regions[i%3])
			}
			dir := b.TempDir()
			if _, err := open(b, dir, "entry-fra-1", src, nil).Flush(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				tbl := newTable(b, "entry-fra-1", n)
				s := open(b, dir, "entry-fra-1", tbl, nil)
				b.StartTimer()
				if r := s.Restore(); r.Homes != n {
					b.Fatalf("restored %d of %d", r.Homes, n)
				}
			}
		})
	}
}
