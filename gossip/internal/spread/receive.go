package spread

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/gossip/internal/validate"
	"github.com/fenec/fenec-entry/gossip/internal/wire"
	"github.com/fenec/fenec-entry/homes"
)

// inbound is a payload from a peer (a serf event or a direct packet) and when it arrived,
// by this entry's clock.
type inbound struct {
	payload []byte
	at      time.Time
}

// receiver decodes, validates and applies events from peers. One goroutine (run) owns it.
type receiver struct {
	table *homes.Table
	v     *validate.Validator
	dec   *wire.Decoder
	m     *metrics
	log   zerolog.Logger
	now   func() time.Time
	// rtt estimates the round trip to a member (serf's network coordinates); false if
	// unknown. Nil: unknown.
	rtt func(node string) (time.Duration, bool)
	// seen counts the homes applied, for the relay rule (relayRule.seen); nil: not counted.
	seen *atomic.Int64
}

func (r *receiver) run(ctx context.Context, q <-chan inbound) {
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-q:
			r.apply(p)
		}
	}
}

// apply applies one event's payload. An undecodable event is counted and dropped whole; a
// home or mark that fails validation is counted and skipped, and the rest of the event is
// applied (a peer configured with one region more, during a rolling deploy, still delivers
// the homes this entry can use).
func (r *receiver) apply(in inbound) {
	payload := in.payload
	sender, b, err := r.dec.Decode(payload)
	if err != nil {
		r.m.eventsInvalid.Inc()
		r.log.Debug().Err(err).Str("sender", sender).Int("bytes", len(payload)).Msg("gossip: invalid event dropped")
		return
	}
	if len(sender) > validate.MaxNodeName {
		r.m.eventsInvalid.Inc()
		return
	}
	// Marks first, as sent.
	for _, w := range b.M {
		m := w.Mark(sender)
		if err := r.v.Mark(m); err != nil {
			r.m.itemsInvalid.WithLabelValues("mark").Inc()
			r.log.Debug().Err(err).Str("sender", sender).Msg("gossip: invalid mark dropped")
			continue
		}
		if r.table.ApplyMark(m) {
			r.m.marksApplied.Inc()
			what := "region failure heard from a peer"
			if m.Clear {
				what = "region clear heard from a peer"
			}
			r.log.Info().Str("region", m.Region).Str("observer", m.Observer).Time("at", m.At).Msg(what)
		}
	}
	now := r.now()
	// The local clock's measure: the wait at the origin by the origin's clock (from the
	// home's version to the batch's S), the flight (half the round trip), and the wait here.
	var flight time.Duration
	var flightKnown bool
	if b.S != 0 && r.rtt != nil {
		if rtt, ok := r.rtt(sender); ok {
			flight, flightKnown = rtt/2, true
		}
	}
	here := max(now.Sub(in.at), 0)
	for _, w := range b.H {
		h := w.Home(sender)
		if err := r.v.Home(h); err != nil {
			r.m.itemsInvalid.WithLabelValues("home").Inc()
			r.log.Debug().Err(err).Str("sender", sender).Msg("gossip: invalid home dropped")
			continue
		}
		if h.Version.Origin == sender {
			r.m.propagation.WithLabelValues("origin").Observe(max(now.Sub(h.Version.Time()), 0).Seconds())
			if flightKnown {
				atOrigin := max(time.UnixMilli(b.S).Sub(h.Version.Time()), 0)
				r.m.propagation.WithLabelValues("local").Observe((atOrigin + flight + here).Seconds())
			}
		}
		if r.table.Apply(h) {
			r.m.homesApplied.Inc()
			if r.seen != nil {
				r.seen.Add(1)
			}
		}
	}
}
