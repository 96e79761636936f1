package main

import "math"

// The relay strategy (-strategy relay), what gossip/ does for an origin whose direct batches
// would cost more than DirectLimit a second (every origin, here), when run
// with -ack -relay-ack -nack=false (the NACKed relay hop is the alternative it was weighed
// against): entries form Groups groups (regions or pools; here by index). An origin sends its batch
// straight to the members of its own group and, for every other group, to that group's relay
// (Copies copies each, as now). A relay aggregates what it receives for RelayFlush (or until a
// batch is full) and sends full batches to the members of its group, RelayCopies times. With Nack,
// a relay numbers its batches; a member that sees a gap (a later number, or the relay's heartbeat
// after its last batch) asks the relay for what it missed, and asks again until it comes; repair
// carries the rest. With RelayShards > 1 each group has that many relays, each for a share of the
// tenant space (by digest bucket), which spreads the relays' load and aggregates less.

type relayState struct {
	groupOf   []int32
	members   [][]int32 // by group
	relayOf   [][]int32 // [group][shard]
	ownPeers  [][]int32 // by entry: its group but itself
	hop1Peers [][][]int32
	seq       map[int32]int32 // relay batch -> its sequence number
	nacks     [][]int32
}

type relayNode struct {
	isRelay bool
	agg     []int32 // homes aggregated, to send
	armed   bool    // a flush is scheduled
	sent    []int32 // batch ids by sequence number
	in      map[int32]*seqState
}

// seqState is what a member knows of one relay's sequence.
type seqState struct {
	hi      int32
	missing []int32
	tries   int
	armed   bool
}

func (s *Sim) initRelays() {
	g := s.cfg.Groups
	if g <= 0 {
		g = int(math.Ceil(2 * math.Sqrt(float64(s.cfg.Nodes))))
	}
	g = min(g, s.cfg.Nodes)
	k := max(s.cfg.RelayShards, 1)
	r := &s.relays
	r.seq = make(map[int32]int32)
	r.groupOf = make([]int32, s.cfg.Nodes)
	r.members = make([][]int32, g)
	for i := range int32(s.cfg.Nodes) {
		gi := int32(int(i) * g / s.cfg.Nodes)
		r.groupOf[i] = gi
		r.members[gi] = append(r.members[gi], i)
	}
	r.relayOf = make([][]int32, g)
	for gi, ms := range r.members {
		for sh := range k {
			rl := ms[sh*len(ms)/k%len(ms)]
			r.relayOf[gi] = append(r.relayOf[gi], rl)
			s.nodes[rl].relay.isRelay = true
		}
	}
	r.ownPeers = make([][]int32, s.cfg.Nodes)
	for i := range int32(s.cfg.Nodes) {
		for _, j := range r.members[r.groupOf[i]] {
			if j != i {
				r.ownPeers[i] = append(r.ownPeers[i], j)
			}
		}
	}
	r.hop1Peers = make([][][]int32, g)
	for gi := range r.members {
		r.hop1Peers[gi] = make([][]int32, k)
		for sh := range k {
			for gj := range r.members {
				if gj != gi {
					r.hop1Peers[gi][sh] = append(r.hop1Peers[gi][sh], r.relayOf[gj][sh])
				}
			}
		}
	}
}

func (s *Sim) shards() int { return len(s.relays.relayOf[0]) }

// relaySend: the origin's own group directly, every other group through its relays.
func (s *Sim) relaySend(o, b int32) {
	r := &s.relays
	if len(r.ownPeers[o]) > 0 {
		s.directSend(o, b, evDirect, r.ownPeers[o])
	}
	g := r.groupOf[o]
	if s.cfg.RelayShards == 0 {
		// Each home to its own relay in each other group: one packet a relay, with the
		// homes that relay takes.
		by := map[int32][]int32{}
		var order []int32
		for _, h := range s.batches[b].homes {
			for gj, ms := range r.members {
				if int32(gj) == g {
					continue
				}
				rl := ms[splitmix(s.homes[h].hash^uint64(gj)<<40)%uint64(len(ms))]
				if _, ok := by[rl]; !ok {
					order = append(order, rl)
				}
				by[rl] = append(by[rl], h)
			}
		}
		for _, rl := range order {
			s.hop1(o, by[rl], []int32{rl})
		}
		return
	}
	k := s.shards()
	if k == 1 {
		if len(r.hop1Peers[g][0]) > 0 {
			s.directSend(o, b, evToRelay, r.hop1Peers[g][0])
		}
		return
	}
	by := make([][]int32, k)
	for _, h := range s.batches[b].homes {
		sh := int(s.homes[h].bucket) * k / 256
		by[sh] = append(by[sh], h)
	}
	for sh, hs := range by {
		if len(hs) > 0 && len(r.hop1Peers[g][sh]) > 0 {
			s.hop1(o, hs, r.hop1Peers[g][sh])
		}
	}
}

// hop1 sends homes, a share of one of o's batches, to relays.
func (s *Sim) hop1(o int32, hs, relays []int32) {
	sub := s.newBatch(o, hs)
	s.st.batches-- // not a batch of its own: a share of b
	s.st.batchHomes -= len(hs)
	s.directSend(o, sub, evToRelay, relays)
}

// relayFlushAfter is how long relay i aggregates: RelayFlush, or longer where its group is
// so large that RelayPacketRate would be exceeded.
func (s *Sim) relayFlushAfter(i int32) int64 {
	d := ns(s.cfg.RelayFlush)
	if s.cfg.RelayPacketRate > 0 {
		members := float64(len(s.relays.members[s.relays.groupOf[i]]))
		d = max(d, int64(members/s.cfg.RelayPacketRate*1e9))
	}
	return d
}

