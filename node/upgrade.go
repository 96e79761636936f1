package node

import (
	"context"
	"io"
	"net"
	"os"
	"time"

	"github.com/fenec/fenec-entry/gossip"
	"github.com/fenec/fenec-entry/internal/clock"
	"github.com/fenec/fenec-entry/state"
)

// Upgrades is an in-place upgrade of the binary as the node uses it (package upgrade is the
// one the command hands it): the sockets and table a new process takes over, and the hand-over
// that ends the old one (docs/OPERATIONS.md, "Upgrading the binary").
type Upgrades interface {
	// Listen returns the TCP listener the previous process passed as name (a flag) for addr,
	// or a new one.
	Listen(name, addr string) (net.Listener, error)
	// Table is the home table the previous process handed over, in the state file's format;
	// nil if none.
	Table() (*os.File, error)
	// HasParent says whether an upgrade in place started this process (a previous one
	// still holds the gossip address until this one is ready).
	HasParent() bool
	// Ready says this process serves: the previous one, if any, stops its gossip and drains.
	Ready() error
	// GossipFree is closed once the previous process has stopped its gossip (at once if
	// there was none).
	GossipFree() <-chan struct{}
	// Upgrade starts the new binary with this process's listeners and the table writeTable
	// writes, and returns nil once it is ready; an error leaves this process serving.
	Upgrade(writeTable func(io.Writer) error) error
	// ReleaseGossip tells the new process this one's gossip has stopped.
	ReleaseGossip()
	// Stop ends upgrades and closes the socket copies kept for them: a drain (not an
	// upgrade's) stops listening.
	Stop()
	// Inherited is what the processes before this one counted (fenec_entry_upgrades_total),
	// the upgrade that started this one included; 0 and 0 for a process started otherwise.
	Inherited() (ready, failed int)
}

// gossipFreeWait bounds how long a process an upgrade started waits for the previous one to
// stop its gossip before it starts its own (the previous one does so as soon as this one is
// ready; past the bound it is stuck, and binding the address may fail: gossip then reports
// down and the entry serves alone).
const gossipFreeWait = 10 * time.Second

// listen binds the entry's listener of flag at addr: the one an upgrade passed, else a new one.
func (n *Node) listen(ctx context.Context, flag, addr string) (net.Listener, error) {
	if u := n.cfg.Upgrades; u != nil {
		return u.Listen(flag, addr)
	}
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", addr)
}

// takeTable puts back the home table the process an upgrade replaced handed over, after the
// one --state-dir restored (it is newer; versions decide each home). Called from New.
func (n *Node) takeTable() {
	u := n.cfg.Upgrades
	if u == nil {
		return
	}
	f, err := u.Table()
	if err != nil {
		n.log.Error().Err(err).Msg("upgrade: the home table handed over cannot be read: starting without it")
		return
	}
	if f == nil {
		return
	}
	defer f.Close()
	r, err := state.ReadTable(f, n.homes, n.cfg.Node, gossip.NewValidator(n.cfg.RegionNames(), n.cfg.Clock.Now).Home)
	if err != nil && r.Result != "restored" {
		n.log.Error().Err(err).Str("result", r.Result).Msg("upgrade: the home table handed over is not a table: starting without it")
		return
	}
	n.warm = n.homes.Len() > 0
	n.log.Info().Int("homes", r.Homes).Int("local", r.Local).Stringer("age", n.cfg.Clock.Now().Sub(r.Written).Round(time.Millisecond)).
		Msg("upgrade: home table handed over by the previous process")
}

// readyForUpgrades says this process serves (Upgrades.Ready) and waits, bounded, for the
// previous process to stop its gossip. Called from startLocked once the listeners serve,
// before gossip starts.
func (n *Node) readyForUpgrades(ctx context.Context) {
	u := n.cfg.Upgrades
	if u == nil {
		return
	}
	if err := u.Ready(); err != nil {
		n.log.Error().Err(err).Msg("upgrade: could not say this process is ready (the PID file?)")
	}
	t := time.NewTimer(gossipFreeWait)
	defer t.Stop()
	select {
	case <-u.GossipFree():
	case <-t.C:
		n.log.Error().Stringer("waited", gossipFreeWait).Msg("upgrade: the previous process has not stopped its gossip: starting ours anyway")
	case <-ctx.Done():
	}
}

// upgrade starts the new binary on this entry's sockets with its table (SIGUSR2), and
// reports whether it is ready and this entry has handed over: the caller then drains it
// (drainAfterUpgrade). A new binary that fails leaves this entry serving, counted and logged.
func (n *Node) upgrade() bool {
	u := n.cfg.Upgrades
	if u == nil {
		n.log.Warn().Msg("SIGUSR2: this process cannot be upgraded in place (see docs/OPERATIONS.md); nothing changed")
		return false
	}
	if n.draining.Load() {
		return false
	}
	n.log.Info().Int("homes", n.homes.Len()).Msg("upgrade: starting the new binary on this entry's sockets")
	start := clock.System.Now() // the hand-over's real duration
	err := u.Upgrade(func(w io.Writer) error {
		_, _, err := state.WriteTable(w, n.homes, n.cfg.Node, n.cfg.Clock.Now(), n.cfg.Homes)
		return err
	})
	if err != nil {
		n.upgrades.WithLabelValues("failed").Inc()
		n.log.Error().Err(err).Msg("upgrade failed: this process keeps serving")
		return false
	}
	n.upgrades.WithLabelValues("ready").Inc()
	n.handedOver.Store(true)
	n.log.Info().Stringer("took", clock.System.Now().Sub(start).Round(time.Millisecond)).
		Msg("upgrade: the new process is ready; this one hands over gossip and drains")
	return true
}
