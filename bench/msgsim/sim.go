package main

import (
	"math"
	"math/rand/v2"
	"time"
)

// Config is one simulated run. Durations are simulated time.
type Config struct {
	Nodes    int
	Rate     float64       // new homes a second, cluster-wide, each at a random entry
	Duration time.Duration // how long homes are learned; bytes are measured over this window
	Drain    time.Duration // gossip time after the last learning before coverage_gossip is taken
	Settle   time.Duration // then, how long the run may go on for stragglers (repair)

	MinLat, MaxLat time.Duration // one-way latency, uniform
	LinkLatency    bool          // each ordered link has one latency drawn once; else each packet draws
	Loss           float64       // packet loss probability (UDP); TCP legs are lossless
	Seed           uint64
	SendCost       time.Duration // the sender's time per UDP packet (its writes are serialised); 0: none

	Strategy string // "direct", "relay", "rule" (gossip/ picks one of the two by the relay rule: rule.go), "serf"

	// The publisher (gossip/internal/spread/publish.go, defaults.go).
	FlushInterval, MaxFlushInterval time.Duration
	MaxEventsPerFlush, MaxPending   int
	QueueHigh, QueueLow             int
	Copies                          int
	CopyInterval                    time.Duration

	// memberlist and serf.
	GossipInterval              time.Duration
	GossipNodes, RetransmitMult int
	UDPBuffer                   int
	ProbeInterval, ProbeTimeout time.Duration
	// PushPull is memberlist's PushPullInterval (gossip's 30 s), before its scaling with N;
	// 0: not modelled. PushPullMemberBytes is what each member adds to the state an entry
	// sends (pushpull.go).
	PushPull            time.Duration
	PushPullMemberBytes int

	// Repair (gossip/internal/tablesync/repair.go): every Repair, jittered ±25 %, each entry's loop
	// at a random phase from RepairFrom on (negative: all started after Duration+Drain, as
	// gossipsim does). TableHomes: homes every table holds already (they cost pull bytes, nothing
	// else).
	Repair     time.Duration
	RepairFrom time.Duration
	TableHomes int
	// RepairSettle: homes younger than this at a round are left out of both digests (gossip's,
	// in flight); 0: none (the design before it). RepairMaxBuckets: the buckets one round pulls
	// at most, from a cursor that moves on; 0: every differing one.
	RepairSettle     time.Duration
	RepairMaxBuckets int

	// Budget bounds the bytes an origin's direct batches send to each member a second, with a
	// second's worth of burst (gossip's DirectBudget); while homes wait for it the extra copies
	// are skipped. 0: no budget (the design before it).
	Budget int

	MarkRate float64 // region marks a second, cluster-wide, over serf's epidemic
	Churn    float64 // membership messages (alive) a second, cluster-wide, as background

	// DirectLimit is the relay rule's limit (rule.go; gossip's DirectLimit); negative: never.
	DirectLimit int

	// The relay strategy (relay.go).
	Groups      int           // 0: ceil(2 sqrt(Nodes)), as gossip/ does
	RelayShards int           // relays per group, each for a share of the tenants; 0: every member relays its share of the tenants (by tenant hash)
	RelayFlush  time.Duration // how long a relay aggregates (at least)
	// RelayPacketRate bounds the relay packets a member receives a second: a relay then
	// aggregates at least (group members) / RelayPacketRate seconds; 0: RelayFlush alone.
	RelayPacketRate float64
	// Hop1Copies: copies of an origin's packets to the relays, CopyInterval apart (with
	// Ack, acks and resends too); 1: one.
	Hop1Copies   int
	RelayCopies  int           // copies of a relay's packets to its group
	Nack         bool          // sequence numbers, heartbeats and NACKs on the relay hop
	HeartbeatGap time.Duration // the first heartbeat after a relay's last packet

	// Ack: the origin sends each batch once and again (every 2 x MaxLat + 50 ms, at most 5
	// times) to the peers that did not ack it, instead of Copies blind copies. Direct
	// batches in the direct strategy, the origin's batches (own group and relays) in relay.
	Ack bool
	// AckTimeout is how long an acked batch waits for its acks before it is sent again
	// (gossip's RelayAckTimeout); 0: 2 x MaxLat + 50 ms.
	AckTimeout time.Duration
	// RelayAck: a relay's batches are acked by its group and sent again where no ack came
	// (with Ack), instead of copies or NACKs.
	RelayAck bool
}

