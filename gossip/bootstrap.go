package gossip

import (
	"context"
	"time"
)

// Bootstrap brings a starting entry the table of a peer (CONTRACT.md section 6): it waits up
// to joinWait for a first peer to be seen alive, then fetches a peer's table (Sync.Bootstrap)
// until that succeeds or ctx ends. With no peer seen within joinWait it returns nil at once:
// the entry serves alone, and repair brings the table when a peer appears. The caller reports
// ready when it returns.
func (g *Gossip) Bootstrap(ctx context.Context, joinWait time.Duration) error {
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
func (g *Gossip) RunRepair(ctx context.Context) {
	done := make(chan struct{})
	go func() { defer close(done); g.sync.Run(ctx) }()
	defer func() { <-done }()
	alive := map[string]bool{}
	first := true
	t := time.NewTicker(rejoinEvery)
	defer t.Stop()
	for {
		now := map[string]bool{}
		for _, p := range g.syncPeers() {
			now[p.Name] = true
			if !alive[p.Name] && !first {
				rctx, cancel := context.WithTimeout(ctx, g.sync.cfg.Timeout)
				if _, err := g.sync.Repair(rctx, p); err != nil {
					g.log.Debug().Err(err).Str("peer", p.Name).Msg("repair with a rejoined peer")
				}
				cancel()
			}
		}
		alive, first = now, false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
