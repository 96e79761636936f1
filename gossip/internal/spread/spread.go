package spread

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/gossip/internal/keyring"
	"github.com/fenec/fenec-entry/gossip/internal/validate"
	"github.com/fenec/fenec-entry/gossip/internal/wire"
	"github.com/fenec/fenec-entry/homes"
)

// Setup is what New is handed: the settings (Config, gossip.Config's Spread as it is), this
// entry's identity and table, and the membership and the transport it works through, as
// functions gossip gives it. Every field is required but Registerer.
type Setup struct {
	Config

	NodeName  string       // this entry's: the sender of its events and packets
	Keys      keyring.Keys // direct packets are sealed with the primary key, opened under any
	Label     string       // the cluster label, sealed into every direct packet
	Table     *homes.Table // its change feed is published; what peers send is applied to it
	Validator *validate.Validator
	Now       func() time.Time // every reading of the time: stamps, arrivals, budgets, what is due
	Logger    zerolog.Logger
	// Registerer gets the spreading metrics; nil: none are registered (they still count).
	Registerer prometheus.Registerer

	// The membership, as gossip sees it. Peers are the members a direct batch goes to, every
	// member but this entry (nil while there are none to be had); the list is shared and never
	// changed. PeerAddr is a member's address, where an ack goes. Plan is where batches go
	// through relays, nil while there can be none (NewPlan). RTT is the round trip to a member, false
	// while unknown.
	Peers    func() []memberlist.Address
	PeerAddr func(name string) (memberlist.Address, bool)
	Plan     func() *Plan
	RTT      func(node string) (time.Duration, bool)

	// What it sends through. Send hands serf a user event (EventName) of payload; Depth is
	// serf's user event queue depth (-1 unknown); Write sends a direct packet to one member.
	Send  func(payload []byte) error
	Depth func() int
	Write func(pkt []byte, to memberlist.Address) error
}

// Spread publishes what this entry learns (the table's change feed) to every member and
// applies what members send it: homes in direct packets (or through relays, acked, in large
// fleets), marks and clears as serf user events. New builds it, Run runs its goroutines until
// its context ends; HandlePacket and HandleEvent take what the transport and serf deliver,
// from the first packet on, before Run too.
type Spread struct {
	cfg   Setup
	log   zerolog.Logger
	m     *metrics
	codec *wire.Codec
	dedup *directDedup // owned by the transport's goroutine (HandlePacket)
	recvq chan inbound
	pub   *publisher
	recv  *receiver
	relay *relayer
	acks  *ackedSender // relay mode's sends (acked.go)
	acker *acker       // relay mode's acks of what this entry takes
}

// New builds a Spread on cfg and registers its metrics. It starts nothing.
func New(cfg Setup) (*Spread, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("spread: %w", err)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Spread{
		cfg:   cfg,
		log:   cfg.Logger,
		m:     m,
		codec: wire.NewCodec(cfg.Keys, cfg.Label),
		dedup: newDirectDedup(),
		recvq: make(chan inbound, cfg.RecvQueue),
	}
	s.pub = newPublisher(cfg, cfg.Send, cfg.Depth, m, cfg.Logger)
	s.recv = &receiver{table: cfg.Table, v: cfg.Validator, dec: wire.NewDecoder(), m: m, log: cfg.Logger,
		now: cfg.Now, rtt: cfg.RTT}
	now := cfg.Now
	s.acks = newAckedSender(s.codec, cfg.Write, m, cfg.RelayAckTimeout, now)
	s.acker = &acker{self: cfg.NodeName, in: make(chan ackReq, ackQueue), codec: s.codec,
		addr: cfg.PeerAddr, write: cfg.Write, m: m}
	s.pub.direct = &directSender{codec: s.codec, peers: cfg.Peers, copies: cfg.DirectCopies,
		every: cfg.DirectCopyInterval, m: m, write: cfg.Write,
		budget: newTokenBucket(float64(cfg.DirectBudget), now()), plan: cfg.Plan,
		acks: s.acks, self: cfg.NodeName, now: now}
	s.pub.direct.rule.limit = float64(cfg.DirectLimit)
	if cfg.DirectLimit >= 0 {
		s.pub.direct.own = newOwnBudget(float64(cfg.DirectLimit), now())
	}
	s.pub.direct.rule.homeBytes = float64(directHomeBytes * max(cfg.DirectCopies, 1))
	s.recv.seen = &s.pub.direct.rule.seen
	s.relay = &relayer{in: make(chan []byte, relayQueue), every: cfg.RelayFlush, plan: cfg.Plan, m: m,
		dec: wire.NewDecoder(), enc: wire.NewEncoder(cfg.NodeName, cfg.EventSizeLimit, cfg.Now), acks: s.acks, now: now}
	return s, nil
}