// DefaultConfig is gossip's production defaults (gossip/config.go) and gossipsim's network.
func DefaultConfig() Config {
	return Config{
		Nodes: 10, Rate: 50, Duration: 10 * time.Second, Drain: 5 * time.Second, Settle: 90 * time.Second,
		MinLat: 10 * time.Millisecond, MaxLat: 150 * time.Millisecond, Loss: 0.01, Seed: 1,
		Strategy:      "direct",
		FlushInterval: 75 * time.Millisecond, MaxFlushInterval: 2 * time.Second,
		MaxEventsPerFlush: 4, MaxPending: 4096, QueueHigh: 32, QueueLow: 8,
		Copies: 3, CopyInterval: 50 * time.Millisecond,
		GossipInterval: 100 * time.Millisecond, GossipNodes: 4, RetransmitMult: 4, UDPBuffer: 1372,
		ProbeInterval: 800 * time.Millisecond, ProbeTimeout: 400 * time.Millisecond,
		PushPull: 30 * time.Second, PushPullMemberBytes: pushPullMemberBytes,
		Repair: 30 * time.Second, RepairFrom: 0, RepairSettle: 2 * time.Second, RepairMaxBuckets: 64,
		Budget: 20_000, DirectLimit: 20_000,
		RelayShards: 0, RelayFlush: 500 * time.Millisecond, RelayPacketRate: 40, RelayCopies: 1, Nack: true, Hop1Copies: 1,
		AckTimeout:   400 * time.Millisecond,
		HeartbeatGap: 100 * time.Millisecond,
	}
}

// How a (home, entry) pair was reached.
const (
	viaOrigin uint8 = iota
	viaDirect
	viaRelay
	viaGossip
	viaRepair
)

// maxDirectQueue bounds an origin's batches waiting for their next copy
// (gossip/internal/spread/publish.go).
const maxDirectQueue = 1024

type home struct {
	origin   int32
	nameLen  uint8
	bucket   uint8
	repaired bool // some pair came by repair
	t0, last int64
	hash     uint64
	missing  int32
	held     []uint64 // bitset over entries
}

type batch struct {
	origin int32
	homes  []int32
	bytes  int      // the sealed packet
	got    []uint64 // entries that received it (its copies after are duplicates)
	acked  []uint64 // with Ack: entries whose ack came back
}

// copyEntry is a batch with copies still to send (gossip/internal/spread/direct.go directCopy).
type copyEntry struct {
	node, batch int32
	kind        evKind  // what the copies deliver
	peers       []int32 // nil: every other entry
	left        int
	dropped     bool
}

type node struct {
	// publisher
	pending      []int32 // homes waiting for a flush, oldest first
	pendingBytes int
	marks        []int32 // marks waiting for a flush
	interval     int64
	lastFlush    int64
	copyQ        []int32 // copy entries outstanding, oldest first
	busy         int64   // when its last write is done (SendCost)
	tokens       float64 // the direct send budget's bytes (Budget)
	tokensAt     int64
	backlog      bool  // homes wait for the budget: extra copies are skipped
	pullCursor   uint8 // the bucket a capped repair pull starts from

	// serf: broadcasts still to retransmit
	bq []bcast

	// repair digest over the simulated homes it holds
	sums    [256]uint64
	counts  [256]int32
	markSum uint64

	probeOrder []int32
	probeNext  int

	relay relayNode

	// accounting, over the learning window
	udpSent, udpRecv, tcpSent, tcpRecv int64
	own                                float64 // the rule's own budget (rule.go), bytes
	ownAt                              int64   // and when it was last filled
	ppSent, ppRecv                     int64   // push/pull (pushpull.go)
	pktSent, pktRecv                   int64
	winIdx                             int64
	winPkts, winBytes                  int64
}

// Sim is one run: a queue of timed events on one goroutine, deterministic by Config.Seed.
type Sim struct {
	ppRng *rand.Rand // push/pull's draws (pushpull.go)
	cfg   Config
	rng   *rand.Rand
	q     eventQueue
	now   int64
	words int // bitset words per entry set

	nodes   []node
	homes   []home
	batches []batch
	copies  []copyEntry
	buckets [256][]int32 // simulated homes by digest bucket

	msgs    []message // serf broadcasts: marks, homes events, membership
	packets []gossipPacket
	probes  []probe
	rounds  []repairRound
	waits   []ackWait
	relays  relayState

	st stats
}

