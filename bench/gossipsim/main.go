// Command gossipsim measures how fast homes learned at one entry reach every entry of an
// in-process cluster (gossip/simcluster on memnet), what it costs, and what repair has to
// carry. It prints one JSON line on stdout; progress goes to stderr. See README.md.
//
//	go run ./bench/gossipsim -nodes 10 -rate 50 -duration 10s
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fenec/fenec-entry/gossip"
	"github.com/fenec/fenec-entry/gossip/simcluster"
)

type flags struct {
	nodes      int
	origins    int
	rate       float64
	duration   time.Duration
	minLat     time.Duration
	maxLat     time.Duration
	loss       float64
	seed       int64
	repair     time.Duration
	drain      time.Duration
	settle     time.Duration
	idle       time.Duration
	idleAfter  time.Duration
	poll       time.Duration
	failDetect time.Duration
	// tune holds the tuning flags' gossip settings (Spread and Membership), from
	// gossip.DefaultConfig.
	tune        gossip.Config
	churn       int
	churnOver   time.Duration
	latTagEvery time.Duration

	falseFailure time.Duration
}

func main() {
	var f flags
	flag.IntVar(&f.nodes, "nodes", 10, "entries in the cluster")
	flag.Float64Var(&f.rate, "rate", 50, "new homes per second, cluster-wide, each learned at a random entry")
	flag.IntVar(&f.origins, "origins", 0, "learn at the first this many entries only (1: a burst at one entry, a cold PoP); 0: every entry")
	flag.DurationVar(&f.duration, "duration", 10*time.Second, "how long homes are learned")
	flag.DurationVar(&f.minLat, "min-latency", 10*time.Millisecond, "memnet one-way latency, lower bound (uniform)")
	flag.DurationVar(&f.maxLat, "max-latency", 150*time.Millisecond, "memnet one-way latency, upper bound")
	flag.Float64Var(&f.loss, "loss", 0.01, "memnet packet loss probability")
	flag.Int64Var(&f.seed, "seed", 1, "seed of memnet's draws, the tenant names and the learning entries")
	flag.DurationVar(&f.repair, "repair", 5*time.Second, "repair interval once repair starts (production: 30s)")
	flag.DurationVar(&f.drain, "drain", 5*time.Second, "gossip-only time after the last learning before repair starts")
	flag.DurationVar(&f.settle, "settle", 0, "how long repair may take to fill every table; 0 means max(5s, 3 x -repair)")
	flag.DurationVar(&f.idle, "idle", 3*time.Second, "idle window before learning, to measure membership traffic alone")
	flag.DurationVar(&f.idleAfter, "idle-after", 0, "wait this long after forming before the idle window: the joins' broadcasts are still retransmitted for a while")
	flag.DurationVar(&f.failDetect, "fail-detect", 30*time.Second, "after the run, kill one entry and wait up to this long until every other sees it failed (0: skip)")
	flag.DurationVar(&f.poll, "poll", 5*time.Millisecond, "how often every table is checked for the homes it lacks")
	// Tuning experiments: each flag's default is gossip's.
	f.tune = gossip.DefaultConfig()
	sp, mb := &f.tune.Spread, &f.tune.Membership
	flag.IntVar(&sp.EventSizeLimit, "event-size", sp.EventSizeLimit, "gossip Spread.EventSizeLimit")
	flag.DurationVar(&sp.FlushInterval, "flush-interval", sp.FlushInterval, "gossip Spread.FlushInterval")
	flag.DurationVar(&sp.MaxFlushInterval, "max-flush-interval", sp.MaxFlushInterval, "gossip Spread.MaxFlushInterval")
	flag.IntVar(&sp.MaxEventsPerFlush, "max-events-per-flush", sp.MaxEventsPerFlush, "gossip Spread.MaxEventsPerFlush")
	flag.IntVar(&sp.QueueHigh, "queue-high", sp.QueueHigh, "gossip Spread.QueueHigh")
	flag.IntVar(&sp.QueueLow, "queue-low", sp.QueueLow, "gossip Spread.QueueLow")
	flag.IntVar(&sp.DirectCopies, "direct-copies", sp.DirectCopies, "gossip Spread.DirectCopies")
	flag.DurationVar(&sp.DirectCopyInterval, "direct-copy-interval", sp.DirectCopyInterval, "gossip Spread.DirectCopyInterval")
	flag.IntVar(&sp.DirectLimit, "direct-limit", sp.DirectLimit, "gossip Spread.DirectLimit: an origin's bytes a second of direct batches before its homes go through relays (-1: relays never; 1: always)")
	flag.DurationVar(&sp.RelayAckTimeout, "relay-ack-timeout", sp.RelayAckTimeout, "gossip Spread.RelayAckTimeout")
	flag.IntVar(&mb.GossipNodes, "gossip-nodes", mb.GossipNodes, "gossip Membership.GossipNodes")
	flag.DurationVar(&mb.GossipInterval, "gossip-interval", mb.GossipInterval, "gossip Membership.GossipInterval")
	flag.IntVar(&mb.RetransmitMult, "retransmit-mult", mb.RetransmitMult, "gossip Membership.RetransmitMult")
	flag.DurationVar(&mb.ProbeInterval, "probe-interval", mb.ProbeInterval, "gossip Membership.ProbeInterval")
	flag.DurationVar(&mb.ProbeTimeout, "probe-timeout", mb.ProbeTimeout, "gossip Membership.ProbeTimeout")
	flag.IntVar(&mb.SuspicionMult, "suspicion-mult", mb.SuspicionMult, "gossip Membership.SuspicionMult")
	flag.IntVar(&f.churn, "churn", 0, "restart this many distinct entries (not the first three) while homes are learned, repair running throughout; homes are then learned only at the others (0: no churn)")
	flag.DurationVar(&f.churnOver, "churn-over", 60*time.Second, "with -churn: spread the restarts evenly over this much of the learning window")
	flag.DurationVar(&f.latTagEvery, "lat-tag-every", 0, "each entry changes its latency tag (\"lat\", as node publishes its round trips to the regions) about this often, each change an alive broadcast the cluster retransmits; bench/fleet's tag_changes_per_entry_s is 1/this (0: the tag once at start, as an entry whose round trips stay put)")
	flag.DurationVar(&f.falseFailure, "false-failure", 0, "instead of the homes run: run the cluster this long, nothing killed, learning -rate homes/s as load, and count suspicions and failures of live entries")
	flag.Parse()
	if err := f.checkChurn(); err != nil {
		fmt.Fprintln(os.Stderr, "gossipsim:", err)
		os.Exit(2)
	}
	if f.falseFailure > 0 {
		if f.nodes < 2 || f.rate < 0 {
			fmt.Fprintln(os.Stderr, "gossipsim: -false-failure needs -nodes >= 2 and -rate >= 0")
			os.Exit(2)
		}
		res, err := runFalseFailure(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gossipsim:", err)
			os.Exit(1)
		}
		b, _ := json.Marshal(res)
		fmt.Println(string(b))
		return
	}
	if f.nodes < 2 || f.rate <= 0 || f.duration <= 0 || f.repair <= 0 || f.poll <= 0 {
		fmt.Fprintln(os.Stderr, "gossipsim: need -nodes >= 2 and positive -rate, -duration, -repair, -poll")
		os.Exit(2)
	}
	if f.settle == 0 {
		f.settle = max(5*time.Second, 3*f.repair)
	}
	res, err := run(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gossipsim:", err)
		os.Exit(1)
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
}

// checkChurn says what is wrong with the churn flags, naming the flag.
func (f flags) checkChurn() error {
	switch {
	case f.churn < 0:
		return fmt.Errorf("-churn %d: need 0 (off) or more", f.churn)
	case f.churn == 0:
		return nil
	case f.falseFailure > 0:
		return errors.New("-false-failure: does not take -churn (a churn run is a homes run)")
	case f.churn > f.nodes-3:
		return fmt.Errorf("-churn %d: at most -nodes - 3 (%d): the first three entries, the join seeds, stay up", f.churn, max(f.nodes-3, 0))
	case f.churnOver <= 0:
		return fmt.Errorf("-churn-over %v: need a positive duration", f.churnOver)
	case f.duration < f.churnOver:
		return fmt.Errorf("-duration %v: at least -churn-over (%v) with -churn: homes are learned while the entries restart", f.duration, f.churnOver)
	}
	return nil
}

// result is the JSON line. Times are milliseconds; a percentile is null when that share of
// homes never reached every entry.
type result struct {
	Nodes       int      `json:"nodes"`
	Rate        float64  `json:"rate"`
	DurationS   float64  `json:"duration_s"`
	LatencyMS   [2]int   `json:"latency_ms"`
	Loss        float64  `json:"loss"`
	Seed        int64    `json:"seed"`
	RepairS     float64  `json:"repair_s"`
	Homes       int      `json:"homes"`
	P50MS       *float64 `json:"p50_ms"`
	P99MS       *float64 `json:"p99_ms"`
	MaxMS       *float64 `json:"max_ms"`
	PairP50MS   *float64 `json:"pair_p50_ms"`
	PairP99MS   *float64 `json:"pair_p99_ms"`
	CompleteByG *float64 `json:"complete_by_gossip"` // null with -churn: repair runs throughout
	CoverageG   *float64 `json:"coverage_gossip"`
	BytesPerES  float64  `json:"gossip_bytes_per_entry_s"`
	IdleBytesES float64  `json:"idle_bytes_per_entry_s"`
	IdleAfterS  float64  `json:"idle_after_s"`
	LatTagEvery float64  `json:"lat_tag_every_s"`
	// From the entries' own fenec_entry_gossip_bytes_total, sent: packets (what memnet counts
	// too) and streams (push/pull, joins, repair's HTTP), idle and over the learn window.
	IdlePacketES float64  `json:"idle_counted_packet_bytes_per_entry_s"`
	IdleStreamES float64  `json:"idle_stream_bytes_per_entry_s"`
	StreamES     float64  `json:"stream_bytes_per_entry_s"`
	PacketsES    float64  `json:"packets_per_entry_s"`
	DirBatches   float64  `json:"direct_batches"`
	DirPackets   float64  `json:"direct_packets"`
	Relayed      float64  `json:"relayed_batches"`
	Bundles      float64  `json:"relay_batches_sent"`
	AckResent    float64  `json:"acked_resent"`
	AckGivenUp   float64  `json:"acked_given_up"`
	AcksSent     float64  `json:"acks_sent"`
	Fallbacks    float64  `json:"relay_fallbacks"`
	BudgetDef    float64  `json:"budget_deferred_flushes"`
	DirDup       float64  `json:"direct_duplicates"`
	HomesPerB    float64  `json:"homes_per_batch"`
	Dropped      float64  `json:"events_dropped"`
	PendDropped  float64  `json:"pending_dropped"`
	NetDrops     uint64   `json:"packets_dropped_queue_full"`
	Repaired     float64  `json:"homes_repaired"`
	RepairRnds   float64  `json:"repair_rounds"`
	RepairS2     float64  `json:"repair_took_s"`
	Lost         int      `json:"homes_lost"`
	LostPairs    int      `json:"pairs_lost"`
	CPUCores     float64  `json:"cpu_cores"`
	PollMS       float64  `json:"poll_ms"`
	MaxScanMS    float64  `json:"max_scan_ms"`
	FormedS      float64  `json:"members_formed_s"`
	ProbeMS      float64  `json:"probe_interval_ms"`
	ProbeTmoMS   float64  `json:"probe_timeout_ms"`
	SuspMult     int      `json:"suspicion_mult"`
	FailFirstS   *float64 `json:"failure_first_s"`
	FailAllS     *float64 `json:"failure_all_s"`

	*churnResult // with -churn only
}

// churnResult is what a run with -churn adds to the line.
type churnResult struct {
	Restarts  int     `json:"churn_restarts"`
	ChurnOver float64 `json:"churn_over_s"`
	// The longest time from a restart until the new incarnation held every home learned
	// before it; null if some never did.
	RefillMaxMS *float64 `json:"restart_fill_max_ms"`
	// Whether the entry that got the slowest home (max_ms) last is one that restarted: if
	// not, the churn did not delay that home (a packet lost three times did).
	SlowestRestarted bool `json:"slowest_home_last_at_restarted"`
}

// simOptions is the cluster of f: memnet's latency and loss, gossip's settings as the tuning
// flags give them.
func simOptions(f flags) simcluster.Options {
	return simcluster.Options{
		Nodes: f.nodes, Seed: f.seed, MinLatency: f.minLat, MaxLatency: f.maxLat, Loss: f.loss,
		RepairInterval: f.repair, LatTagEvery: f.latTagEvery,
		Gossip: func(_ int, c *gossip.Config) { c.Spread, c.Membership = f.tune.Spread, f.tune.Membership },
	}
}

// formCluster starts a cluster and waits until every entry sees every other alive, within a
// bound that grows with its size. On error nothing is left running.
func formCluster(opts simcluster.Options) (*simcluster.Cluster, error) {
	c, err := simcluster.New(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second+time.Duration(opts.Nodes)*300*time.Millisecond)
	defer cancel()
	if err := c.WaitMembers(ctx); err != nil {
		err = fmt.Errorf("%w (%s)", err, notSeen(c))
		c.Close()
		return nil, err
	}
	return c, nil
}

// notSeen says, for a cluster that did not form, how the first few pairs that do not see each
// other alive see each other, and how many others see the missing one alive: what tells a
// member stuck as failed at one peer from one cut off from all.
func notSeen(c *simcluster.Cluster) string {
	es := c.Entries()
	stateAt := func(at *simcluster.Entry, name string) string {
		for _, m := range at.Gossip.Members() {
			if m.Name == name {
				return m.State
			}
		}
		return "unknown"
	}
	var out []string
	for _, e := range es {
		for _, o := range es {
			if o == e || stateAt(e, o.Name) == "alive" {
				continue
			}
			seen := 0
			for _, x := range es {
				if x != o && stateAt(x, o.Name) == "alive" {
					seen++
				}
			}
			out = append(out, fmt.Sprintf("%s has %s %s, %s has %s %s, %d of %d see %s alive",
				e.Name, o.Name, stateAt(e, o.Name), o.Name, e.Name, stateAt(o, e.Name), seen, len(es)-1, o.Name))
			if len(out) == 3 {
				return strings.Join(out, "; ")
			}
		}
	}
	return strings.Join(out, "; ")
}

func run(f flags) (*result, error) {
	opts := simOptions(f)
	begin := time.Now()
	c, err := formCluster(opts)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	formed := time.Since(begin)
	logf("%d entries formed in %v", f.nodes, formed.Round(time.Millisecond))

	es := c.Entries()
	nw := c.Network()
	time.Sleep(f.idleAfter) // the joins' broadcasts die down: not waiting for anything
	idle0, idleP0, idleS0 := nw.Stats(), sentBytes(es, "packet"), sentBytes(es, "stream")
	time.Sleep(f.idle) // measuring idle traffic, not waiting for anything
	idle1, idleP1, idleS1 := nw.Stats(), sentBytes(es, "packet"), sentBytes(es, "stream")

	rng := rand.New(rand.NewPCG(uint64(f.seed), 0x676f7373))
	total := int(math.Ceil(f.rate * f.duration.Seconds()))
	tr := newTracker(c.Entries, total, f.poll)
	regions := simcluster.DefaultRegions
	names := tenantNames(rng, total)
	go tr.run()

	// Homes are learned only at entries that never restart: a home learned at one that then
	// restarts before sending it is lost with that process, which is no delay of gossip's.
	var churned []int
	if f.churn > 0 {
		churned = churnSet(f.seed, len(es), f.churn)
	}
	origins := len(es)
	if f.origins > 0 {
		origins = min(f.origins, len(es))
	}
	var learnAt []int
	for i := range origins {
		if !slices.Contains(churned, i) {
			learnAt = append(learnAt, i)
		}
	}
	if f.churn > 0 {
		// Repair is part of what a churn may cost a home (one round), so it runs while the
		// entries restart, not only after the drain.
		logf("churn: restarting %v over %v; repair every %v from now on", churned, f.churnOver, f.repair)
		c.StartRepair()
	}

	logf("learning %d homes over %v at %.0f/s", total, f.duration, f.rate)
	cpu0, st0, t0, str0 := cpuTime(), nw.Stats(), time.Now(), sentBytes(es, "stream")
	var ch *churn
	if f.churn > 0 {
		ch = startChurn(c, churned, t0, f.churnOver)
	}
	for k := range total {
		at := t0.Add(time.Duration(float64(k) / f.rate * float64(time.Second)))
		if d := time.Until(at); d > 0 {
			time.Sleep(d) // pacing the learnings
		}
		i := learnAt[rng.IntN(len(learnAt))]
		tr.learned(k, names[k], regions[rng.IntN(len(regions))], c.Entry(i))
	}
	if d := time.Until(t0.Add(f.duration)); d > 0 {
		time.Sleep(d)
	}
	incs := es // every incarnation, for the counters: a closed one keeps what it counted
	if ch != nil {
		<-ch.done // the last restart was half a slot before the window's end
		if ch.err != nil {
			return nil, ch.err
		}
		incs = append(slices.Clip(es), ch.restarted...)
	}
	wall, cpu1, st1, str1 := time.Since(t0), cpuTime(), nw.Stats(), sentBytes(incs, "stream")

	var gossipPairs, gossipComplete int
	if f.churn == 0 {
		logf("gossip only: draining for up to %v", f.drain)
		tr.waitAll(f.drain)
		gossipPairs, gossipComplete = tr.counts()
		logf("repair every %v: settling for up to %v", f.repair, f.settle)
	} else {
		if err := ch.wait(); err != nil {
			return nil, err
		}
		logf("repair running: settling for up to %v", f.settle)
	}
	repairStart := time.Now()
	c.StartRepair()
	tr.waitAll(f.settle)
	repairTook := time.Since(repairStart)
	tr.stop()
	finalPairs, finalComplete := tr.counts()

	res := &result{
		Nodes: f.nodes, Rate: f.rate, DurationS: f.duration.Seconds(),
		LatencyMS: [2]int{int(f.minLat / time.Millisecond), int(f.maxLat / time.Millisecond)},
		Loss:      f.loss, Seed: f.seed, RepairS: f.repair.Seconds(), Homes: total,
		BytesPerES:   float64(st1.SentBytes-st0.SentBytes) / float64(len(es)) / wall.Seconds(),
		IdleBytesES:  float64(idle1.SentBytes-idle0.SentBytes) / float64(len(es)) / f.idle.Seconds(),
		IdleAfterS:   f.idleAfter.Seconds(),
		LatTagEvery:  f.latTagEvery.Seconds(),
		IdlePacketES: round((idleP1-idleP0)/float64(len(es))/f.idle.Seconds(), 0),
		IdleStreamES: round((idleS1-idleS0)/float64(len(es))/f.idle.Seconds(), 0),
		StreamES:     round((str1-str0)/float64(len(es))/wall.Seconds(), 0),
		PacketsES:    float64(st1.Sent-st0.Sent) / float64(len(es)) / wall.Seconds(),
		NetDrops:     st1.DroppedQueueFull - st0.DroppedQueueFull,
		RepairS2:     round(repairTook.Seconds(), 2),
		Lost:         total - finalComplete,
		LostPairs:    total*len(es) - finalPairs,
		CPUCores:     round((cpu1-cpu0).Seconds()/wall.Seconds(), 2),
		PollMS:       f.poll.Seconds() * 1e3,
		MaxScanMS:    round(tr.maxScan.Seconds()*1e3, 2),
		FormedS:      round(formed.Seconds(), 2),
	}
	res.BytesPerES, res.IdleBytesES, res.PacketsES = round(res.BytesPerES, 0), round(res.IdleBytesES, 0), round(res.PacketsES, 1)
	res.P50MS, res.P99MS, res.MaxMS, res.PairP50MS, res.PairP99MS = tr.percentiles()
	if f.churn == 0 {
		cg, cov := ratio(gossipComplete, total), ratio(gossipPairs, total*len(es))
		res.CompleteByG, res.CoverageG = &cg, &cov
	} else {
		fill, restarts := tr.refillMax()
		res.churnResult = &churnResult{Restarts: restarts, ChurnOver: f.churnOver.Seconds(), RefillMaxMS: fill,
			SlowestRestarted: slices.Contains(churned, tr.slowest())}
	}
	for _, e := range incs {
		res.DirBatches += e.Metric("fenec_entry_gossip_direct_batches_sent_total")
		res.DirPackets += e.Metric("fenec_entry_gossip_direct_packets_sent_total")
		res.Relayed += e.Metric("fenec_entry_gossip_relayed_batches_total")
		res.Bundles += e.Metric("fenec_entry_gossip_relay_batches_sent_total")
		res.AckResent += e.Metric("fenec_entry_gossip_acked_resent_total")
		res.AckGivenUp += e.Metric("fenec_entry_gossip_acked_given_up_total", "reason", "tries") +
			e.Metric("fenec_entry_gossip_acked_given_up_total", "reason", "queue_full")
		res.AcksSent += e.Metric("fenec_entry_gossip_acks_sent_total", "result", "sent")
		res.Fallbacks += e.Metric("fenec_entry_gossip_relay_fallbacks_total")
		res.BudgetDef += e.Metric("fenec_entry_gossip_direct_budget_deferred_total")
		res.DirDup += e.Metric("fenec_entry_gossip_direct_packets_received_total", "result", "duplicate")
		res.Dropped += e.Metric("fenec_entry_gossip_events_dropped_total")
		res.PendDropped += e.Metric("fenec_entry_gossip_pending_dropped_total")
		res.Repaired += e.Metric("fenec_entry_sync_applied_total", "via", "repair", "type", "home")
		res.RepairRnds += e.Metric("fenec_entry_repair_rounds_total")
	}
	res.ProbeMS, res.ProbeTmoMS, res.SuspMult = probeSettings(f)
	if f.failDetect > 0 {
		res.FailFirstS, res.FailAllS = failureDetection(c, f.failDetect)
	}
	if res.DirBatches > 0 {
		res.HomesPerB = round(float64(total)/res.DirBatches, 1)
	}
	return res, nil
}

// probeSettings are the failure detector's settings f runs with.
func probeSettings(f flags) (intervalMS, timeoutMS float64, mult int) {
	m := f.tune.Membership
	return float64(m.ProbeInterval.Milliseconds()), float64(m.ProbeTimeout.Milliseconds()), m.SuspicionMult
}

func ratio(a, b int) float64 { return round(float64(a)/float64(b), 4) }

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "gossipsim: "+format+"\n", a...)
}

