package main

// The origin's side, as gossip/internal/spread/publish.go does it: learned homes wait in a bounded
// FIFO (MaxPending, the oldest dropped), a tick every FlushInterval flushes what is pending in up
// to MaxEventsPerFlush batches, a full batch's worth flushes at once (unless backpressure widened
// the interval), and serf's event queue depth widens the interval up to MaxFlushInterval above
// QueueHigh and narrows it below QueueLow.

func (s *Sim) learn(i, k int32) {
	s.arrive(k, i, viaOrigin)
	s.buckets[s.homes[k].bucket] = append(s.buckets[s.homes[k].bucket], k)
	n := &s.nodes[i]
	if len(n.pending) >= s.cfg.MaxPending {
		n.pending = n.pending[1:] // the oldest: repair carries it
		s.st.pendingDropped++
	} else {
		n.pendingBytes += itemOverhead + int(s.homes[k].nameLen) + regionBytes
	}
	n.pending = append(n.pending, k)
	if n.pendingBytes >= payloadBudget && n.interval == ns(s.cfg.FlushInterval) {
		s.flush(i, true)
	}
}

func (s *Sim) tick(i int32) {
	n := &s.nodes[i]
	d := s.queueDepth(i)
	switch {
	case d >= s.cfg.QueueHigh:
		n.interval = min(2*n.interval, ns(s.cfg.MaxFlushInterval))
	case d <= s.cfg.QueueLow:
		n.interval = max(n.interval/2, ns(s.cfg.FlushInterval))
	}
	s.st.maxFlush = max(s.st.maxFlush, n.interval)
	s.st.maxQueue = max(s.st.maxQueue, d)
	if len(n.marks) > 0 {
		s.publishMarks(i)
	}
	if len(n.pending) == 0 {
		return
	}
	if s.now-n.lastFlush < n.interval-ns(s.cfg.FlushInterval)/2 {
		s.st.deferred++
		return
	}
	s.flush(i, false)
}

// capacity is how many homes one batch carries.
func (s *Sim) capacity() int { return directCapacity }

// flush sends up to MaxEventsPerFlush batches of pending homes; with fullOnly, only full ones.
func (s *Sim) flush(i int32, fullOnly bool) {
	n := &s.nodes[i]
	sent := 0
	limited := false
	for sent < s.cfg.MaxEventsPerFlush && len(n.pending) > 0 {
		c := s.capacity()
		if fullOnly && len(n.pending) <= c {
			break // everything left fits one batch: not full yet
		}
		k := min(c, len(n.pending))
		if s.budgeted() && !s.take(i, directBytes(k)) {
			s.st.budgetDeferred++
			limited = true
			break // the homes wait for the budget
		}
		b := s.newBatch(i, n.pending[:k])
		n.pending = n.pending[k:]
		sent++
		s.sendBatch(i, b)
	}
	if sent > 0 {
		n.lastFlush = s.now
	}
	n.backlog = limited && len(n.pending) > 0
	n.pendingBytes = 0
	for _, k := range n.pending {
		n.pendingBytes += itemOverhead + int(s.homes[k].nameLen) + regionBytes
	}
}

func (s *Sim) newBatch(origin int32, hs []int32) int32 {
	b := batch{origin: origin, homes: append([]int32(nil), hs...), bytes: directBytes(len(hs)),
		got: make([]uint64, s.words)}
	s.batches = append(s.batches, b)
	s.st.batches++
	s.st.batchHomes += len(hs)
	return int32(len(s.batches) - 1)
}

// sendBatch hands a batch to the strategy.
func (s *Sim) sendBatch(i, b int32) {
	switch s.cfg.Strategy {
	case "serf":
		s.publishEvent(i, b)
	case "relay":
		s.relaySend(i, b)
	case "rule":
		s.ruleSend(i, b)
	default:
		s.directSend(i, b, evDirect, nil)
	}
}