func ns(d time.Duration) int64 { return int64(d) }

// New prepares a run; Run runs it.
func New(cfg Config) *Sim {
	s := &Sim{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6d736773696d)), words: (cfg.Nodes + 63) / 64}
	s.nodes = make([]node, cfg.Nodes)
	s.st.init(cfg)
	total := int(math.Ceil(cfg.Rate * cfg.Duration.Seconds()))
	s.homes = make([]home, total)
	for k := range s.homes {
		name := tenantName(s.rng)
		h := &s.homes[k]
		h.nameLen = uint8(len(name))
		h.bucket = uint8(s.rng.IntN(256))
		h.hash = s.rng.Uint64()
		h.origin = int32(s.rng.IntN(cfg.Nodes))
		h.t0 = int64(float64(k) / cfg.Rate * 1e9)
		h.missing = int32(cfg.Nodes)
		h.held = make([]uint64, s.words)
		s.q.push(event{at: h.t0, kind: evLearn, node: h.origin, id: int32(k)})
	}
	for i := range s.nodes {
		n := &s.nodes[i]
		n.interval = ns(cfg.FlushInterval)
		n.lastFlush = math.MinInt64 / 2
		s.q.push(event{at: s.rng.Int64N(ns(cfg.FlushInterval)), kind: evTick, node: int32(i)})
		s.q.push(event{at: s.rng.Int64N(ns(cfg.GossipInterval)), kind: evGossip, node: int32(i)})
		s.q.push(event{at: s.rng.Int64N(ns(cfg.ProbeInterval)), kind: evProbe, node: int32(i)})
		// Repair loops that started together (gossipsim starts them after the drain) run
		// their first round after one jittered interval; loops in a steady fleet are at
		// random phases.
		first := ns(cfg.RepairFrom) + s.rng.Int64N(ns(cfg.Repair))
		if cfg.RepairFrom < 0 {
			first = ns(cfg.Duration+cfg.Drain) + s.jitter(ns(cfg.Repair))
		}
		s.q.push(event{at: first, kind: evRepair, node: int32(i)})
	}
	s.scheduleMarks()
	s.scheduleChurn()
	s.schedulePushPull()
	if cfg.Strategy == "relay" || cfg.Strategy == "rule" {
		s.initRelays()
	}
	return s
}

func (s *Sim) jitter(d int64) int64 { return d*3/4 + s.rng.Int64N(d/2+1) }

// Run processes events until every home is everywhere after the drain, or the settle ends.
func (s *Sim) Run() *Result {
	start := time.Now()
	gossipAt := ns(s.cfg.Duration + s.cfg.Drain)
	end := gossipAt + ns(s.cfg.Settle)
	took := false
	for s.q.len() > 0 {
		e := s.q.pop()
		if !took && e.at >= gossipAt {
			s.st.takeGossipCoverage(s)
			took = true
		}
		if e.at > end || (took && s.st.complete == len(s.homes) && s.marksDone()) {
			break
		}
		s.now = e.at
		s.st.events++
		s.handle(e)
	}
	if !took {
		s.st.takeGossipCoverage(s)
	}
	return s.st.result(s, time.Since(start))
}