func (s *Sim) recvAtRelay(i, b int32) {
	bt := &s.batches[b]
	s.recvUDP(i, bt.bytes)
	s.ack(i, b)
	if !setBit(bt.got, i) {
		s.st.duplicates++
		return
	}
	n := &s.nodes[i].relay
	for _, k := range bt.homes {
		s.arrive(k, i, viaDirect)
		n.agg = append(n.agg, k)
	}
	if len(n.agg) >= relayCapacity {
		s.relayFlushFull(i)
	}
	if len(n.agg) > 0 && !n.armed {
		n.armed = true
		s.q.push(event{at: s.now + s.relayFlushAfter(i), kind: evRelayFlush, node: i})
	}
}

// relayFlushFull sends the full batches aggregated so far.
func (s *Sim) relayFlushFull(i int32) {
	n := &s.nodes[i].relay
	for len(n.agg) >= relayCapacity {
		s.relayPacket(i, n.agg[:relayCapacity])
		n.agg = n.agg[relayCapacity:]
	}
}

func (s *Sim) relayFlush(i int32) {
	n := &s.nodes[i].relay
	n.armed = false
	s.relayFlushFull(i)
	if len(n.agg) > 0 {
		s.relayPacket(i, n.agg)
		n.agg = nil
	}
}

func (s *Sim) relayPacket(i int32, hs []int32) {
	n := &s.nodes[i].relay
	bt := batch{origin: i, homes: append([]int32(nil), hs...), got: make([]uint64, s.words),
		bytes: directSeal + payloadBytes(len(hs), true) + 4}
	s.batches = append(s.batches, bt)
	b := int32(len(s.batches) - 1)
	seq := int32(len(n.sent))
	n.sent = append(n.sent, b)
	s.relays.seq[b] = seq
	s.st.relayPackets++
	s.st.relayHomes += len(hs)
	peers := s.relays.ownPeers[i]
	if len(peers) == 0 {
		return
	}
	saved := s.cfg.Copies
	s.cfg.Copies = s.cfg.RelayCopies
	s.directSend(i, b, evRelayData, peers)
	s.cfg.Copies = saved
	if s.cfg.Nack {
		s.q.push(event{at: s.now + ns(s.cfg.HeartbeatGap), kind: evHeartbeat, node: i, id: seq, from: 1})
	}
}

// heartbeat tells the group the relay's last sequence number, if nothing newer went out: once
// after HeartbeatGap, once more a second later.
func (s *Sim) heartbeat(i, seq, attempt int32) {
	n := &s.nodes[i].relay
	if int32(len(n.sent))-1 != seq {
		return
	}
	for _, j := range s.relays.ownPeers[i] {
		s.sendUDP(i, j, heartbeatBytes, evHB, seq)
	}
	s.st.heartbeats += len(s.relays.ownPeers[i])
	if attempt == 1 {
		s.q.push(event{at: s.now + 1e9, kind: evHeartbeat, node: i, id: seq, from: 2})
	}
}

func (s *Sim) seqOf(i, relay int32) *seqState {
	n := &s.nodes[i].relay
	if n.in == nil {
		n.in = make(map[int32]*seqState)
	}
	st := n.in[relay]
	if st == nil {
		st = &seqState{hi: -1}
		n.in[relay] = st
	}
	return st
}

func (s *Sim) recvRelayData(i, relay, b int32) {
	if !s.recvBatch(i, b, viaRelay) {
		return
	}
	if s.cfg.Nack {
		s.gap(i, relay, s.relays.seq[b]-1)
		st := s.seqOf(i, relay)
		st.hi = max(st.hi, s.relays.seq[b])
	}
}

func (s *Sim) recvHeartbeat(i, relay, seq int32) {
	s.recvUDP(i, heartbeatBytes)
	s.gap(i, relay, seq)
}

// gap notes the relay's batches up to upto that i lacks, and asks for them.
func (s *Sim) gap(i, relay, upto int32) {
	st := s.seqOf(i, relay)
	sent := s.nodes[relay].relay.sent
	added := false
	for q := st.hi + 1; q <= upto; q++ {
		if !hasBit(s.batches[sent[q]].got, i) {
			st.missing = append(st.missing, q)
			added = true
		}
	}
	st.hi = max(st.hi, upto)
	if added {
		st.tries = 0
		s.nack(i, relay, st)
	}
}

func (s *Sim) nack(i, relay int32, st *seqState) {
	sent := s.nodes[relay].relay.sent
	keep := st.missing[:0]
	for _, q := range st.missing {
		if !hasBit(s.batches[sent[q]].got, i) {
			keep = append(keep, q)
		}
	}
	st.missing = keep
	if len(keep) == 0 || st.tries >= 5 {
		return
	}
	st.tries++
	s.relays.nacks = append(s.relays.nacks, append([]int32(nil), keep...))
	s.sendUDP(i, relay, nackBytes+4*len(keep), evNack, int32(len(s.relays.nacks)-1))
	s.st.nacks++
	if !st.armed {
		st.armed = true
		s.q.push(event{at: s.now + 2*ns(s.cfg.MaxLat) + 50e6, kind: evNackCheck, node: i, from: relay})
	}
}

func (s *Sim) nackCheck(i, relay int32) {
	st := s.seqOf(i, relay)
	st.armed = false
	s.nack(i, relay, st)
}

func (s *Sim) recvNack(relay, from, id int32) {
	seqs := s.relays.nacks[id]
	s.recvUDP(relay, nackBytes+4*len(seqs))
	sent := s.nodes[relay].relay.sent
	for _, q := range seqs {
		b := sent[q]
		s.sendUDP(relay, from, s.batches[b].bytes, evRelayData, b)
		s.st.resent++
	}
}

func hasBit(bs []uint64, i int32) bool { return bs[i>>6]&(1<<(i&63)) != 0 }
