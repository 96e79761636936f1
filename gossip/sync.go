package gossip

import (
	"context"
	"net"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/fenec/fenec-entry/gossip/internal/mux"
	"github.com/fenec/fenec-entry/gossip/internal/tablesync"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/clock"
)

// The joiner's table and anti-entropy repair (package tablesync), served and fetched over the
// gossip address, as gossip's callers name them.
type (
	// Sync serves this entry's table to peers and brings peers' tables here (Gossip.Sync).
	Sync = tablesync.Sync
	// Peer is another entry as the table's client sees it: its name and gossip address.
	Peer = tablesync.Peer
	// StatusError is a peer's refusal: its status and JSON error.
	StatusError = tablesync.StatusError
	// RepairResult is what one repair round did.
	RepairResult = tablesync.RepairResult
)

// Errors of a table stream (Sync.Fetch, Sync.Repair). Applied records stay applied.
var (
	ErrTruncated = tablesync.ErrTruncated
	ErrBadSeal   = tablesync.ErrBadSeal
	ErrBadReply  = tablesync.ErrBadReply
	ErrTooLarge  = tablesync.ErrTooLarge
)

// TableDigest is an order-independent digest of t's homes (tenant, region and version), as
// 16 hex digits: entries whose tables hold the same homes show the same digest
// (/status.json).
func TableDigest(t *homes.Table) string { return tablesync.TableDigest(t) }

// Sync is the joiner's table and repair over this Gossip's address.
func (g *Gossip) Sync() *Sync { return g.sync }

// syncPeers are the alive members to fetch a table from or repair with, at their gossip
// address.
func (g *Gossip) syncPeers() []Peer {
	ps := g.Peers()
	out := make([]Peer, 0, len(ps))
	for _, p := range ps {
		out = append(out, Peer{Name: p.Name, Addr: p.Addr})
	}
	return out
}

// dialSync opens a sync stream to a member's gossip address through the current transport:
// its first byte tells the peer's transport it is not memberlist's.
func (g *Gossip) dialSync(ctx context.Context, _, addr string) (net.Conn, error) {
	g.mu.Lock()
	inc := g.inc
	g.mu.Unlock()
	if inc == nil {
		return nil, errNoTransport
	}
	timeout := 2 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, dl.Sub(clock.System.Now()))
	}
	c, err := inc.tr.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
	if err != nil {
		return nil, err
	}
	c.SetWriteDeadline(clock.System.Now().Add(timeout))
	if _, err := c.Write([]byte{mux.SyncMagic}); err != nil {
		c.Close()
		return nil, err
	}
	c.SetWriteDeadline(time.Time{})
	return c, nil
}