func (s *Sim) handle(e event) {
	switch e.kind {
	case evLearn:
		s.learn(e.node, e.id)
	case evTick:
		s.tick(e.node)
		s.q.push(event{at: s.now + ns(s.cfg.FlushInterval), kind: evTick, node: e.node})
	case evCopy:
		s.sendCopy(e.id)
	case evDirect:
		s.recvDirect(e.node, e.id)
	case evGossip:
		s.gossipRound(e.node)
		s.q.push(event{at: s.now + ns(s.cfg.GossipInterval), kind: evGossip, node: e.node})
	case evGossipPkt:
		s.recvGossip(e.node, e.id)
	case evProbe:
		s.probe(e.node)
		s.q.push(event{at: s.now + ns(s.cfg.ProbeInterval), kind: evProbe, node: e.node})
	case evPing, evAck, evPingReq, evIPing, evIAck, evAckFwd:
		s.recvProbe(e)
	case evProbeCheck:
		s.probeCheck(e.id)
	case evRepair:
		s.startRepair(e.node)
		s.q.push(event{at: s.now + s.jitter(ns(s.cfg.Repair)), kind: evRepair, node: e.node})
	case evRepairStep:
		s.repairStep(e.id)
	case evMark:
		s.nodes[e.node].marks = append(s.nodes[e.node].marks, e.id)
		s.st.markObserved(s, e.id, e.node)
	case evChurn:
		s.churn(e.node)
	case evToRelay:
		s.recvAtRelay(e.node, e.id)
	case evRelayFlush:
		s.relayFlush(e.node)
	case evRelayData:
		s.recvRelayData(e.node, e.from, e.id)
	case evHeartbeat:
		s.heartbeat(e.node, e.id, e.from)
	case evHB:
		s.recvHeartbeat(e.node, e.from, e.id)
	case evNack:
		s.recvNack(e.node, e.from, e.id)
	case evNackCheck:
		s.nackCheck(e.node, e.from)
	case evBatchAck:
		s.recvAck(e.node, e.from, e.id)
	case evAckCheck:
		s.ackCheck(e.id)
	case evPushPull:
		s.pushPull(e.node)
	}
}

// has reports whether entry i holds home k.
func (s *Sim) has(k, i int32) bool { return s.homes[k].held[i>>6]&(1<<(i&63)) != 0 }

// arrive gives home k to entry i; false if it held it already.
func (s *Sim) arrive(k, i int32, via uint8) bool {
	h := &s.homes[k]
	w, b := i>>6, uint64(1)<<(i&63)
	if h.held[w]&b != 0 {
		return false
	}
	h.held[w] |= b
	h.missing--
	n := &s.nodes[i]
	n.sums[h.bucket] += h.hash
	n.counts[h.bucket]++
	if via != viaOrigin {
		s.st.pair(s.now-h.t0, via)
		if via == viaRepair {
			h.repaired = true
		}
	}
	if h.missing == 0 {
		h.last = s.now
		s.st.complete++
	}
	return true
}

// latency is one leg's one-way latency from a to b.
func (s *Sim) latency(a, b int32) int64 {
	lo, hi := ns(s.cfg.MinLat), ns(s.cfg.MaxLat)
	if hi <= lo {
		return lo
	}
	if s.cfg.LinkLatency {
		x := splitmix(s.cfg.Seed ^ uint64(a)<<32 ^ uint64(b))
		return lo + int64(x%uint64(hi-lo+1))
	}
	return lo + s.rng.Int64N(hi-lo+1)
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// sendUDP sends a packet of size bytes from a to b that delivers kind/id/from there, unless
// it is lost. Bytes count at the sender when it leaves and at the receiver when it arrives.
func (s *Sim) sendUDP(a, b int32, bytes int, kind evKind, id int32) {
	n := &s.nodes[a]
	depart := s.now
	if s.cfg.SendCost > 0 {
		depart = max(depart, n.busy) + ns(s.cfg.SendCost)
		n.busy = depart
	}
	s.st.sent(s, a, depart, bytes)
	if s.cfg.Loss > 0 && s.rng.Float64() < s.cfg.Loss {
		s.st.lost++
		return
	}
	s.q.push(event{at: depart + s.latency(a, b), kind: kind, node: b, from: a, id: id})
}

// recvUDP counts a packet's bytes at its receiver.
func (s *Sim) recvUDP(i int32, bytes int) {
	if s.now < ns(s.cfg.Duration) {
		n := &s.nodes[i]
		n.udpRecv += int64(bytes)
		n.pktRecv++
	}
}

// tcp counts bytes of a repair stream from a to b.
func (s *Sim) tcp(a, b int32, bytes int) {
	if s.now < ns(s.cfg.Duration) {
		s.nodes[a].tcpSent += int64(bytes)
		s.nodes[b].tcpRecv += int64(bytes)
	}
	s.st.repairBytes += int64(bytes)
}

func setBit(bs []uint64, i int32) bool {
	w, b := i>>6, uint64(1)<<(i&63)
	if bs[w]&b != 0 {
		return false
	}
	bs[w] |= b
	return true
}
