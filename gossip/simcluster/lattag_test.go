package simcluster

import (
	"strings"
	"testing"
	"time"
)

// tagAt is the "lat" tag entry at lists for the member called name ("" if none).
func tagAt(at *Entry, name string) string {
	for _, m := range at.Gossip.Members() {
		if m.Name == name {
			return m.Tags[LatTagKey]
		}
	}
	return ""
}

// Every entry publishes a latency tag as a real one does, and with LatTagEvery changes it:
// each change reaches its peers (an alive broadcast, what a real entry's tag costs).
func TestLatTagPublishedAndChanged(t *testing.T) {
	c := start(t, Options{Nodes: 4, Fast: true, LatTagEvery: 300 * time.Millisecond})
	es := c.Entries()
	seen := map[string]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("entry 3 saw %d values of entry 0's lat tag within 10s (%q); want 2", len(seen), tagAt(es[3], es[0].Name))
		}
		if v := tagAt(es[3], es[0].Name); v != "" {
			if n := strings.Count(v, ":"); n != len(DefaultRegions) {
				t.Fatalf("lat tag %q: %d regions, want %d", v, n, len(DefaultRegions))
			}
			seen[v] = true
		}
		time.Sleep(20 * time.Millisecond) // polling the member list
	}
}

func TestLatTagValuesMove(t *testing.T) {
	r := []string{"ams", "iad"}
	a, b := latTag(r, []int{12, 85}, 1), latTag(r, []int{12, 85}, 1.2)
	if a != "ams:12,iad:85" || b != "ams:14,iad:102" {
		t.Fatalf("latTag: %q, %q", a, b)
	}
}
