package main

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

func TestQueueOrdersByTimeThenByPush(t *testing.T) {
	var q eventQueue
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		q.push(event{at: rng.Int64N(100), id: int32(i)})
	}
	prev := event{at: -1}
	for n := 0; q.len() > 0; n++ {
		e := q.pop()
		if e.at < prev.at || (e.at == prev.at && e.seq <= prev.seq) {
			t.Fatalf("pop %d: (%d, seq %d) after (%d, seq %d)", n, e.at, e.seq, prev.at, prev.seq)
		}
		if e.at == prev.at && e.id <= prev.id {
			t.Fatalf("pop %d: equal times out of push order: id %d after %d", n, e.id, prev.id)
		}
		prev = e
	}
}

// small is a run that takes well under a second.
func small(strategy string) Config {
	c := DefaultConfig()
	c.Nodes, c.Rate, c.Duration, c.Drain, c.Settle = 20, 50, 2*time.Second, time.Second, 10*time.Second
	c.Strategy = strategy
	c.Groups = 4
	return c
}

func run(t *testing.T, c Config) (*Sim, *Result) {
	t.Helper()
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	s := New(c)
	return s, s.Run()
}

func TestDeterministicBySeed(t *testing.T) {
	for _, st := range []string{"direct", "relay", "serf"} {
		c := small(st)
		c.MarkRate = 2
		_, a := run(t, c)
		_, b := run(t, c)
		a.WallS, b.WallS = 0, 0
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two runs of seed 1 differ:\n%+v\n%+v", st, a, b)
		}
		c.Seed = 2
		_, d := run(t, c)
		d.WallS = 0
		if reflect.DeepEqual(a, d) {
			t.Errorf("%s: seeds 1 and 2 gave the same run", st)
		}
	}
}

func TestLosslessReachesEveryEntryWithoutRepair(t *testing.T) {
	for _, st := range []string{"direct", "relay", "serf"} {
		c := small(st)
		c.Loss = 0
		c.MarkRate = 2
		_, r := run(t, c)
		if r.HomesLost != 0 || r.CompleteG != 1 || r.CoverageG != 1 || r.Repaired != 0 {
			t.Errorf("%s: lost %d, complete by gossip %v, coverage %v, repaired %d; want 0, 1, 1, 0",
				st, r.HomesLost, r.CompleteG, r.CoverageG, r.Repaired)
		}
		if r.Marks == 0 || r.MarkMaxMS == nil {
			t.Errorf("%s: %d marks, max %v: every mark should reach every entry", st, r.Marks, r.MarkMaxMS)
		}
		if r.P99MS == nil || *r.P99MS > 2000 {
			t.Errorf("%s: p99 %v ms", st, r.P99MS)
		}
	}
}

func TestLossIsCarriedByRepair(t *testing.T) {
	c := small("direct")
	c.Copies = 1
	c.Repair, c.RepairFrom = time.Second, 0
	c.Loss = 0
	_, clean := run(t, c)
	c.Loss = 0.2
	_, lossy := run(t, c)
	if clean.Repaired != 0 || clean.Pulled == 0 && clean.InSync == 0 {
		t.Errorf("lossless: %d repaired in %d rounds; want 0 repaired and some rounds", clean.Repaired, clean.Rounds)
	}
	if lossy.Repaired == 0 || lossy.HomesLost != 0 || lossy.CoverageG >= 1 {
		t.Errorf("20 %% loss, one copy: %d repaired, %d lost, coverage by gossip %v; want repair to carry the gap",
			lossy.Repaired, lossy.HomesLost, lossy.CoverageG)
	}
	if lossy.Records <= clean.Records {
		t.Errorf("repair sent %d records with loss, %d without", lossy.Records, clean.Records)
	}
}

