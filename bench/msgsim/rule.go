package main

// The relay rule (-strategy rule), what gossip/ decides for each flush
// (gossip/internal/spread/relay.go relayRule, publish.go route): while the fleet's new homes,
// sent straight, would cost each entry more than DirectLimit bytes a second (Rate x 89 B x
// Copies: every entry's estimate of it converges to that; the seconds of its climb are not
// modelled), every batch goes through relays; otherwise a batch goes straight to every member,
// with blind copies, when its cost to its origin ((N-1) x its bytes x Copies) fits the origin's
// own budget (1.5 x DirectLimit a second, 10 s of it saved up), and through relays when not.
// The relay path is the relay strategy's (acked; run with -ack -relay-ack -nack=false).

// directHomeBytes is a batch of one home on the direct path (spread's directHomeBytes).
const directHomeBytes = 89

// relayRuleOn is the fleet's half of the rule.
func (s *Sim) relayRuleOn() bool {
	return s.cfg.DirectLimit >= 0 && s.cfg.Rate*directHomeBytes*float64(s.cfg.Copies) > float64(s.cfg.DirectLimit)
}

// ruleSend sends batch b from origin i by the rule.
func (s *Sim) ruleSend(i, b int32) {
	if s.relayRuleOn() {
		s.relaySend(i, b)
		return
	}
	cost := float64((s.cfg.Nodes - 1) * s.batches[b].bytes * s.cfg.Copies)
	n := &s.nodes[i]
	rate := 1.5 * float64(s.cfg.DirectLimit)
	if n.ownAt == 0 {
		n.own, n.ownAt = 10*rate, max(s.now, 1)
	}
	n.own = min(10*rate, n.own+rate*float64(s.now-n.ownAt)/1e9)
	n.ownAt = s.now
	if n.own < cost {
		s.st.overBudget++
		s.relaySend(i, b)
		return
	}
	n.own -= cost
	s.directSend(i, b, evDirect, nil)
}