// tenantNames returns n distinct names shaped like real tenant slugs (two words and a
// number, 12-24 bytes), which compress as real ones do.
func tenantNames(rng *rand.Rand, n int) []string {
	words := []string{"amber", "brisk", "cedar", "delta", "ember", "fjord", "gale", "harbor",
		"iris", "juniper", "kestrel", "lumen", "maple", "nimbus", "onyx", "pine", "quartz",
		"raven", "sable", "tundra", "umber", "vale", "willow", "zephyr"}
	out := make([]string, n)
	seen := make(map[string]bool, n)
	for k := range out {
		for {
			s := fmt.Sprintf("%s-%s-%d", words[rng.IntN(len(words))], words[rng.IntN(len(words))], rng.IntN(100000))
			if !seen[s] {
				seen[s] = true
				out[k] = s
				break
			}
		}
	}
	return out
}

// failureDetection cuts the last entry off the network (its host lost power) and returns how
// long until the first and until every other entry listed it failed (nil: not within limit).
func failureDetection(c *simcluster.Cluster, limit time.Duration) (first, all *float64) {
	es := c.Entries()
	victim := len(es) - 1
	name := es[victim].Name
	logf("killing %s: waiting up to %v until every entry sees it failed", name, limit)
	c.Kill(victim)
	t0 := time.Now()
	seen := make([]bool, victim)
	left := victim
	for left > 0 && time.Since(t0) < limit {
		for i, e := range es[:victim] {
			if seen[i] {
				continue
			}
			for _, m := range e.Gossip.Members() {
				if m.Name == name && m.State == "failed" {
					seen[i] = true
					left--
					if first == nil {
						v := round(time.Since(t0).Seconds(), 2)
						first = &v
					}
				}
			}
		}
		time.Sleep(20 * time.Millisecond) // polling the member lists
	}
	if left == 0 {
		v := round(time.Since(t0).Seconds(), 2)
		all = &v
	}
	return first, all
}

// sentBytes is what the entries' own counters say they sent through the gossip address, of
// one transport (packet, stream), summed.
func sentBytes(es []*simcluster.Entry, transport string) float64 {
	var n float64
	for _, e := range es {
		n += e.Metric("fenec_entry_gossip_bytes_total", "transport", transport, "dir", "sent")
	}
	return n
}