// NACKs on the relay hop, the alternative weighed against acks, with one relay a group that
// sends often (a sparse relay's last batch is seen missing only by its heartbeats).
func TestNacksRecoverRelayLossWithoutRepair(t *testing.T) {
	c := small("relay")
	c.RelayShards, c.RelayFlush = 1, 100*time.Millisecond
	c.Loss = 0.05
	c.Copies = 3
	c.RelayCopies = 1
	c.RepairFrom = time.Hour
	_, r := run(t, c)
	if r.HomesLost != 0 || r.Nacks == 0 || r.Resent == 0 {
		t.Errorf("5 %% loss: %d homes lost, %d NACKs, %d resent; want 0 lost and some NACKs", r.HomesLost, r.Nacks, r.Resent)
	}
}

func TestBytesMatchMessages(t *testing.T) {
	c := small("direct")
	c.Loss = 0
	c.Duration = 4 * time.Second
	s, r := run(t, c)
	n := c.Nodes - 1
	if r.DirPackets != r.Batches*c.Copies*n || r.Dups != r.Batches*(c.Copies-1)*n {
		t.Errorf("%d batches: %d direct packets, %d duplicates; want %d and %d",
			r.Batches, r.DirPackets, r.Dups, r.Batches*c.Copies*n, r.Batches*(c.Copies-1)*n)
	}
	homes := 0
	for _, b := range s.batches {
		homes += len(b.homes)
		if b.bytes != directBytes(len(b.homes)) {
			t.Fatalf("a batch of %d homes is %d B; the codec gives %d", len(b.homes), b.bytes, directBytes(len(b.homes)))
		}
	}
	if homes != r.Homes {
		t.Errorf("batches carried %d homes; %d were learned", homes, r.Homes)
	}
	// Every byte sent in the window is a direct packet or a probe's.
	var sent, direct, probes int64
	for i := range s.nodes {
		sent += s.nodes[i].udpSent
	}
	for _, b := range s.batches {
		if s.homes[b.homes[0]].t0 < ns(c.Duration)-ns(time.Second) { // all its copies left in the window
			direct += int64(b.bytes * c.Copies * n)
		}
	}
	probes = int64(len(s.probes)) * (pingBytes + ackBytes) * (1 + 4*indirectChecks)
	if sent < direct || sent > direct+probes+int64(r.Batches*c.Copies*n*directBytes(directCapacity)/4) {
		t.Errorf("window sent %d B: direct (whole batches) %d, probes at most %d", sent, direct, probes)
	}
	// The field is rounded to whole bytes a second: within half a byte per entry per second.
	slack := int64(float64(c.Nodes) * c.Duration.Seconds() / 2)
	if got := int64(r.BytesES * float64(c.Nodes) * c.Duration.Seconds()); got < sent-slack || got > sent+slack {
		t.Errorf("gossip_bytes_per_entry_s × nodes × s = %d; the entries sent %d", got, sent)
	}
}

func TestBackpressureWidensSerfFlushes(t *testing.T) {
	c := small("serf")
	c.Rate = 400
	c.RepairFrom = -1
	_, r := run(t, c)
	if r.MaxQueue < c.QueueHigh || r.MaxFlushMS <= 75 || r.HomesPerB <= 2 {
		t.Errorf("serf homes at 400/s: queue %d, flush interval up to %v ms, %.1f homes a batch; want serf's queue past QueueHigh to widen flushes",
			r.MaxQueue, r.MaxFlushMS, r.HomesPerB)
	}
}

func TestAcksRecoverLossWithoutCopiesOrRepair(t *testing.T) {
	for _, st := range []string{"direct", "relay"} {
		c := small(st)
		c.Loss = 0.05
		c.Ack = true
		c.RepairFrom = time.Hour
		_, r := run(t, c)
		if r.HomesLost != 0 || r.Acks == 0 || r.Resent == 0 || r.Dups > r.Resent {
			t.Errorf("%s, 5 %% loss, acked: %d homes lost, %d acks, %d sent again, %d duplicates; want 0 lost, no blind copies",
				st, r.HomesLost, r.Acks, r.Resent, r.Dups)
		}
	}
}

