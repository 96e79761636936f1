package node

import (
	"context"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/fenec/fenec-entry/proxy"
)

// The latency matrix: each entry measures its round trip to every region
// (proxy/latency.go), probes the regions no request reached lately, and shares what it
// measured in its serf tag "lat" ("eu:12,us:85,ap:210", milliseconds), so that any entry's
// /status shows the fleet's PoP x region matrix.
const (
	latencyTick     = 5 * time.Second  // how often idle regions are considered for a probe
	latencyTagEvery = 30 * time.Second // the tag is gossiped again at most this often, in small fleets
	latencyTagKey   = "lat"
	maxLatencyTag   = 200 // bytes of the tag: regions past it are left out (memberlist's meta is 512 bytes in all)
)

// latencyTagRate bounds the fleet's changes of the tag, a second: each is a memberlist alive
// broadcast (about 150 bytes) that every member sends up to 4 ceil(log10(N+1)) times (12 at 100
// members, 16 at 1,000), so each change costs every member about 2 KB, and a change an entry
// every 100 s would cost each member of 1,000 about 23 KB/s, most of gossip's budget
// (bench/fleet: the tag's changes were the fleet's bytes above gossipsim's). An entry of N
// gossips its tag again at most every N / latencyTagRate seconds (latencyTagInterval): at most
// about 0.5 KB/s a member for the tag at any size.
const latencyTagRate = 0.2

// latencyTagInterval is the least time between two gossips of the tag in a fleet of members.
func latencyTagInterval(members int) time.Duration {
	return max(latencyTagEvery, time.Duration(float64(members)/latencyTagRate*float64(time.Second)))
}

// probeEvery is the time between two rounds of probes: latencyTick, or --read-backoff when
// shorter (a region this entry cannot reach is probed at least every --read-backoff: CONTRACT,
// "This entry's own reach"), never under proxy.MinProbeEvery.
func probeEvery(readBackoff time.Duration) time.Duration {
	return max(proxy.MinProbeEvery, min(latencyTick, readBackoff))
}

// runLatency probes every probeEvery (the regions no request reached lately, and those this
// entry cannot reach itself) and keeps the "lat" tag current, until the entry stops. The
// interval follows a reload of --read-backoff from the next round.
func (n *Node) runLatency() {
	t := time.NewTimer(latencyTick)
	defer t.Stop()
	var last string
	var lastAt time.Time
	for {
		every := probeEvery(n.homes.ReadBackoff())
		t.Reset(every)
		ctx, cancel := context.WithTimeout(n.bg, every)
		n.proxy.Probe(ctx, proxy.DefaultProbeIdle)
		cancel()
		if g := n.getCluster(); g != nil {
			tag := encodeLatency(n.proxy.Latencies())
			every := latencyTagInterval(len(g.Peers()) + 1)
			if tag != last && (last == "" || n.cfg.Clock.Now().Sub(lastAt) >= every) && significant(last, tag) {
				if err := g.SetTag(latencyTagKey, tag); err != nil {
					n.log.Warn().Err(err).Msg("latency tag not gossiped")
				} else {
					last, lastAt = tag, n.cfg.Clock.Now()
				}
			}
		}
		select {
		case <-n.bg.Done():
			return
		case <-t.C:
		}
	}
}

// encodeLatency writes the measured regions as "name:ms,...", in order, within maxLatencyTag.
func encodeLatency(ls []proxy.RegionLatency) string {
	var b strings.Builder
	for _, l := range ls {
		if !l.Measured {
			continue
		}
		item := l.Region + ":" + formatMS(l.Estimate)
		if b.Len()+len(item)+1 > maxLatencyTag {
			break
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	return b.String()
}

// formatMS is d in milliseconds: one decimal under 10 ms, whole above.
func formatMS(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 10 {
		return strconv.FormatFloat(math.Round(ms*10)/10, 'f', -1, 64)
	}
	return strconv.FormatFloat(math.Round(ms), 'f', -1, 64)
}

// parseLatency reads a peer's "lat" tag; entries that do not parse are left out. At most
// MaxRegions entries.
func parseLatency(tag string) map[string]float64 {
	if tag == "" {
		return nil
	}
	out := map[string]float64{}
	for item := range strings.SplitSeq(tag, ",") {
		name, v, ok := strings.Cut(item, ":")
		ms, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil || name == "" || ms < 0 || math.IsInf(ms, 0) || math.IsNaN(ms) {
			continue
		}
		out[name] = ms
		if len(out) == MaxRegions {
			break
		}
	}
	return out
}

// significant reports whether tag differs from last enough to gossip: a region appeared or
// went, or one moved by at least 25% and 5 ms (a loopback or same-city round trip moves by a
// millisecond on noise alone; the matrix is for people, who read tens of milliseconds).
func significant(last, tag string) bool {
	a, b := parseLatency(last), parseLatency(tag)
	if len(a) != len(b) {
		return true
	}
	for k, v := range b {
		w, ok := a[k]
		if !ok || (math.Abs(v-w) >= 5 && math.Abs(v-w) >= 0.25*math.Max(v, w)) {
			return true
		}
	}
	return false
}

func msOf(d time.Duration) float64 {
	v, _ := strconv.ParseFloat(formatMS(d), 64)
	return v
}