// Relaying reports whether this entry's homes go through relays now (relayRule), and what
// sending them straight to every member costs, in bytes a second, by the rule's estimate.
func (s *Spread) Relaying() (on bool, directBytes float64) {
	return s.pub.direct.rule.state()
}

// Run publishes and applies until ctx ends: the publisher, the receiver, the relay, the
// acked sender's resends and the acker. It returns once they all have.
// What is pending then is left to repair.
func (s *Spread) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.relay.run(ctx) })
	wg.Go(func() { s.acks.run(ctx) })
	wg.Go(func() { s.acker.run(ctx) })
	wg.Go(func() { s.recv.run(ctx, s.recvq) })
	s.pub.run(ctx)
	wg.Wait()
}

// HandleEvent takes the payload of a serf user event named EventName, on serf's event loop:
// it queues it for the receiver, unless this entry sent it. It never blocks: with the queue
// full the event is dropped and counted.
func (s *Spread) HandleEvent(payload []byte) {
	if sender, ok := wire.Sender(payload); ok && sender == s.cfg.NodeName {
		return // our own, handed back by serf
	}
	s.m.eventsReceived.Inc()
	select {
	case s.recvq <- inbound{payload: payload, at: s.cfg.Now()}:
	default:
		s.m.eventsDropped.WithLabelValues("recv_queue_full").Inc()
	}
}

// HandleOtherEvent counts a serf user event of another name than EventName, which this
// entry ignores: a later release's kind of event, or an operator's serf event.
func (s *Spread) HandleOtherEvent() { s.m.eventsOther.Inc() }

// Flush has the publisher send what is pending now, as a tick would but ignoring the
// interval (within MaxEventsPerFlush), and returns once it has: tests send without waiting
// for a tick. It fails if ctx ends before the publisher (Run's) took the request or did it.
func (s *Spread) Flush(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case s.pub.flushReq <- done:
	case <-ctx.Done():
		return fmt.Errorf("spread: the publisher took no flush request: %w", ctx.Err())
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("spread: the publisher did not flush: %w", ctx.Err())
	}
}

// HandlePacket takes a direct packet from the transport's goroutine: it opens it and
// queues its payload for the receiver, once per payload (its copies are counted and
// dropped). It never blocks.
func (s *Spread) HandlePacket(pkt []byte) {
	payload, kind, err := s.codec.OpenKind(pkt)
	if err != nil {
		s.m.directReceived.WithLabelValues("invalid").Inc()
		s.log.Debug().Err(err).Int("bytes", len(pkt)).Msg("gossip: invalid direct packet dropped")
		return
	}
	switch kind {
	case wire.KindAck:
		from, ns, ok := wire.DecodeAck(payload)
		if !ok {
			s.m.directReceived.WithLabelValues("invalid").Inc()
			return
		}
		for _, n := range ns {
			s.acks.ack(from, n)
		}
	case wire.KindRelay, wire.KindAcked:
		// Acked (acked.go): a copy already taken is acked again (its first ack may have been
		// lost); one this entry could not queue is not, so that it comes again.
		res := s.acceptDirect(payload)
		if res == accepted || res == duplicate {
			sender, _ := wire.Sender(payload)
			s.acker.queue(sender, wire.NonceOf(pkt))
		}
		if res == accepted && kind == wire.KindRelay {
			// This entry is a relay for the batch's shard: pass it on to its group.
			s.relay.forward(payload)
		}
	default:
		s.acceptDirect(payload)
	}
}

// acceptance is what acceptDirect did with a payload.
type acceptance int

const (
	accepted  acceptance = iota // queued for the receiver
	duplicate                   // queued before
	refused                     // invalid, or the receiver's queue was full
)

// acceptDirect queues a direct payload for the receiver, once (its copies and second paths
// are counted and dropped), and says what it did. It never blocks.
func (s *Spread) acceptDirect(payload []byte) acceptance {
	if sender, ok := wire.Sender(payload); !ok || sender == s.cfg.NodeName {
		s.m.directReceived.WithLabelValues("invalid").Inc()
		return refused
	}
	if s.dedup.has(payload) {
		s.m.directReceived.WithLabelValues("duplicate").Inc()
		return duplicate
	}
	select {
	case s.recvq <- inbound{payload: payload, at: s.cfg.Now()}:
		s.dedup.add(payload)
		s.m.directReceived.WithLabelValues("new").Inc()
		return accepted
	default:
		s.m.eventsDropped.WithLabelValues("recv_queue_full").Inc()
		return refused
	}
}
