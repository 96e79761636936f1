package node

import (
	"errors"

	"github.com/fenec/fenec-entry/certs"
	"github.com/fenec/fenec-entry/gossip"
	"github.com/fenec/fenec-entry/state"
)

// openState opens --state-dir and restores the home table from it (package state), before
// anything reads the table. A directory that cannot hold the state is a *ConfigError naming
// --state-dir; a damaged or foreign file is not an error (state logs it, the table starts
// empty). Called from New.
func (n *Node) openState() error {
	c := n.cfg
	if c.StateDir == "" {
		return nil
	}
	s, err := state.Open(state.Config{
		Dir:      c.StateDir,
		Table:    n.homes,
		Node:     c.Node,
		MaxHomes: c.Homes,
		Validate: gossip.NewValidator(c.RegionNames(), c.Clock.Now).Home,
		Clock:    c.Clock,
		Logger:   n.log,
		Metrics:  state.NewMetrics(n.reg),
	})
	if err != nil {
		if de := (*state.DirError)(nil); errors.As(err, &de) {
			return cfgErr("state-dir", "%s", de.Msg)
		}
		return err
	}
	n.state = s
	n.warm = s.Restore().Homes > 0
	return nil
}

// openTickets makes the client listener's session ticket keys (package certs), read from
// --state-dir when it is set (openState has checked it), else kept in memory only. Called from
// New with --tls-cert, before the listener serves.
func (n *Node) openTickets() {
	n.tickets = certs.NewTicketKeys(certs.TicketConfig{
		Dir:        n.cfg.StateDir,
		Clock:      n.cfg.Clock,
		Logger:     n.log,
		Registerer: n.reg,
	})
}

// flushState writes the home table a last time, at the end of a drain (requests have ended,
// gossip is closed: nothing changes it any more).
func (n *Node) flushState() {
	if n.state == nil {
		return
	}
	wrote, err := n.state.Flush()
	switch {
	case err != nil:
		n.log.Warn().Err(err).Str("file", n.state.Path()).Msg("state: the drain's write of the home table failed")
	case wrote:
		n.log.Info().Str("file", n.state.Path()).Int("homes", n.homes.Len()).Msg("state: home table written at the drain")
	default:
		n.log.Info().Str("file", n.state.Path()).Int("homes", n.homes.Len()).Msg("state: the home table is as last written or restored: not written again at the drain")
	}
}
