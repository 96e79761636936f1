package node

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/fenec/fenec-entry/gossip"
)

// Gossip timing of a start (CONTRACT.md section 6: a joining entry holds the table within 5 s).
const (
	joinWait      = 2 * time.Second         // how long a start waits for a first peer before serving alone
	bootstrapWait = 2500 * time.Millisecond // how long it then tries to fetch the table
	leaveTimeout  = 3 * time.Second         // Leave's bound in a drain
)

// cluster is a node's part in the gossip cluster: serf membership and events (gossip.Gossip),
// and the snapshot listener that serves peers the home table (gossip.Sync).
type cluster struct {
	g       *gossip.Gossip
	sync    *gossip.Sync
	snapSrv *http.Server
}

// gossipEnabled: gossip runs with a key, or in the clear with --insecure-gossip. Without
// either there is no peer to join (Validate refuses peers without a key) and the entry serves
// alone, with no gossip listener for strangers to join in the clear.
func (c Config) gossipEnabled() bool { return len(c.GossipKey) > 0 || c.InsecureGossip }

// startCluster binds the snapshot listener, starts serf with this entry's tags (the snapshot
// port among them), and the joiner: readiness waits for the table of a first peer, within
// the bounds above. Called from startLocked, under n.mu.
func (n *Node) startCluster(ctx context.Context) error {
	c := n.cfg
	var lc net.ListenConfig
	sl, err := lc.Listen(ctx, "tcp", c.SnapshotListen)
	if err != nil {
		return errors.Join(errors.New("--snapshot-listen"), err)
	}
	_, snapPort, _ := net.SplitHostPort(sl.Addr().String())
	var key []byte // nil, not empty, in the clear: gossip and Sync read nil as "no key"
	if len(c.GossipKey) > 0 {
		key = []byte(c.GossipKey)
	}

	g, err := gossip.New(gossip.Config{
		NodeName:      c.Node,
		BindAddr:      c.GossipBind,
		AdvertiseAddr: c.GossipAdvertise,
		Join:          c.Join,
		JoinDNS:       c.JoinDNS,
		Key:           key,
		Insecure:      c.InsecureGossip,
		Tags: map[string]string{
			"pop": c.Pop, "continent": c.Continent, "version": n.version(), "snap": snapPort,
		},
		RPCAddr:    c.RPCAddr,
		RPCAuth:    string(c.RPCAuth),
		Table:      n.homes,
		Regions:    c.RegionNames(),
		Logger:     n.log,
		Registerer: n.reg,
	})
	if err != nil {
		sl.Close()
		return err
	}
	peers := func() []gossip.Peer {
		var out []gossip.Peer
		for _, p := range g.Peers() {
			host, _, err := net.SplitHostPort(p.Addr)
			port, perr := strconv.Atoi(p.Tags["snap"])
			if err != nil || perr != nil || port <= 0 {
				continue // not an entry that serves snapshots
			}
			out = append(out, gossip.Peer{Name: p.Name, SnapAddr: net.JoinHostPort(host, strconv.Itoa(port))})
		}
		return out
	}
	sy, err := gossip.NewSync(gossip.SyncConfig{
		Node:       c.Node,
		Key:        key,
		Table:      n.homes,
		Validator:  gossip.NewValidator(c.RegionNames(), nil),
		MemberAddr: g.MemberAddr,
		Peers:      peers,
		Capacity:   c.Homes,
		Logger:     n.log,
		Registerer: n.reg,
	})
	if err != nil {
		sl.Close()
		return err
	}
	if err := g.Start(ctx); err != nil {
		sl.Close()
		return err
	}
	n.cluster = &cluster{g: g, sync: sy, snapSrv: &http.Server{
		Handler:           sy.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idleTimeout,
		ErrorLog:          httpErrorLog(n.log, "snapshot"),
	}}
	n.serve("--snapshot-listen", func() error { return n.cluster.snapSrv.Serve(sl) })

	if c.hasPeersToJoin() {
		n.ready.Store(false)
	}
	n.wg.Go(func() { n.bootstrap(c.hasPeersToJoin()) })
	n.wg.Go(func() { sy.Run(n.bg) })
	n.wg.Go(func() { n.repairOnRejoin(peers) })
	return nil
}

// rejoinEvery is how often repairOnRejoin looks for peers that came (back) alive.
const rejoinEvery = time.Second

// repairOnRejoin pulls differences from every peer that becomes alive (a partition healed, a
// frozen or restarted entry is back): what either side learned meanwhile travels at once
// instead of waiting for the periodic repair to pick that peer (which, with a random peer
// every ~30 s, can take minutes). Both sides see each other come back, so both pull.
func (n *Node) repairOnRejoin(peers func() []gossip.Peer) {
	alive := map[string]bool{}
	first := true
	t := time.NewTicker(rejoinEvery)
	defer t.Stop()
	for {
		now := map[string]bool{}
		for _, p := range peers() {
			now[p.Name] = true
			if !alive[p.Name] && !first {
				ctx, cancel := context.WithTimeout(n.bg, 10*time.Second)
				if _, err := n.cluster.sync.Repair(ctx, p); err != nil {
					n.log.Debug().Err(err).Str("peer", p.Name).Msg("repair with a rejoined peer")
				}
				cancel()
			}
		}
		alive, first = now, false
		select {
		case <-n.bg.Done():
			return
		case <-t.C:
		}
	}
}

// bootstrap makes the entry ready once it holds a peer's table: it waits up to joinWait for a
// first peer and then up to bootstrapWait for a snapshot. With no peer answering it is ready
// at once and serves alone (repair brings the table once a peer appears).
func (n *Node) bootstrap(peersToJoin bool) {
	defer n.ready.Store(true)
	if !peersToJoin {
		return
	}
	deadline := time.Now().Add(joinWait)
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	for !n.cluster.g.Joined() {
		if time.Now().After(deadline) {
			n.log.Info().Msg("no peer answered yet: ready, serving alone")
			return
		}
		select {
		case <-n.bg.Done():
			return
		case <-t.C:
		}
	}
	ctx, cancel := context.WithTimeout(n.bg, bootstrapWait)
	defer cancel()
	if err := n.cluster.sync.Bootstrap(ctx); err != nil {
		n.log.Warn().Err(err).Msg("could not fetch the home table from a peer: ready, repair will bring it")
	}
}

// leaveCluster leaves gossip gracefully (peers see "left" at once), bounded.
func (n *Node) leaveCluster() {
	c := n.getCluster()
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	if err := c.g.Leave(ctx); err != nil {
		n.log.Warn().Err(err).Msg("gossip: leave")
	}
}

// closeCluster stops the snapshot listener and serf at once.
func (n *Node) closeCluster() {
	c := n.getCluster()
	if c == nil {
		return
	}
	c.snapSrv.Close()
	c.g.Close()
}

func (n *Node) getCluster() *cluster {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cluster
}

// Members returns the gossip members, nil when gossip is off.
func (n *Node) Members() []gossip.Member {
	c := n.getCluster()
	if c == nil {
		return nil
	}
	return c.g.Members()
}
