package gossip

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/fenec/fenec-entry/gossip/internal/tablesync"
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
// "bootstrapping", counted as repair_rounds_total{result="peer_bootstrapping"}). What the
// fetch cannot bring is a home still in flight while it ran: sent to this entry's previous
// incarnation, or to none while it was down, and not yet at the peer it fetched from. So
// once a fetch ends, one round runs a RepairSettle after it (when such homes count in a
// digest), with another peer than the one fetched from; the periodic rounds carry anything
// else.
func (g *Gossip) RunRepair(ctx context.Context) {
	done := make(chan struct{})
	go func() { defer close(done); g.sync.Run(ctx) }()
	defer func() { <-done }()
	plan := repairPlan{settle: g.sync.RepairSettle()}
	t := time.NewTicker(rejoinEvery)
	defer t.Stop()
	catchUp := time.NewTimer(time.Hour)
	defer catchUp.Stop()
	for {
		peers := g.syncPeers()
		back := plan.look(peers, g.sync.RepairPaused(), g.sync.LastFetch())
		for _, p := range back {
			// Repair is bounded by the sync timeout.
			if _, err := g.sync.Repair(ctx, p); err != nil {
				g.log.Debug().Err(err).Str("peer", p.Name).Msg("repair with a rejoined peer")
			}
		}
		if due, ok := plan.catchUpDue(); ok {
			catchUp.Reset(max(due.Sub(g.cfg.Clock.Now()), 0)) // the fetch's time is by the clock too
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-catchUp.C:
			if p, ok := plan.catchUp(g.syncPeers()); ok {
				if _, err := g.sync.Repair(ctx, p); err != nil {
					g.log.Debug().Err(err).Str("peer", p.Name).Msg("repair after the table's fetch")
				}
			}
		}
	}
}

// repairPlan is what RunRepair decides at each look: the peers that came alive since the
// last look to repair with (rejoined), and the one round after each fetch of this entry's
// table. Not safe for concurrent use.
type repairPlan struct {
	settle  time.Duration
	alive   map[string]bool // nil until the first look: the peers then are known
	fetch   *tablesync.Fetched
	pending bool // the round after fetch has not run yet
	armed   bool // catchUpDue has given its time
}

// look takes the peers alive now, whether this entry fetches its table, and the last fetch
// to end, and returns the peers to repair with at once.
func (p *repairPlan) look(now []Peer, paused bool, last *tablesync.Fetched) (back []Peer) {
	p.alive, back = rejoined(p.alive, now, paused)
	if last != nil && last != p.fetch {
		p.fetch, p.pending, p.armed = last, true, false
	}
	return back
}

// catchUpDue is when the round after the last fetch is due, once for each fetch (false: none
// is, or it was given already).
func (p *repairPlan) catchUpDue() (time.Time, bool) {
	if !p.pending || p.armed {
		return time.Time{}, false
	}
	p.armed = true
	return p.fetch.At.Add(p.settle), true
}

// catchUp is the round after the last fetch: a random peer of now other than the one fetched
// from (that one, unless it is the only peer). false: no round is pending, or no peer.
func (p *repairPlan) catchUp(now []Peer) (Peer, bool) {
	if !p.pending {
		return Peer{}, false
	}
	p.pending = false
	if len(now) == 0 {
		return Peer{}, false
	}
	others := make([]Peer, 0, len(now))
	for _, q := range now {
		if q.Name != p.fetch.From {
			others = append(others, q)
		}
	}
	if len(others) == 0 {
		others = now
	}
	return others[rand.IntN(len(others))], true
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
