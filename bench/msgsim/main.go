// Command msgsim is a message-level simulator of fenec-entry's gossip: direct home batches
// with their copies, serf's epidemic for marks (and homes with -strategy serf), memberlist's
// probes, repair rounds, per-link latency and loss, the origin's publisher and its bounds. No
// memberlist runs: each entry is a few hundred bytes of state, so thousands of entries run on
// one core. One goroutine, a queue of timed events, deterministic by -seed. It prints one
// JSON line on stdout with the fields of bench/gossipsim where they mean the same. See
// README.md.
//
//	go run ./bench/msgsim -nodes 1000 -rate 500 -duration 10s
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
)

func main() {
	c := DefaultConfig()
	flag.IntVar(&c.Nodes, "nodes", c.Nodes, "entries in the cluster")
	flag.Float64Var(&c.Rate, "rate", c.Rate, "new homes per second, cluster-wide, each learned at a random entry")
	flag.DurationVar(&c.Duration, "duration", c.Duration, "how long homes are learned (the window bytes are measured over)")
	flag.DurationVar(&c.Drain, "drain", c.Drain, "time after the learning before coverage_gossip is taken")
	flag.DurationVar(&c.Settle, "settle", c.Settle, "then at most this long for the last pairs (repair)")
	flag.DurationVar(&c.MinLat, "min-latency", c.MinLat, "one-way latency, lower bound (uniform)")
	flag.DurationVar(&c.MaxLat, "max-latency", c.MaxLat, "one-way latency, upper bound")
	flag.BoolVar(&c.LinkLatency, "link-latency", c.LinkLatency, "one fixed latency per ordered link instead of a draw per packet (memnet draws per packet)")
	flag.Float64Var(&c.Loss, "loss", c.Loss, "UDP packet loss probability")
	flag.Uint64Var(&c.Seed, "seed", c.Seed, "seed of every draw")
	flag.DurationVar(&c.SendCost, "send-cost", c.SendCost, "sender time per UDP packet, writes serialised (0: none, as memnet)")
	flag.StringVar(&c.Strategy, "strategy", c.Strategy, "homes travel: direct (straight to every member), relay (through relays, as gossip/ does with -ack -relay-ack -nack=false), rule (one or the other by gossip/'s relay rule, with the same flags), serf (user events, the design before direct)")
	flag.DurationVar(&c.FlushInterval, "flush-interval", c.FlushInterval, "publisher FlushInterval")
	flag.DurationVar(&c.MaxFlushInterval, "max-flush-interval", c.MaxFlushInterval, "publisher MaxFlushInterval")
	flag.IntVar(&c.MaxEventsPerFlush, "max-events-per-flush", c.MaxEventsPerFlush, "publisher MaxEventsPerFlush")
	flag.IntVar(&c.MaxPending, "max-pending", c.MaxPending, "publisher MaxPending")
	flag.IntVar(&c.Copies, "direct-copies", c.Copies, "DirectCopies (also the relay strategy's first hop)")
	flag.DurationVar(&c.CopyInterval, "direct-copy-interval", c.CopyInterval, "DirectCopyInterval")
	flag.DurationVar(&c.GossipInterval, "gossip-interval", c.GossipInterval, "memberlist GossipInterval")
	flag.IntVar(&c.GossipNodes, "gossip-nodes", c.GossipNodes, "memberlist GossipNodes")
	flag.IntVar(&c.RetransmitMult, "retransmit-mult", c.RetransmitMult, "memberlist RetransmitMult")
	flag.DurationVar(&c.ProbeInterval, "probe-interval", c.ProbeInterval, "memberlist ProbeInterval")
	flag.DurationVar(&c.ProbeTimeout, "probe-timeout", c.ProbeTimeout, "memberlist ProbeTimeout")
	flag.DurationVar(&c.PushPull, "push-pull", c.PushPull, "memberlist PushPullInterval before its scaling with N (0: push/pull not modelled)")
	flag.IntVar(&c.PushPullMemberBytes, "push-pull-member-bytes", c.PushPullMemberBytes, "bytes each member adds to a push/pull's state")
	flag.DurationVar(&c.Repair, "repair", c.Repair, "repair interval (jittered ±25 %)")
	flag.DurationVar(&c.RepairFrom, "repair-from", c.RepairFrom, "when repair loops start; negative: after -duration + -drain, as gossipsim")
	flag.IntVar(&c.TableHomes, "table", c.TableHomes, "homes every table already holds (they cost repair pull bytes)")
	flag.DurationVar(&c.RepairSettle, "repair-settle", c.RepairSettle, "repair digests leave out homes younger than this (0: none, the design before it)")
	flag.IntVar(&c.RepairMaxBuckets, "repair-max-buckets", c.RepairMaxBuckets, "buckets one repair round pulls at most (0: all that differ)")
	flag.IntVar(&c.Budget, "budget", c.Budget, "direct send budget, bytes a second to each member (0: none, the design before it)")
	flag.Float64Var(&c.MarkRate, "mark-rate", c.MarkRate, "region marks per second, cluster-wide, over serf's epidemic")
	flag.Float64Var(&c.Churn, "churn", c.Churn, "membership messages per second, cluster-wide, over serf's epidemic (background bytes)")
	flag.IntVar(&c.DirectLimit, "direct-limit", c.DirectLimit, "rule: the relay rule's DirectLimit, bytes a second (negative: never relays)")
	flag.IntVar(&c.Groups, "groups", c.Groups, "relay: groups (0: ceil(2 sqrt(nodes)), as gossip/)")
	flag.IntVar(&c.RelayShards, "relay-shards", c.RelayShards, "relay: relays per group, each for a share of the tenants (0: every member, for its share)")
	flag.DurationVar(&c.RelayFlush, "relay-flush", c.RelayFlush, "relay: how long a relay aggregates (at least)")
	flag.Float64Var(&c.RelayPacketRate, "relay-packet-rate", c.RelayPacketRate, "relay: the relay packets a member receives a second at most: a relay aggregates at least group members / this (0: -relay-flush alone)")
	flag.IntVar(&c.Hop1Copies, "hop1-copies", c.Hop1Copies, "relay: copies of the origin's packets to the relays, -direct-copy-interval apart")
	flag.DurationVar(&c.AckTimeout, "ack-timeout", c.AckTimeout, "acked batches: the wait for acks before a batch is sent again (0: 2 x max latency + 50 ms)")
	flag.IntVar(&c.RelayCopies, "relay-copies", c.RelayCopies, "relay: copies of a relay's batches to its group")
	flag.BoolVar(&c.Nack, "nack", c.Nack, "relay: sequence numbers, heartbeats and NACKs on the relay hop")
	flag.BoolVar(&c.Ack, "ack", c.Ack, "the origin's batches are acked and sent again where no ack came, instead of blind copies")
	flag.BoolVar(&c.RelayAck, "relay-ack", c.RelayAck, "relay: with -ack, the relay's batches are acked by its group too (use with -nack=false)")
	flag.Parse()
	if err := c.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "msgsim:", err)
		os.Exit(2)
	}
	b, _ := json.Marshal(New(c).Run())
	fmt.Println(string(b))
}

