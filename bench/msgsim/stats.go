package main

import (
	"math"
	"slices"
	"time"
)

const pairBins = 200_000 // 1 ms bins of a pair's delay; beyond is counted in the last

type markRec struct {
	t0, last int64
	missing  int32
	hash     uint64
	held     []uint64
}

type stats struct {
	events         int64
	complete       int
	pairs          []int64 // histogram of (home, other entry) delays, 1 ms bins
	pairsBy        [viaRepair + 1]int64
	gossipPairs    int64 // pairs reached before Duration+Drain, not by repair
	gossipComplete int

	batches, batchHomes, directPackets, duplicates int
	pendingDropped, copiesDropped, deferred        int
	budgetDeferred, repairDeferred                 int
	overBudget                                     int // the rule's batches through relays for their origin's own budget
	maxFlush                                       int64
	maxQueue                                       int
	serfEvents                                     int
	gossipPackets, indirectProbes, lost            int

	repairRounds, repairInSync, repairPulled int
	repairBuckets, repairRecords, repaired   int
	repairBytes                              int64

	relayPackets, relayHomes, nacks, resent, heartbeats int
	acks                                                int

	peakPkts, peakBytes int64

	marks []markRec
}

func (st *stats) init(cfg Config) { st.pairs = make([]int64, pairBins) }

func (st *stats) pair(d int64, via uint8) {
	st.pairs[min(d/1e6, pairBins-1)]++
	st.pairsBy[via]++
}

// sent counts a UDP packet leaving a at t.
func (st *stats) sent(s *Sim, a int32, t int64, bytes int) {
	if t >= ns(s.cfg.Duration) {
		return
	}
	n := &s.nodes[a]
	n.udpSent += int64(bytes)
	n.pktSent++
	if w := t / 1e9; w != n.winIdx {
		st.roll(n)
		n.winIdx = w
	}
	n.winPkts++
	n.winBytes += int64(bytes)
}

func (st *stats) roll(n *node) {
	st.peakPkts = max(st.peakPkts, n.winPkts)
	st.peakBytes = max(st.peakBytes, n.winBytes)
	n.winPkts, n.winBytes = 0, 0
}

// takeGossipCoverage notes what gossip alone reached by Duration+Drain.
func (st *stats) takeGossipCoverage(s *Sim) {
	st.gossipPairs = st.pairsBy[viaDirect] + st.pairsBy[viaRelay] + st.pairsBy[viaGossip]
	for k := range s.homes {
		if h := &s.homes[k]; h.missing == 0 && !h.repaired {
			st.gossipComplete++
		}
	}
}

func (st *stats) newMark(s *Sim, at int64) int32 {
	st.marks = append(st.marks, markRec{t0: at, missing: int32(s.cfg.Nodes), hash: s.rng.Uint64(),
		held: make([]uint64, s.words)})
	return int32(len(st.marks) - 1)
}

func (st *stats) markObserved(s *Sim, m, i int32) { st.markArrivedBy(s, m, i, false) }
func (st *stats) markArrived(s *Sim, m, i int32)  { st.markArrivedBy(s, m, i, false) }

func (st *stats) markArrivedBy(s *Sim, m, i int32, _ bool) {
	r := &st.marks[m]
	if !setBit(r.held, i) {
		return
	}
	s.nodes[i].markSum += r.hash
	if r.missing--; r.missing == 0 {
		r.last = s.now
	}
}

func (st *stats) marksHeld(i int32) []int32 {
	var out []int32
	for m := range st.marks {
		if hasBit(st.marks[m].held, i) {
			out = append(out, int32(m))
		}
	}
	return out
}

func (s *Sim) marksDone() bool {
	for _, m := range s.st.marks {
		if m.missing > 0 {
			return false
		}
	}
	return true
}

