package proxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// This entry's own reach (docs/REFERENCE.md, "Which region, which router"). A region's failure
// mark is the fleet's, and any answer from the region anywhere clears it, relayed ones
// included. An entry whose own path to a region is cut (its link, a firewall) while the region
// answers every other entry would be sent back into the cut by those answers. So each entry
// also keeps, for itself alone, the regions its own attempts could not reach: every request
// asks them last until a router of the region gives an answer head on a connection of this
// entry's own, to a request or to Probe. Nothing here is gossiped; it only reorders, as a mark.
//
// The policy is two pure functions over classified inputs, in the shape of decide: reachStep
// (what an attempt, or a probe, says of a region) and probeFor (what Probe sends a region).
// The I/O is in forward.go and Probe.

// reach is what this entry's own tries at one region, for one request or one probe, said of
// its path there.
type reach uint8

const (
	// reachNone says nothing of the path: the client went away, the region had no router,
	// or an answer came without Fenec-Shard below 500 (not a Fenec router's, and not a
	// failure either).
	reachNone reach = iota
	// reachAnswered: a router of the region gave an answer head with Fenec-Shard (any status)
	// on this entry's own connection. An answer relayed to this entry by another region's
	// router is not this: it is that other region's reach.
	reachAnswered
	// reachFailed: every router of the region tried gave no answer head with Fenec-Shard:
	// never reached, failed after it may have reached them (a reset, a 5xx without
	// Fenec-Shard), or no head within the answer timeout (a connection accepted and never
	// answered, a black hole).
	reachFailed
)

var reachNames = [...]string{"none", "answered", "failed"}

func (r reach) String() string { return reachNames[r] }

// reachStep returns the set of regions this entry cannot reach itself (bit i: region i) after
// what a try at region said: set once its own try failed, cleared only by its own answer.
func reachStep(set uint64, region int, r reach) uint64 {
	switch r {
	case reachAnswered:
		return set &^ (1 << region)
	case reachFailed:
		return set | 1<<region
	}
	return set
}

// probeKind is what Probe sends one region in a round.
type probeKind uint8

const (
	probeNone    probeKind = iota // nothing: a request reached it lately
	probeConnect                  // a TCP connect, closed at once: a latency sample, no reach
	probeAnswer                   // a request (probeRequest): its answer head is the reach
)

// probeFor says what Probe sends a region: a region this entry cannot reach gets a request in
// every round (a connect says nothing of reach: a black hole accepts), a reachable one a
// connect when no sample reached it within idle, and one without routers nothing.
func probeFor(unreachable, hasRouters bool, sinceSample, idle time.Duration) probeKind {
	switch {
	case !hasRouters:
		return probeNone
	case unreachable:
		return probeAnswer
	case sinceSample >= idle:
		return probeConnect
	}
	return probeNone
}

// probePath is the target of the request Probe sends a region this entry cannot reach: HEAD is
// safe (no side effects) and its answer has no body, and a path outside /t/ names no tenant,
// so the router answers it itself (a 404 with Fenec-Shard from the stand-in) and never relays
// it. Any status with Fenec-Shard is reach.
const probePath = "/_entry/probe"

// MinProbeEvery is the shortest interval the node probes at; it probes at the shorter of its
// latency round and --read-backoff, so that a region this entry cannot reach is probed at least
// every --read-backoff (above this floor).
const MinProbeEvery = 100 * time.Millisecond

// setReach applies reachStep to the handler's set for rs and logs a change at info. A try that
// changes nothing costs one atomic load.
func (h *Handler) setReach(rs *regionState, r reach, how string) {
	for {
		old := h.unreach.Load()
		next := reachStep(old, rs.id, r)
		if next == old {
			return
		}
		if h.unreach.CompareAndSwap(old, next) {
			if r == reachFailed {
				h.log.Info().Str("region", rs.name).Str("by", how).
					Msg("region unreachable from here: every request asks it last until this entry reaches a router of it itself")
			} else {
				h.log.Info().Str("region", rs.name).Str("by", how).
					Msg("region reached from here again")
			}
			return
		}
	}
}

// Unreachable reports whether this entry's own attempt at region (a home table region ID)
// failed and no router of it has answered this entry since: every request asks it last.
// Safe for concurrent use; one atomic load.
func (h *Handler) Unreachable(region int) bool {
	return uint(region) < maxRegions && h.unreach.Load()>>region&1 == 1
}

// reachCollector exports fenec_entry_region_unreachable{region}, read at scrape time.
type reachCollector struct{ h *Handler }

var descRegionUnreachable = prometheus.NewDesc("fenec_entry_region_unreachable",
	"1 while this entry's own attempt at the region failed and no router of it has answered this entry since (a request or its probe): every request asks it last. Local, never gossiped.",
	[]string{"region"}, nil)

func (c reachCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descRegionUnreachable }

func (c reachCollector) Collect(ch chan<- prometheus.Metric) {
	rt := c.h.rt.Load()
	if rt == nil {
		return
	}
	set := c.h.unreach.Load()
	for _, id := range rt.order {
		v := 0.0
		if set>>id&1 == 1 {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descRegionUnreachable, prometheus.GaugeValue, v, rt.byID[id].st.name)
	}
}