func (c Config) validate() error {
	switch {
	case c.Nodes < 2:
		return fmt.Errorf("-nodes: need at least 2")
	case c.Rate <= 0 || c.Duration <= 0:
		return fmt.Errorf("-rate and -duration: need positive values")
	case c.MinLat < 0 || c.MaxLat < c.MinLat:
		return fmt.Errorf("-min-latency, -max-latency: need 0 <= min <= max")
	case c.Loss < 0 || c.Loss >= 1:
		return fmt.Errorf("-loss: need 0 <= loss < 1")
	case c.Strategy != "direct" && c.Strategy != "relay" && c.Strategy != "rule" && c.Strategy != "serf":
		return fmt.Errorf("-strategy: %q; need direct, relay, rule or serf", c.Strategy)
	case c.FlushInterval <= 0 || c.MaxFlushInterval < c.FlushInterval || c.GossipInterval <= 0 ||
		c.ProbeInterval <= 0 || c.Repair <= 0 || c.CopyInterval <= 0 || c.RelayFlush <= 0:
		return fmt.Errorf("intervals: need positive values, -max-flush-interval >= -flush-interval")
	case c.Copies < 1 || c.RelayCopies < 1 || c.MaxEventsPerFlush < 1 || c.MaxPending < 1 ||
		c.GossipNodes < 1 || c.RetransmitMult < 1 || c.RelayShards < 0 || c.Hop1Copies < 1:
		return fmt.Errorf("counts: need at least 1 (-relay-shards: at least 0)")
	case c.RelayPacketRate < 0 || c.AckTimeout < 0:
		return fmt.Errorf("-relay-packet-rate, -ack-timeout: need 0 or more")
	}
	return nil
}
