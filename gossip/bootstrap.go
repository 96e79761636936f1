package gossip

import (
	"context"
	"time"
)

// Bootstrap brings a starting entry the table of a peer (docs/REFERENCE.md, "Homes"): it waits up
// to joinWait for a first peer to be seen alive, then fetches a peer's table (Sync.Bootstrap)
// until that succeeds or ctx ends. With no peer seen within joinWait it returns nil at once:
// the entry serves alone, and repair brings the table when a peer appears. The caller reports
// ready when it returns.
//
// Until it returns, this entry starts no repair round, and if its table was empty it refuses
// peers' digests and pulls (Sync.BeginBootstrap): a joiner's table is part of a peer's, and
// repairs beside the fetch cost the peer that serves it its CPU for nothing. It marks the
// fetch before it waits for a first peer, so that RunRepair, started beside it, never sees a
// peer come alive before the mark.
func (g *Gossip) Bootstrap(ctx context.Context, joinWait time.Duration) error {
	defer g.sync.BeginBootstrap()()
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	deadline := time.NewTimer(joinWait)
	defer deadline.Stop()
	for !g.Joined() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			g.log.Info().Msg("no peer answered yet: ready, serving alone")
			return nil
		case <-t.C:
		}
	}
	return g.sync.Bootstrap(ctx)
}

// rejoinEvery is how often RunRepair looks for peers that came (back) alive.
const rejoinEvery = time.Second

// RunRepair runs anti-entropy until ctx ends: a random peer every RepairInterval (Sync.Run),
// and at once with every peer that becomes alive (a partition healed, a frozen or restarted
// entry is back), so that what either side learned meanwhile travels at once instead of
// waiting for the periodic round to pick that peer (which, with a random peer every ~30 s,
// can take minutes). Both sides see each other come back, so both pull.
//
// Not while this entry fetches its table (Bootstrap): the peers that come alive meanwhile
// count as known once it ends, since the fetch brought a peer's whole table. A joiner that
// fetches its table refuses the rejoin repair of the peers that see it come alive (503
// "bootstrapping", counted as repair_rounds_total{result="peer_bootstrapping"}); it holds a
// peer's table when its fetch ends, and the periodic rounds carry anything else.
func (g *Gossip) RunRepair(ctx context.Context) {
	done := make(chan struct{})
	go func() { defer close(done); g.sync.Run(ctx) }()
	defer func() { <-done }()
	var alive map[string]bool // nil until the first look: the peers then are known
	t := time.NewTicker(rejoinEvery)
	defer t.Stop()
	for {
		peers := g.syncPeers()
		var back []Peer
		alive, back = rejoined(alive, peers, g.sync.RepairPaused())
		for _, p := range back {
			// Repair is bounded by the sync timeout.
			if _, err := g.sync.Repair(ctx, p); err != nil {
				g.log.Debug().Err(err).Str("peer", p.Name).Msg("repair with a rejoined peer")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// rejoined is one look of RunRepair: given the peers alive at the last look (nil before the
// first) and now, it returns the peers alive now and those to repair with: the ones that came
// alive since the last look, none at the first look or while paused (this entry fetches its
// table).
func rejoined(known map[string]bool, now []Peer, paused bool) (alive map[string]bool, back []Peer) {
	alive = make(map[string]bool, len(now))
	for _, p := range now {
		alive[p.Name] = true
		if known != nil && !known[p.Name] && !paused {
			back = append(back, p)
		}
	}
	return alive, back
}