// Result is the JSON line. Times are milliseconds; a percentile is null when that share of
// homes never reached every entry. Per-entry bytes are over the learning window.
type Result struct {
	Nodes      int      `json:"nodes"`
	Rate       float64  `json:"rate"`
	DurationS  float64  `json:"duration_s"`
	LatencyMS  [2]int   `json:"latency_ms"`
	Loss       float64  `json:"loss"`
	Seed       uint64   `json:"seed"`
	Strategy   string   `json:"strategy"`
	RepairS    float64  `json:"repair_s"`
	Homes      int      `json:"homes"`
	P50MS      *float64 `json:"p50_ms"`
	P99MS      *float64 `json:"p99_ms"`
	MaxMS      *float64 `json:"max_ms"`
	PairP50MS  *float64 `json:"pair_p50_ms"`
	PairP99MS  *float64 `json:"pair_p99_ms"`
	CompleteG  float64  `json:"complete_by_gossip"`
	CoverageG  float64  `json:"coverage_gossip"`
	BytesES    float64  `json:"gossip_bytes_per_entry_s"`
	PacketsES  float64  `json:"packets_per_entry_s"`
	SentMax    float64  `json:"sent_bytes_per_entry_s_max"`
	RecvMean   float64  `json:"recv_bytes_per_entry_s"`
	RecvMax    float64  `json:"recv_bytes_per_entry_s_max"`
	TCPMean    float64  `json:"repair_bytes_per_entry_s"`
	TCPMax     float64  `json:"repair_bytes_per_entry_s_max"`
	PPSent     float64  `json:"pushpull_sent_bytes_per_entry_s"`
	PeakPkts   int64    `json:"origin_peak_packets_s"`
	PeakBytes  int64    `json:"origin_peak_bytes_s"`
	Batches    int      `json:"direct_batches"`
	DirPackets int      `json:"direct_packets"`
	Dups       int      `json:"direct_duplicates"`
	HomesPerB  float64  `json:"homes_per_batch"`
	PendDrop   int      `json:"pending_dropped"`
	CopiesDrop int      `json:"copies_dropped"`
	Deferred   int      `json:"flushes_deferred"`
	BudgetDef  int      `json:"budget_deferred"`
	OverBudget int      `json:"relayed_over_budget"`
	RepairDef  int      `json:"repair_buckets_deferred"`
	MaxFlushMS float64  `json:"max_flush_interval_ms"`
	MaxQueue   int      `json:"max_serf_queue"`
	Events     int      `json:"events_sent"`
	GossipPkts int      `json:"gossip_packets"`
	Indirect   int      `json:"indirect_probes"`
	Lost       int      `json:"packets_lost"`
	Rounds     int      `json:"repair_rounds"`
	InSync     int      `json:"repair_in_sync"`
	Pulled     int      `json:"repair_pulled"`
	BucketsPR  float64  `json:"repair_buckets_per_pull"`
	Records    int      `json:"repair_records_sent"`
	Repaired   int      `json:"homes_repaired"`
	RepairMB   float64  `json:"repair_mb"`
	HomesLost  int      `json:"homes_lost"`
	PairsLost  int64    `json:"pairs_lost"`
	Marks      int      `json:"marks"`
	MarkP99MS  *float64 `json:"mark_p99_ms"`
	MarkMaxMS  *float64 `json:"mark_max_ms"`
	RelayPkts  int      `json:"relay_packets,omitempty"`
	RelayHPP   float64  `json:"homes_per_relay_packet,omitempty"`
	Nacks      int      `json:"nacks,omitempty"`
	Resent     int      `json:"resent,omitempty"`
	HBs        int      `json:"heartbeats,omitempty"`
	Acks       int      `json:"acks,omitempty"`
	SimEvents  int64    `json:"sim_events"`
	SimS       float64  `json:"sim_s"`
	WallS      float64  `json:"wall_s"`
}

