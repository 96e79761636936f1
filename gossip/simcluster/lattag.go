package simcluster

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// LatTagKey is the serf tag a real entry publishes its round trips to each region in
// (node/latency.go: "ams:12,iad:85", milliseconds), and what an Entry publishes in its place.
const LatTagKey = "lat"

// latTag is the "lat" tag of an entry whose round trips are base ms to each region, scaled
// by f: regions in order, node's format (whole milliseconds from 10 ms).
func latTag(regions []string, base []int, f float64) string {
	var b strings.Builder
	for k, r := range regions {
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r + ":" + strconv.Itoa(int(float64(base[k])*f+0.5)))
	}
	return b.String()
}

// runLatTag publishes e's "lat" tag once, as node's first latency round does right after
// gossip starts, then, with every > 0, a changed one about every that often (the first at a
// random phase, so that entries do not change together). A real entry (node/latency.go)
// looks at its round trips every probe round and gossips the tag again only when a region
// appeared or went, or one moved by at least 25 % and 5 ms, and then at most every
// max(30 s, N / 0.2 s) in a fleet of N members; here the rate alone is modelled: every is
// the interval between changes that the fleet's own count gives (bench/fleet's
// learn_tag_changes_per_entry_s is 1/every), and each change is published whatever its size.
// Each is a memberlist alive broadcast that every member retransmits; the values alternate
// between two sets 20 % apart. It returns when ctx ends.
func (e *Entry) runLatTag(ctx context.Context, regions []string, seed int64, i int, every time.Duration) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6c6174<<16|uint64(i)))
	base := make([]int, len(regions))
	for k := range base {
		base[k] = 10 + rng.IntN(240) // 10-250 ms: a fleet spread over continents
	}
	f := 1.0
	e.Gossip.SetTag(LatTagKey, latTag(regions, base, f)) // an error: gossip is closing
	if every <= 0 {
		return
	}
	wait := time.Duration(rng.Int64N(int64(every)))
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if f == 1 {
			f = 1.2
		} else {
			f = 1
		}
		e.Gossip.SetTag(LatTagKey, latTag(regions, base, f))
		wait = every
	}
}