// directSend sends batch b from i to peers (nil: every other entry), Copies times,
// CopyInterval apart (gossip/internal/spread/publish.go directSender).
func (s *Sim) directSend(i, b int32, kind evKind, peers []int32) {
	s.sendAll(i, b, kind, peers)
	copies := s.cfg.Copies
	straight := s.cfg.Strategy == "rule" && kind == evDirect && peers == nil // the rule's direct path: copies
	if s.cfg.Ack && !straight && (kind != evRelayData || s.cfg.RelayAck) {
		s.awaitAcks(i, b, kind, peers)
		if kind != evToRelay || s.cfg.Hop1Copies < 2 {
			return
		}
		copies = s.cfg.Hop1Copies
	}
	if copies < 2 {
		return
	}
	n := &s.nodes[i]
	live := n.copyQ[:0]
	for _, id := range n.copyQ {
		if c := &s.copies[id]; c.left > 0 && !c.dropped {
			live = append(live, id)
		}
	}
	n.copyQ = live
	if len(n.copyQ) >= maxDirectQueue {
		c := &s.copies[n.copyQ[0]]
		c.dropped = true
		s.st.copiesDropped += c.left * s.peerCount(peers)
		n.copyQ = n.copyQ[1:]
	}
	s.copies = append(s.copies, copyEntry{node: i, batch: b, kind: kind, peers: peers, left: copies - 1})
	id := int32(len(s.copies) - 1)
	n.copyQ = append(n.copyQ, id)
	s.q.push(event{at: s.now + ns(s.cfg.CopyInterval), kind: evCopy, id: id})
}

func (s *Sim) peerCount(peers []int32) int {
	if peers == nil {
		return s.cfg.Nodes - 1
	}
	return len(peers)
}

func (s *Sim) sendCopy(id int32) {
	c := &s.copies[id]
	if c.dropped || c.left == 0 {
		return
	}
	if s.budgeted() && c.kind == evDirect && (s.nodes[c.node].backlog || !s.take(c.node, s.batches[c.batch].bytes)) {
		c.dropped = true // first copies of waiting homes come first (gossip/internal/spread/publish.go)
		s.st.copiesDropped += c.left * s.peerCount(c.peers)
		return
	}
	s.sendAll(c.node, c.batch, c.kind, c.peers)
	if c.left--; c.left > 0 {
		s.q.push(event{at: s.now + ns(s.cfg.CopyInterval), kind: evCopy, id: id})
	}
}

func (s *Sim) sendAll(i, b int32, kind evKind, peers []int32) {
	bytes := s.batches[b].bytes
	if peers == nil {
		for j := range int32(s.cfg.Nodes) {
			if j != i {
				s.sendUDP(i, j, bytes, kind, b)
			}
		}
	} else {
		for _, j := range peers {
			s.sendUDP(i, j, bytes, kind, b)
		}
	}
	s.st.directPackets += s.peerCount(peers)
}

// recvDirect applies a direct batch once; its other copies are duplicates.
func (s *Sim) recvDirect(i, b int32) { s.recvBatch(i, b, viaDirect) }

// recvBatch takes batch b at i: counts its bytes, acks it (if its sender waits for acks) and
// applies it the first time (via says how it came), and reports whether that was the first.
func (s *Sim) recvBatch(i, b int32, via uint8) bool {
	bt := &s.batches[b]
	s.recvUDP(i, bt.bytes)
	s.ack(i, b)
	if !setBit(bt.got, i) {
		s.st.duplicates++
		return false
	}
	for _, k := range bt.homes {
		s.arrive(k, i, via)
	}
	return true
}

// budgeted reports whether the direct send budget applies (the direct strategy, or the rule
// while its fleet half is off; Budget set).
func (s *Sim) budgeted() bool {
	return s.cfg.Budget > 0 && (s.cfg.Strategy == "direct" || s.cfg.Strategy == "rule" && !s.relayRuleOn())
}

// take spends bytes of origin i's budget, refilled at Budget a second up to a second's worth.
func (s *Sim) take(i int32, bytes int) bool {
	n := &s.nodes[i]
	rate := float64(s.cfg.Budget)
	if n.tokensAt == 0 {
		n.tokens, n.tokensAt = rate, s.now
	}
	n.tokens = min(rate, n.tokens+rate*float64(s.now-n.tokensAt)/1e9)
	n.tokensAt = s.now
	if n.tokens < float64(bytes) {
		return false
	}
	n.tokens -= float64(bytes)
	return true
}