func (st *stats) result(s *Sim, wall time.Duration) *Result {
	c := s.cfg
	d := c.Duration.Seconds()
	r := &Result{
		Nodes: c.Nodes, Rate: c.Rate, DurationS: d, Loss: c.Loss, Seed: c.Seed, Strategy: c.Strategy,
		LatencyMS: [2]int{int(c.MinLat / time.Millisecond), int(c.MaxLat / time.Millisecond)},
		RepairS:   c.Repair.Seconds(), Homes: len(s.homes),
		Batches: st.batches, DirPackets: st.directPackets, Dups: st.duplicates,
		PendDrop: st.pendingDropped, CopiesDrop: st.copiesDropped, Deferred: st.deferred,
		BudgetDef: st.budgetDeferred, RepairDef: st.repairDeferred, OverBudget: st.overBudget,
		MaxFlushMS: float64(st.maxFlush) / 1e6, MaxQueue: st.maxQueue, Events: st.serfEvents,
		GossipPkts: st.gossipPackets, Indirect: st.indirectProbes, Lost: st.lost,
		Rounds: st.repairRounds, InSync: st.repairInSync, Pulled: st.repairPulled,
		Records: st.repairRecords, Repaired: st.repaired, RepairMB: round(float64(st.repairBytes)/1e6, 3),
		Marks: len(st.marks), RelayPkts: st.relayPackets, Nacks: st.nacks, Resent: st.resent, HBs: st.heartbeats, Acks: st.acks,
		SimEvents: st.events, SimS: round(float64(s.now)/1e9, 2), WallS: round(wall.Seconds(), 2),
	}
	if st.batches > 0 {
		r.HomesPerB = round(float64(st.batchHomes)/float64(st.batches), 2)
	}
	if st.relayPackets > 0 {
		r.RelayHPP = round(float64(st.relayHomes)/float64(st.relayPackets), 1)
	}
	if st.repairPulled > 0 {
		r.BucketsPR = round(float64(st.repairBuckets)/float64(st.repairPulled), 1)
	}
	var sent, recv, tcp, pkts, pp float64
	for i := range s.nodes {
		n := &s.nodes[i]
		st.roll(n)
		sent += float64(n.udpSent)
		recv += float64(n.udpRecv)
		tcp += float64(n.tcpSent + n.tcpRecv)
		pkts += float64(n.pktSent)
		pp += float64(n.ppSent)
		r.SentMax = max(r.SentMax, float64(n.udpSent)/d)
		r.RecvMax = max(r.RecvMax, float64(n.udpRecv)/d)
		r.TCPMax = max(r.TCPMax, float64(n.tcpSent+n.tcpRecv)/d)
	}
	nn := float64(c.Nodes)
	r.BytesES, r.RecvMean, r.TCPMean = round(sent/nn/d, 0), round(recv/nn/d, 0), round(tcp/nn/d, 0)
	r.SentMax, r.RecvMax, r.TCPMax = round(r.SentMax, 0), round(r.RecvMax, 0), round(r.TCPMax, 0)
	r.PacketsES = round(pkts/nn/d, 1)
	r.PPSent = round(pp/nn/d, 0)
	r.PeakPkts, r.PeakBytes = st.peakPkts, st.peakBytes

	all := make([]float64, len(s.homes))
	for k := range s.homes {
		h := &s.homes[k]
		if h.missing == 0 {
			all[k] = float64(h.last-h.t0) / 1e6
		} else {
			all[k] = math.Inf(1)
			r.HomesLost++
			r.PairsLost += int64(h.missing)
		}
	}
	slices.Sort(all)
	r.P50MS, r.P99MS, r.MaxMS = pct(all, 0.5), pct(all, 0.99), pct(all, 1)
	total := int64(len(s.homes)) * int64(c.Nodes-1)
	r.PairP50MS, r.PairP99MS = st.pairPct(0.5, total), st.pairPct(0.99, total)
	r.CompleteG = ratio(float64(st.gossipComplete), float64(len(s.homes)))
	r.CoverageG = ratio(float64(st.gossipPairs), float64(total))
	if len(st.marks) > 0 {
		ms := make([]float64, len(st.marks))
		for i, m := range st.marks {
			ms[i] = math.Inf(1)
			if m.missing == 0 {
				ms[i] = float64(m.last-m.t0) / 1e6
			}
		}
		slices.Sort(ms)
		r.MarkP99MS, r.MarkMaxMS = pct(ms, 0.99), pct(ms, 1)
	}
	return r
}

// pairPct is the p-th delay of total pairs (those never reached count as infinite), from
// the 1 ms histogram: the bin's upper edge.
func (st *stats) pairPct(p float64, total int64) *float64 {
	want := int64(math.Ceil(p * float64(total)))
	var n int64
	for b, c := range st.pairs {
		if n += c; n >= want && c > 0 {
			v := float64(b + 1)
			return &v
		}
	}
	return nil
}

// pct is the nearest-rank percentile of sorted xs, rounded to 0.1 ms; nil if it is +Inf.
func pct(xs []float64, p float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	v := xs[max(int(math.Ceil(p*float64(len(xs))))-1, 0)]
	if math.IsInf(v, 1) {
		return nil
	}
	v = math.Round(v*10) / 10
	return &v
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round(a/b, 4)
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
