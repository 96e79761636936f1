package gossip

import (
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"

	"github.com/fenec/fenec-entry/gossip/internal/spread"
	"github.com/fenec/fenec-entry/gossip/internal/wire"
)

// What serf's membership hands spread: the members a direct batch goes to, a member's address
// for an ack, the relay plan, and serf's events. The lists are made again after a member
// event or a second, and shared meanwhile.

// RelayStatus is how homes travel from this entry now (Gossip.Relays).
type RelayStatus = spread.RelayStatus

// Relays says how homes travel from this entry now, from the plan its batches go by.
func (g *Gossip) Relays() RelayStatus {
	p := g.relayPlan()
	st := p.Status()
	on, bytes := g.spread.Relaying()
	st.On, st.DirectBytes = on && p != nil, bytes
	return st
}

// peerList is directPeers' cache: the list, shared and never changed once made (queued
// copies hold it), by name too, for the serf it was read from, and when.
type peerList struct {
	list   []memberlist.Address
	byName map[string]memberlist.Address
	serf   *serf.Serf
	at     time.Time
}

// peersMaxAge bounds how long directPeers' list is used without a member event.
const peersMaxAge = time.Second

// directPeers are the members a direct batch goes to: every one serf lists alive (memberlist's
// alive or suspect), but this entry. None while serf is down. The list is made again after a
// member event or a second, not for every batch: at 5,000 members a fresh list a batch (and
// one held by each queued copy) was megabytes a second of garbage.
func (g *Gossip) directPeers() []memberlist.Address {
	s := g.serfOrNil()
	if s == nil || s.State() != serf.SerfAlive {
		return nil
	}
	if c := g.peers.Load(); c != nil && c.serf == s && !g.peersDirty.Load() && g.cfg.Clock.Now().Sub(c.at) < peersMaxAge {
		return c.list
	}
	g.peersDirty.Store(false) // before reading: an event meanwhile makes the next call read again
	// serf's Members, copies taken under serf's lock, not memberlist's: memberlist's Members
	// hands out pointers into its own table, which every alive message rewrites in place
	// (hashicorp/memberlist#306; a restarted peer made it a data race here). serf's alive
	// covers memberlist's alive and suspect.
	ms := s.Members()
	out := make([]memberlist.Address, 0, len(ms))
	by := make(map[string]memberlist.Address, len(ms))
	for _, m := range ms {
		if m.Name != g.cfg.NodeName && m.Status == serf.StatusAlive {
			a := memberlist.Address{Addr: memberAddr(m), Name: m.Name}
			out = append(out, a)
			by[m.Name] = a
		}
	}
	g.peers.Store(&peerList{list: out, byName: by, serf: s, at: g.cfg.Clock.Now()})
	return out
}

// peerAddr is a member's address, from directPeers' list: where an ack goes.
func (g *Gossip) peerAddr(name string) (memberlist.Address, bool) {
	if g.directPeers() == nil {
		return memberlist.Address{}, false
	}
	c := g.peers.Load()
	if c == nil {
		return memberlist.Address{}, false
	}
	a, ok := c.byName[name]
	return a, ok
}

// planEntry is relayPlan's cache, made again like directPeers' list.
type planEntry struct {
	plan *spread.Plan
	serf *serf.Serf
	at   time.Time
}

// relayPlan is where this entry's batches go with relays on, and which group its relay
// bundles go to; nil while relays are off (package spread's NewPlan).
func (g *Gossip) relayPlan() *spread.Plan {
	s := g.serfOrNil()
	if s == nil || s.State() != serf.SerfAlive {
		return nil
	}
	if c := g.plan.Load(); c != nil && c.serf == s && !g.planDirty.Load() && g.cfg.Clock.Now().Sub(c.at) < peersMaxAge {
		return c.plan
	}
	g.planDirty.Store(false)
	var alive []spread.Member
	for _, m := range s.Members() {
		if m.Status == serf.StatusAlive {
			alive = append(alive, spread.Member{Name: m.Name, Addr: memberAddr(m), Tags: m.Tags})
		}
	}
	p := spread.NewPlan(g.cfg.NodeName, alive, g.keys.Secure())
	g.plan.Store(&planEntry{plan: p, serf: s, at: g.cfg.Clock.Now()})
	return p
}

// eventHandler is registered with serf's agent, which calls it on its event loop, the
// goroutine serf itself blocks on while holding its event lock: it only hands spread the
// user events (which it queues) or logs the member events, never waits.
type eventHandler struct{ g *Gossip }

func (h eventHandler) HandleEvent(e serf.Event) {
	g := h.g
	switch e := e.(type) {
	case serf.UserEvent:
		if e.Name == wire.EventName {
			g.spread.HandleEvent(e.Payload)
		} else {
			g.spread.HandleOtherEvent() // a later release's event, or an operator's: counted, ignored
		}
	case serf.MemberEvent:
		g.peersDirty.Store(true)
		g.planDirty.Store(true)
		for _, mem := range e.Members {
			g.log.Info().Str("event", e.Type.String()).Str("member", mem.Name).
				Str("addr", memberAddr(mem)).Msg("gossip: member " + e.Type.String())
		}
		select {
		case g.membersChanged <- struct{}{}:
		default:
		}
	}
}