// The built design (gossip/internal/spread/relay.go): acks on both hops, no NACKs, no copies. Loss
// on the relay hop is recovered by acks alone: nothing lost, no NACK sent, acks and resends from
// the relays too.
func TestRelayAcksRecoverBothHops(t *testing.T) {
	c := small("relay")
	c.Loss = 0.05
	c.Ack, c.RelayAck, c.Nack = true, true, false
	c.RepairFrom = time.Hour
	s, r := run(t, c)
	relayAcks := 0
	for _, w := range s.waits {
		if w.kind == evRelayData {
			relayAcks++
		}
	}
	if r.HomesLost != 0 || r.Nacks != 0 || r.Acks == 0 || relayAcks == 0 || r.Dups > r.Resent {
		t.Errorf("5 %% loss, acks on both hops: %d homes lost, %d NACKs, %d acks, %d relay packets awaiting acks, %d resent, %d duplicates",
			r.HomesLost, r.Nacks, r.Acks, relayAcks, r.Resent, r.Dups)
	}
}

// With a budget, what an origin sends each member stays within two budgets' worth in any
// second (its rate and the second saved up), where without one it does not; what waits is
// carried by repair.
func TestBudgetBoundsTheOrigin(t *testing.T) {
	c := small("direct")
	c.Rate = 400
	c.Repair, c.RepairFrom = time.Second, 0
	c.Budget = 0
	_, free := run(t, c)
	c.Budget = 500
	_, bounded := run(t, c)
	perMember := func(r *Result) float64 { return float64(r.PeakBytes) / float64(c.Nodes-1) }
	if perMember(bounded) > 2*float64(c.Budget) {
		t.Errorf("peak %v B/s to a member with a %d B/s budget", perMember(bounded), c.Budget)
	}
	if perMember(free) <= 2*float64(c.Budget) {
		t.Errorf("without a budget the peak is %v B/s a member: the test does not exercise the budget", perMember(free))
	}
	if bounded.BudgetDef == 0 || bounded.HomesLost != 0 {
		t.Errorf("budget deferred %d flushes, %d homes lost: want some, and none lost after repair", bounded.BudgetDef, bounded.HomesLost)
	}
}

// Homes in flight are left out of repair digests: a lossless run with repair rounds during the
// learning pulls nothing with the cutoff, and pulls buckets without it.
func TestRepairSettleLeavesInFlightHomes(t *testing.T) {
	c := small("direct")
	c.Loss = 0
	c.Rate = 400
	c.Repair, c.RepairFrom = 500*time.Millisecond, 0
	_, settled := run(t, c)
	c.RepairSettle = 0
	_, raw := run(t, c)
	if settled.Repaired != 0 || settled.Pulled != 0 {
		t.Errorf("with the cutoff: %d pulls, %d repaired; want none", settled.Pulled, settled.Repaired)
	}
	if raw.Pulled == 0 {
		t.Error("without the cutoff no round pulled: the test does not exercise it")
	}
}

// Every member relays its share (RelayShards 0, the built design): each member of a group sends
// relay batches, each within half to twice the group's mean; with one relay a group
// (RelayShards 1) one member a group does it all.
func TestEveryMemberRelaysItsShare(t *testing.T) {
	c := small("relay")
	c.Nodes, c.Groups, c.Rate = 40, 4, 400
	c.Ack, c.RelayAck, c.Nack = true, true, false
	s, _ := run(t, c)
	for g, ms := range s.relays.members {
		total := 0
		for _, i := range ms {
			total += len(s.nodes[i].relay.sent)
		}
		mean := float64(total) / float64(len(ms))
		for _, i := range ms {
			if n := float64(len(s.nodes[i].relay.sent)); n < mean/2 || n > 2*mean {
				t.Errorf("group %d: entry %d sent %.0f relay batches, the group's mean %.1f", g, i, n, mean)
			}
		}
	}
	c.RelayShards = 1
	s, _ = run(t, c)
	for g, ms := range s.relays.members {
		relays := 0
		for _, i := range ms {
			if len(s.nodes[i].relay.sent) > 0 {
				relays++
			}
		}
		if relays != 1 {
			t.Errorf("one relay a group: group %d has %d members sending relay batches", g, relays)
		}
	}
}

