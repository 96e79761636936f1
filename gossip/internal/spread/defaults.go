package spread

import "time"

// Defaults of the spreading settings: gossip.Config takes them for its fields of the same
// names when they are zero (gossip.DefaultConfig).
const (
	// DefaultFlushInterval is how long a learned home waits to be batched with others. 75 ms
	// keeps the ~1-3 s end-to-end budget (docs/REFERENCE.md, "Homes") while turning a burst of
	// learnings into one event instead of dozens: serf's capacity is a few events per second
	// cluster-wide (measured on serf), not homes per second.
	DefaultFlushInterval = 75 * time.Millisecond

	// DefaultMaxFlushInterval bounds how far backpressure widens the flush interval: under
	// overload an event then carries up to 2 s of learnings, and a home still reaches every
	// entry within a few seconds, or repair carries it.
	DefaultMaxFlushInterval = 2 * time.Second

	// DefaultMaxPending bounds the homes waiting to be published (~100 B each with their
	// names). When it is full the oldest is dropped and counted: anti-entropy repair carries
	// it. Marks have their own small bound, maxPendingMarks.
	DefaultMaxPending = 4096

	// DefaultMaxEventsPerFlush bounds the events one flush hands serf, so that a backlog does
	// not land in serf's queue at once (serf sends the newest first and older ones starve).
	DefaultMaxEventsPerFlush = 4

	// DefaultQueueHigh and DefaultQueueLow are the depths of serf's event queue (events still
	// being retransmitted, this entry's and relayed ones) above which the flush interval
	// doubles and below which it halves back. Healthy, the queue holds about rate x 0.2 s
	// (retransmits / packets per second): a handful of events. Tens mean overload.
	DefaultQueueHigh = 32
	DefaultQueueLow  = 8

	// DefaultRecvQueue bounds the events received and not yet applied. serf hands events
	// over while holding its event lock on memberlist's packet goroutine, so the handler only
	// enqueues; when the worker falls this far behind, events are dropped and counted.
	DefaultRecvQueue = 1024

	// DefaultDirectCopies and DefaultDirectCopyInterval: homes go straight to every member
	// (direct.go), each packet DirectCopies times, DirectCopyInterval apart. With 1 % loss a
	// (home, entry) pair misses all 3 copies with probability 1e-6, so even at 100 entries a
	// home almost never waits for repair; spacing the copies lets a short loss burst pass.
	// A lost first copy costs that pair one interval.
	DefaultDirectCopies       = 3
	DefaultDirectCopyInterval = 50 * time.Millisecond

	// DefaultDirectBudget is what one entry's direct batches may send to each member, in
	// bytes a second (a burst of one second's worth above it), two thirds of the 30 KB/s an
	// entry's gossip may cost, the rest left to serf and repair. First copies come
	// before the extra copies; what the budget cannot send waits in MaxPending (the oldest
	// dropped past it, counted) and repair carries it. At about 11.5 bytes a home in full
	// batches: some 1,700 homes a second from one entry with one copy, about 580 with three.
	DefaultDirectBudget = 20_000

	// DefaultDirectLimit and DefaultRelayFlush: while sending its homes straight to every
	// member would cost an entry more than DirectLimit bytes a second (in a keyed cluster,
	// every member able to relay), they go through relays in groups of about sqrt(N)/2 members
	// (relay.go), which pack the homes they pass on every RelayFlush, or longer in large groups
	// (relayPacketRate); below half of it, straight again: one hop. 100 entries learning 50
	// homes a second between them cost each about 13 KB/s direct, and stay direct; 500 a
	// second, about 130 KB/s, and go through relays (bench/msgsim: about 20 KB/s an entry,
	// the most any entry sends 26-29 KB/s, at 100, 1,000 and 5,000 entries alike).
	DefaultDirectLimit = 20_000
	DefaultRelayFlush  = 500 * time.Millisecond
	// DefaultRelayAckTimeout is how long an acked packet waits for its acks before it is sent
	// again (acked.go): above the longest round trip between two PoPs (about 300 ms), so a
	// resend is for a lost packet, not a slow one.
	DefaultRelayAckTimeout = 400 * time.Millisecond
)

// maxPendingMarks bounds the marks and clears waiting to be published. A region makes at most
// one read mark a second (homes.markResend), so a handful per region is plenty.
const maxPendingMarks = 256
