package main

// Acked batches (-ack): instead of DirectCopies blind copies, the origin sends a batch once,
// every receiver acks it (a small sealed packet naming the batch), and the origin sends it
// again to the peers whose ack has not come within 2 x max latency + 50 ms, at most
// maxAckTries times in all; repair carries what is left. A receiver acks every copy it gets,
// so a lost ack costs one more copy, not a miss.

const maxAckTries = 5

type ackWait struct {
	node, batch int32
	kind        evKind
	peers       []int32 // nil: every other entry
	tries       int
}

func (s *Sim) ackTimeout() int64 {
	if s.cfg.AckTimeout > 0 {
		return ns(s.cfg.AckTimeout)
	}
	return 2*ns(s.cfg.MaxLat) + 50e6
}

func (s *Sim) awaitAcks(i, b int32, kind evKind, peers []int32) {
	if s.batches[b].acked == nil {
		s.batches[b].acked = make([]uint64, s.words)
	}
	s.waits = append(s.waits, ackWait{node: i, batch: b, kind: kind, peers: peers, tries: 1})
	s.q.push(event{at: s.now + s.ackTimeout(), kind: evAckCheck, id: int32(len(s.waits) - 1)})
}

// ack answers a batch received by i, if its sender waits for acks.
func (s *Sim) ack(i, b int32) {
	if bt := &s.batches[b]; bt.acked != nil {
		s.sendUDP(i, bt.origin, ackPacketBytes, evBatchAck, b)
		s.st.acks++
	}
}

func (s *Sim) recvAck(i, from, b int32) {
	s.recvUDP(i, ackPacketBytes)
	setBit(s.batches[b].acked, from)
}

func (s *Sim) ackCheck(id int32) {
	w := &s.waits[id]
	bt := &s.batches[w.batch]
	var again []int32
	each := func(j int32) {
		if j != w.node && !hasBit(bt.acked, j) {
			again = append(again, j)
		}
	}
	if w.peers == nil {
		for j := range int32(s.cfg.Nodes) {
			each(j)
		}
	} else {
		for _, j := range w.peers {
			each(j)
		}
	}
	if len(again) == 0 {
		return
	}
	for _, j := range again {
		s.sendUDP(w.node, j, bt.bytes, w.kind, w.batch)
	}
	s.st.directPackets += len(again)
	s.st.resent += len(again)
	if w.tries++; w.tries < maxAckTries {
		s.q.push(event{at: s.now + s.ackTimeout(), kind: evAckCheck, id: id})
	}
}