// A relay packs for RelayFlush, or for group members / RelayPacketRate seconds when that is
// longer.
func TestRelayFlushGrowsWithTheGroup(t *testing.T) {
	for _, row := range []struct {
		nodes, groups int
		rate          float64
		want          time.Duration
	}{
		{40, 4, 40, 500 * time.Millisecond}, // groups of 10: 250 ms, under RelayFlush
		{40, 4, 10, time.Second},            // 10 / 10
		{40, 2, 20, time.Second},            // groups of 20
		{40, 1, 20, 2 * time.Second},        // one group of 40
		{40, 1, 0, 500 * time.Millisecond},  // no bound
	} {
		c := small("relay")
		c.Nodes, c.Groups, c.RelayPacketRate = row.nodes, row.groups, row.rate
		s := New(c)
		if got := time.Duration(s.relayFlushAfter(0)); got != row.want {
			t.Errorf("%d entries in %d groups, %v packets/s: a relay packs for %v, want %v", row.nodes, row.groups, row.rate, got, row.want)
		}
	}
}

// memberlist's push/pull interval grows with the cluster (util.go pushPullScale), and each
// entry sends its state once for the exchanges it starts and once for those it is picked for:
// 2 x N x PushPullMemberBytes an interval, on average.
func TestPushPull(t *testing.T) {
	for _, row := range []struct {
		n    int
		want time.Duration
	}{{10, 30 * time.Second}, {32, 30 * time.Second}, {33, 60 * time.Second}, {100, 90 * time.Second}, {1000, 180 * time.Second}, {5000, 270 * time.Second}} {
		if got := pushPullScale(30*time.Second, row.n); got != row.want {
			t.Errorf("%d members: push/pull every %v, want %v", row.n, got, row.want)
		}
	}
	c := small("direct")
	c.Nodes, c.Rate, c.Duration = 100, 0.1, 900*time.Second
	_, r := run(t, c)
	want := 2 * 100 * float64(c.PushPullMemberBytes) / 90
	if r.PPSent < 0.9*want || r.PPSent > 1.1*want {
		t.Errorf("push/pull sent %v bytes an entry a second, want about %.0f", r.PPSent, want)
	}
	c.PushPull = 0
	if _, r = run(t, c); r.PPSent != 0 {
		t.Errorf("push/pull off, and it sent %v", r.PPSent)
	}
}

// The relay rule (-strategy rule): homes go straight while the fleet's rate is under the limit
// and an origin's batch fits its own budget; through relays above the limit, and a batch
// whose straight cost is more than its origin's budget holds goes through relays too.
func TestRuleStraightWhileItPays(t *testing.T) {
	c := small("rule")
	c.Ack, c.RelayAck, c.Nack = true, true, false
	c.Rate = 20 // 20 x 89 x 3 = 5.3 KB/s, under 20 KB/s
	_, r := run(t, c)
	if r.OverBudget != 0 || r.RelayPkts != 0 || r.HomesLost != 0 {
		t.Errorf("under the limit: %d batches over budget, %d relay packets, %d lost; want all straight", r.OverBudget, r.RelayPkts, r.HomesLost)
	}
	c.Rate = 200 // 53 KB/s
	_, r = run(t, c)
	if r.OverBudget != 0 || r.RelayPkts == 0 || r.HomesLost != 0 {
		t.Errorf("over the limit: %d over budget, %d relay packets, %d lost; want relays", r.OverBudget, r.RelayPkts, r.HomesLost)
	}
	// 1 home a second is 267 B/s, under a 300 B/s limit; a home straight costs 19 x 84 x 3 =
	// 4.8 KB, and the own budget holds 10 x 450 B.
	c.Rate, c.DirectLimit = 1, 300
	_, r = run(t, c)
	if r.OverBudget == 0 || r.RelayPkts == 0 || r.HomesLost != 0 {
		t.Errorf("a small own budget: %d over budget, %d relay packets, %d lost; want some through relays", r.OverBudget, r.RelayPkts, r.HomesLost)
	}
}
