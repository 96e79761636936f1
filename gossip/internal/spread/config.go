package spread

import (
	"fmt"
	"time"

	"github.com/fenec/fenec-entry/gossip/internal/wire"
)

// Config is the batching and spreading of homes and marks: gossip.Config's Spread, handed to
// New as it is. DefaultConfig fills every field; each says its default, why, and what it
// costs.
type Config struct {
	// FlushInterval (75 ms) is how long a learned home waits to be batched with others. It
	// keeps the ~1-3 s end-to-end budget (docs/REFERENCE.md, "Homes") while turning a burst of
	// learnings into one batch instead of dozens. Shorter: lower latency, more and smaller
	// batches and events (serf's capacity is a few events a second cluster-wide, not homes).
	FlushInterval time.Duration

	// MaxFlushInterval (2 s) bounds how far backpressure widens the flush interval: under
	// overload an event then carries up to 2 s of learnings, and a home still reaches every
	// entry within a few seconds, or repair carries it.
	MaxFlushInterval time.Duration

	// EventSizeLimit (wire.DefaultEventSizeLimit, 1,024 B: package wire gives its reason) is
	// what a batch or a serf user event may take, encoded; gossip hands serf the same value as
	// its UserEventSizeLimit. At least wire.MinEventSizeLimit, and gossip holds it within a
	// packet (UDPBufferSize-100). Larger: more homes a batch, fewer events sharing a packet.
	EventSizeLimit int

	// MaxPending (4,096) bounds the homes waiting to be published, about 100 B each with their
	// names. When it is full the oldest is dropped and counted: repair carries it. Marks have
	// their own small bound, maxPendingMarks.
	MaxPending int

	// MaxEventsPerFlush (4) bounds the serf events and the direct batches one flush sends, so
	// that a backlog does not land in serf's queue at once (serf sends the newest first and
	// older ones starve).
	MaxEventsPerFlush int

	// QueueHigh (32) and QueueLow (8) are the depths of serf's event queue (events still being
	// retransmitted, this entry's and relayed ones) above which the flush interval doubles and
	// below which it halves back. Healthy, the queue holds about rate x 0.2 s (retransmits /
	// packets per second): a handful of events. Tens mean overload. QueueLow is below
	// QueueHigh.
	QueueHigh, QueueLow int

	// RecvQueue (1,024) bounds the events and packets received and not yet applied, each up to
	// EventSizeLimit. serf hands events over while holding its event lock on memberlist's
	// packet goroutine, so the handler only enqueues; when the worker falls this far behind,
	// they are dropped and counted.
	RecvQueue int

	// DirectCopies (3) and DirectCopyInterval (50 ms): homes go straight to every member
	// (direct.go), each packet DirectCopies times, DirectCopyInterval apart. With 1 % loss a
	// (home, entry) pair misses all 3 copies with probability 1e-6, so even at 100 entries a
	// home almost never waits for repair; spacing the copies lets a short loss burst pass.
	// A lost first copy costs that pair one interval; each copy costs the packet again.
	DirectCopies       int
	DirectCopyInterval time.Duration

	// DirectBudget (20,000) is what one entry's direct batches may send to each member, in
	// bytes a second (a burst of one second's worth above it): two thirds of the 30 KB/s an
	// entry's gossip may cost, the rest left to serf and repair. First copies come before the
	// extra copies; what the budget cannot send waits in MaxPending (the oldest dropped past
	// it, counted) and repair carries it. At about 11.5 bytes a home in full batches: some
	// 1,700 homes a second from one entry with one copy, about 580 with three.
	DirectBudget int

	// DirectLimit (20,000) and RelayFlush (500 ms): while sending its homes straight to every
	// member would cost an entry more than DirectLimit bytes a second (in a keyed cluster,
	// every member able to relay), they go through relays in groups of about sqrt(N)/2
	// members (relay.go), which pack the homes they pass on every RelayFlush, or longer in
	// large groups (relayPacketRate); below half of it, straight again: one hop. Negative:
	// relays never. 100 entries learning 50 homes a second between them cost each about 13
	// KB/s direct, and stay direct; 500 a second, about 130 KB/s, and go through relays
	// (docs/BENCHMARKS.md, "Gossip at every size": about 22 KB/s an entry). A relay costs a
	// home one more hop and the relay's flush.
	DirectLimit int
	RelayFlush  time.Duration

	// RelayAckTimeout (400 ms) is how long an acked packet waits for its acks before it is
	// sent again (acked.go): above the longest round trip between two PoPs (about 300 ms), so
	// a resend is for a lost packet, not a slow one.
	RelayAckTimeout time.Duration
}

// DefaultConfig is the production spreading, every field as its comment gives it.
func DefaultConfig() Config {
	return Config{
		FlushInterval:      75 * time.Millisecond,
		MaxFlushInterval:   2 * time.Second,
		EventSizeLimit:     wire.DefaultEventSizeLimit,
		MaxPending:         4096,
		MaxEventsPerFlush:  4,
		QueueHigh:          32,
		QueueLow:           8,
		RecvQueue:          1024,
		DirectCopies:       3,
		DirectCopyInterval: 50 * time.Millisecond,
		DirectBudget:       20_000,
		DirectLimit:        20_000,
		RelayFlush:         500 * time.Millisecond,
		RelayAckTimeout:    400 * time.Millisecond,
	}
}

// Validate reports the first field of c that is out of range, by name. It does not change c.
func (c Config) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"FlushInterval", c.FlushInterval}, {"MaxFlushInterval", c.MaxFlushInterval},
		{"DirectCopyInterval", c.DirectCopyInterval}, {"RelayFlush", c.RelayFlush},
		{"RelayAckTimeout", c.RelayAckTimeout},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s: %v; need more than 0", d.name, d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{
		{"MaxPending", c.MaxPending}, {"MaxEventsPerFlush", c.MaxEventsPerFlush},
		{"QueueHigh", c.QueueHigh}, {"RecvQueue", c.RecvQueue}, {"DirectCopies", c.DirectCopies},
		{"DirectBudget", c.DirectBudget},
	} {
		if n.v < 1 {
			return fmt.Errorf("%s: %d; need at least 1", n.name, n.v)
		}
	}
	switch {
	case c.MaxFlushInterval < c.FlushInterval:
		return fmt.Errorf("MaxFlushInterval: %v is below FlushInterval %v", c.MaxFlushInterval, c.FlushInterval)
	case c.EventSizeLimit < wire.MinEventSizeLimit:
		return fmt.Errorf("EventSizeLimit: %d; need at least %d", c.EventSizeLimit, wire.MinEventSizeLimit)
	case c.QueueLow < 0 || c.QueueLow >= c.QueueHigh:
		return fmt.Errorf("QueueLow: %d; need 0 to QueueHigh-1 (%d)", c.QueueLow, c.QueueHigh-1)
	}
	return nil
}

// maxPendingMarks bounds the marks and clears waiting to be published. A region makes at most
// one read mark a second (homes.markResend), so a handful per region is plenty.
const maxPendingMarks = 256
