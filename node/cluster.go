package node

import (
	"context"
	"errors"
	"time"

	"github.com/fenec/fenec-entry/gossip"
)

// Gossip timing of a start (docs/REFERENCE.md, "Homes": a joining entry holds the table within 5
// s).
const (
	joinWait      = 2 * time.Second         // how long a start waits for a first peer before serving alone
	bootstrapWait = 2500 * time.Millisecond // how long it then tries to fetch the table
	leaveTimeout  = 3 * time.Second         // Leave's bound in a drain
	// gossipBindWait: how long the gossip address in use is tried again by the process an
	// upgrade in place started (gossip.Config.BindWait), as the one it replaces lets it go;
	// any other start finds it taken by another program and says so at once.
	gossipBindWait = 5 * time.Second
)

// gossipEnabled: gossip runs with a key, or in the clear with --insecure-gossip. Without
// either there is no peer to join (Validate refuses peers without a key) and the entry serves
// alone, with no gossip listener for strangers to join in the clear.
func (c Config) gossipEnabled() bool { return len(c.GossipKey) > 0 || c.InsecureGossip }

// startCluster starts gossip with this entry's tags: serf, direct homes, the joiner's table
// and repair, all on --gossip-bind. Readiness waits for the table of a first peer, within
// the bounds above. Called from startLocked, under n.mu.
func (n *Node) startCluster(ctx context.Context) error {
	c := n.cfg
	var key []byte // nil, not empty, in the clear: gossip reads nil as "no key"
	if len(c.GossipKey) > 0 {
		key = []byte(c.GossipKey)
	}
	gc := gossip.DefaultConfig()
	gc.NodeName, gc.BindAddr, gc.AdvertiseAddr = c.Node, c.GossipBind, c.GossipAdvertise
	gc.Join, gc.JoinDNS = c.Join, c.JoinDNS
	gc.Key, gc.Insecure = key, c.InsecureGossip
	gc.Tags = map[string]string{"pop": c.Pop, "continent": c.Continent, "version": n.version()}
	gc.RPCAddr, gc.RPCAuth = c.RPCAddr, string(c.RPCAuth)
	gc.Table, gc.Regions, gc.Capacity = n.homes, c.RegionNames(), c.Homes
	gc.Logger, gc.Registerer, gc.Clock = n.log, n.reg, c.Clock
	if n.state != nil {
		gc.SnapshotPath = n.state.SerfSnapshotPath()
	}
	if n.cfg.Upgrades != nil && n.cfg.Upgrades.HasParent() {
		// The process an upgrade started binds the gossip address as the one it replaces
		// lets it go: a bind refused now would leave no process serving.
		gc.BindWait = gossipBindWait
	}
	g, err := gossip.New(gc)
	if err != nil {
		return err
	}
	if err := g.Start(ctx); err != nil {
		var be *gossip.BindError
		if errors.As(err, &be) {
			return be // "--gossip-bind: listen tcp ...", as --listen's: the flag, then the system's words
		}
		return err
	}
	n.cluster = g
	switch {
	case c.hasPeersToJoin() && n.warm:
		// docs/REFERENCE.md, "Homes" with warm state: the restored table is what a peer's would
		// bring (versions decide between them), so ready now; the peer's table still comes.
		n.log.Info().Int("homes", n.homes.Len()).
			Msg("warm start: ready with the restored home table; fetching a peer's in the background")
	case c.hasPeersToJoin():
		n.ready.Store(false)
	}
	n.wg.Go(func() { n.bootstrap(c.hasPeersToJoin()) })
	n.wg.Go(func() { g.RunRepair(n.bg) })
	return nil
}

// bootstrap makes the entry ready once it holds a peer's table: it waits up to joinWait for a
// first peer and then up to bootstrapWait for a snapshot. With no peer answering it is ready
// at once and serves alone (repair brings the table once a peer appears).
func (n *Node) bootstrap(peersToJoin bool) {
	defer n.ready.Store(true)
	if !peersToJoin {
		return
	}
	ctx, cancel := context.WithTimeout(n.bg, joinWait+bootstrapWait)
	defer cancel()
	if err := n.cluster.Bootstrap(ctx, joinWait); err != nil {
		n.log.Warn().Err(err).Msg("could not fetch the home table from a peer: ready, repair will bring it")
	}
}

// leaveCluster leaves gossip gracefully (peers see "left" at once), bounded.
func (n *Node) leaveCluster() {
	g := n.getCluster()
	if g == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	if err := g.Leave(ctx); err != nil {
		if ctx.Err() != nil && !othersAlive(g.Members(), n.cfg.Node) {
			// Every peer is leaving or gone too (two entries stopped together): there was
			// no one left to tell, and that is a clean stop, not a warning.
			n.log.Info().Err(err).Msg("gossip: leave: no peer alive to tell")
			return
		}
		n.log.Warn().Err(err).Msg("gossip: leave")
	}
}

// othersAlive says whether a member other than self is alive in members.
func othersAlive(members []gossip.Member, self string) bool {
	for _, m := range members {
		if m.Name != self && m.State == "alive" {
			return true
		}
	}
	return false
}

// closeCluster stops gossip at once.
func (n *Node) closeCluster() {
	if g := n.getCluster(); g != nil {
		g.Close()
	}
}

// gossipUp reports whether gossip runs and this entry is a member.
func (n *Node) gossipUp() bool {
	g := n.getCluster()
	return g != nil && g.Up()
}

func (n *Node) getCluster() *gossip.Gossip {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cluster
}

// Members returns the gossip members, nil when gossip is off or serf is shut down.
func (n *Node) Members() []gossip.Member {
	g := n.getCluster()
	if g == nil {
		return nil
	}
	return g.Members()
}
