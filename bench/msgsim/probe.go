package main

// memberlist's failure detector, as background bytes: every ProbeInterval an entry pings its
// next peer (a shuffled round robin), which acks; an ack not back within ProbeTimeout starts
// indirect probes through 3 random peers (ping request, their ping, its ack, the forwarded
// ack). The TCP fallback ping is not modelled (gossipsim does not count TCP either). Nobody
// fails in these runs, so suspicion is not modelled.

type probe struct {
	prober, target int32
	acked          bool
}

func (s *Sim) probe(i int32) {
	if s.cfg.Nodes < 2 {
		return
	}
	n := &s.nodes[i]
	if n.probeNext >= len(n.probeOrder) {
		if n.probeOrder == nil {
			for j := range int32(s.cfg.Nodes) {
				if j != i {
					n.probeOrder = append(n.probeOrder, j)
				}
			}
		}
		s.rng.Shuffle(len(n.probeOrder), func(a, b int) {
			n.probeOrder[a], n.probeOrder[b] = n.probeOrder[b], n.probeOrder[a]
		})
		n.probeNext = 0
	}
	t := n.probeOrder[n.probeNext]
	n.probeNext++
	s.probes = append(s.probes, probe{prober: i, target: t})
	id := int32(len(s.probes) - 1)
	s.sendUDP(i, t, pingBytes, evPing, id)
	s.q.push(event{at: s.now + ns(s.cfg.ProbeTimeout), kind: evProbeCheck, node: i, id: id})
}

func (s *Sim) recvProbe(e event) {
	p := &s.probes[e.id]
	switch e.kind {
	case evPing:
		s.recvUDP(e.node, pingBytes)
		s.sendUDP(e.node, p.prober, ackBytes, evAck, e.id)
	case evAck:
		s.recvUDP(e.node, ackBytes)
		p.acked = true
	case evPingReq:
		s.recvUDP(e.node, pingBytes)
		s.sendUDP(e.node, p.target, pingBytes, evIPing, e.id)
	case evIPing: // the target answers the peer that asked
		s.recvUDP(e.node, pingBytes)
		s.sendUDP(e.node, e.from, ackBytes, evIAck, e.id)
	case evIAck:
		s.recvUDP(e.node, ackBytes)
		s.sendUDP(e.node, p.prober, ackBytes, evAckFwd, e.id)
	case evAckFwd:
		s.recvUDP(e.node, ackBytes)
	}
}

func (s *Sim) probeCheck(id int32) {
	p := &s.probes[id]
	if p.acked {
		return
	}
	s.st.indirectProbes++
	for _, j := range s.randomPeers(p.prober, min(indirectChecks+1, s.cfg.Nodes-1)) {
		if j != p.target {
			s.sendUDP(p.prober, j, pingBytes, evPingReq, id)
		}
	}
}
