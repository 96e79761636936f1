package main

import (
	"math"
	"math/rand/v2"
	"time"
)

// memberlist's push/pull, as background TCP bytes: every pushPullScale(PushPull, N) (memberlist's
// util.go: the interval times ceil(log2 N - 5) + 1 above 32 members) each entry, from a random
// phase, exchanges its full state with a random peer over one TCP stream: each side sends about
// N x PushPullMemberBytes (every member's name, address, tags and incarnation, and serf's
// Lamport times and recent events). Its draws are its own (ppRng), so that the rest of a run
// is the same with it or without it.

// pushPullScale is memberlist's.
func pushPullScale(interval time.Duration, n int) time.Duration {
	if n <= 32 {
		return interval
	}
	return time.Duration(math.Ceil(math.Log2(float64(n))-math.Log2(32))+1) * interval
}

func (s *Sim) schedulePushPull() {
	if s.cfg.PushPull <= 0 || s.cfg.Nodes < 2 {
		return
	}
	s.ppRng = rand.New(rand.NewPCG(s.cfg.Seed, 0x70757368))
	every := ns(pushPullScale(s.cfg.PushPull, s.cfg.Nodes))
	for i := range s.nodes {
		s.q.push(event{at: s.ppRng.Int64N(every), kind: evPushPull, node: int32(i)})
	}
}

func (s *Sim) pushPull(i int32) {
	j := s.ppRng.Int32N(int32(s.cfg.Nodes - 1))
	if j >= i {
		j++
	}
	state := s.cfg.Nodes * s.cfg.PushPullMemberBytes
	if s.now < ns(s.cfg.Duration) {
		for _, p := range [2][2]int32{{i, j}, {j, i}} {
			s.nodes[p[0]].ppSent += int64(state)
			s.nodes[p[1]].ppRecv += int64(state)
		}
	}
	s.q.push(event{at: s.now + ns(pushPullScale(s.cfg.PushPull, s.cfg.Nodes)), kind: evPushPull, node: i})
}
