package main

import (
	"math"
	"slices"
)

// serf's epidemic, as memberlist runs it: every GossipInterval an entry with broadcasts
// queued sends one packet to each of GossipNodes random peers, filled (up to UDPBuffer) with
// the broadcasts sent least so far, newest first; each broadcast is sent
// RetransmitMult x ceil(log10(N+1)) times and then dropped. An entry that hears a broadcast
// it had not seen applies it and queues it to retransmit in turn. Marks and clears travel so
// (serf user events), and membership messages; with -strategy serf, homes too.

type msgKind uint8

const (
	msgMark msgKind = iota + 1
	msgHomes
	msgAlive
)

type message struct {
	kind  msgKind
	bytes int   // inside a packet, with its per-message overhead
	ref   int32 // mark id or batch id
	seen  []uint64
}

type bcast struct {
	msg       int32
	transmits int
}

type gossipPacket struct {
	msgs  []int32
	bytes int
}

func (s *Sim) retransmitLimit() int {
	return s.cfg.RetransmitMult * int(math.Ceil(math.Log10(float64(s.cfg.Nodes+1))))
}

// queueDepth is serf's user event queue at i (what the publisher's backpressure reads).
func (s *Sim) queueDepth(i int32) int {
	d := 0
	for _, b := range s.nodes[i].bq {
		if s.msgs[b.msg].kind != msgAlive {
			d++
		}
	}
	return d
}

// broadcast queues a new message at i, which has seen it.
func (s *Sim) broadcast(i int32, kind msgKind, bytes int, ref int32) int32 {
	m := message{kind: kind, bytes: bytes + perMsgOverhead, ref: ref, seen: make([]uint64, s.words)}
	setBit(m.seen, i)
	s.msgs = append(s.msgs, m)
	id := int32(len(s.msgs) - 1)
	s.nodes[i].bq = append(s.nodes[i].bq, bcast{msg: id})
	return id
}

// publishEvent sends batch b as a serf user event (-strategy serf).
func (s *Sim) publishEvent(i, b int32) {
	bt := &s.batches[b]
	s.broadcast(i, msgHomes, serfEventOverhead+nodeNameBytes+payloadBytes(len(bt.homes), false), b)
	setBit(bt.got, i)
	s.st.serfEvents++
}

// publishMarks sends the pending marks as one serf user event.
func (s *Sim) publishMarks(i int32) {
	n := &s.nodes[i]
	for _, m := range n.marks {
		s.broadcast(i, msgMark, serfEventOverhead+markPayload, m)
		s.st.serfEvents++
	}
	n.marks = n.marks[:0]
}

func (s *Sim) gossipRound(i int32) {
	n := &s.nodes[i]
	if len(n.bq) == 0 || s.cfg.Nodes < 2 {
		return
	}
	limit := s.retransmitLimit()
	room := s.cfg.UDPBuffer - packetOverhead
	for _, j := range s.randomPeers(i, s.cfg.GossipNodes) {
		if len(n.bq) == 0 {
			break
		}
		// Least sent first, newest first among equals (memberlist's TransmitLimitedQueue).
		slices.SortFunc(n.bq, func(a, b bcast) int {
			if a.transmits != b.transmits {
				return a.transmits - b.transmits
			}
			return int(b.msg - a.msg)
		})
		used := 0
		var ids []int32
		for x := range n.bq {
			m := &s.msgs[n.bq[x].msg]
			if used+m.bytes > room {
				continue
			}
			used += m.bytes
			ids = append(ids, n.bq[x].msg)
			n.bq[x].transmits++
		}
		n.bq = slices.DeleteFunc(n.bq, func(b bcast) bool { return b.transmits >= limit })
		if len(ids) == 0 {
			continue
		}
		s.packets = append(s.packets, gossipPacket{msgs: ids, bytes: packetOverhead + used})
		s.sendUDP(i, j, packetOverhead+used, evGossipPkt, int32(len(s.packets)-1))
		s.st.gossipPackets++
	}
}

// randomPeers picks up to k distinct entries other than i.
func (s *Sim) randomPeers(i int32, k int) []int32 {
	k = min(k, s.cfg.Nodes-1)
	out := make([]int32, 0, k)
	for len(out) < k {
		j := int32(s.rng.IntN(s.cfg.Nodes))
		if j == i || slices.Contains(out, j) {
			continue
		}
		out = append(out, j)
	}
	return out
}

func (s *Sim) recvGossip(i, p int32) {
	pk := &s.packets[p]
	s.recvUDP(i, pk.bytes)
	for _, id := range pk.msgs {
		m := &s.msgs[id]
		if !setBit(m.seen, i) {
			continue
		}
		s.nodes[i].bq = append(s.nodes[i].bq, bcast{msg: id})
		switch m.kind {
		case msgMark:
			s.st.markArrived(s, m.ref, i)
		case msgHomes:
			bt := &s.batches[m.ref]
			setBit(bt.got, i)
			for _, k := range bt.homes {
				s.arrive(k, i, viaGossip)
			}
		}
	}
}

// scheduleMarks has MarkRate marks a second observed at random entries during the learning.
func (s *Sim) scheduleMarks() {
	if s.cfg.MarkRate <= 0 {
		return
	}
	for t := 0.0; ; {
		t += s.rng.ExpFloat64() / s.cfg.MarkRate
		at := int64(t * 1e9)
		if at >= ns(s.cfg.Duration) {
			return
		}
		id := s.st.newMark(s, at)
		s.q.push(event{at: at, kind: evMark, node: int32(s.rng.IntN(s.cfg.Nodes)), id: id})
	}
}

// scheduleChurn has Churn membership messages a second start at random entries.
func (s *Sim) scheduleChurn() {
	if s.cfg.Churn <= 0 {
		return
	}
	for t := 0.0; ; {
		t += s.rng.ExpFloat64() / s.cfg.Churn
		at := int64(t * 1e9)
		if at >= ns(s.cfg.Duration) {
			return
		}
		s.q.push(event{at: at, kind: evChurn, node: int32(s.rng.IntN(s.cfg.Nodes))})
	}
}

func (s *Sim) churn(i int32) { s.broadcast(i, msgAlive, aliveMsgBytes, -1) }
