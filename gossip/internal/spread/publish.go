package spread

import (
	"context"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/gossip/internal/stablehash"
	"github.com/fenec/fenec-entry/gossip/internal/wire"
	"github.com/fenec/fenec-entry/homes"
)

// fifo is a bounded queue that drops its oldest element when full. Not safe for concurrent
// use. The zero value with a capacity set by newFIFO is empty.
type fifo[T any] struct {
	buf     []T
	head, n int
}

func newFIFO[T any](capacity int) *fifo[T] { return &fifo[T]{buf: make([]T, capacity)} }

// push appends v and reports whether it dropped the oldest element to make room.
func (q *fifo[T]) push(v T) (dropped bool) {
	if q.n == len(q.buf) {
		var zero T
		q.buf[q.head] = zero
		q.head = (q.head + 1) % len(q.buf)
		q.n--
		dropped = true
	}
	q.buf[(q.head+q.n)%len(q.buf)] = v
	q.n++
	return dropped
}

// appendTo appends the elements in order to dst.
func (q *fifo[T]) appendTo(dst []T) []T {
	for i := 0; i < q.n; i++ {
		dst = append(dst, q.buf[(q.head+i)%len(q.buf)])
	}
	return dst
}

// pop removes the k oldest elements.
func (q *fifo[T]) pop(k int) {
	var zero T
	for ; k > 0 && q.n > 0; k-- {
		q.buf[q.head] = zero
		q.head = (q.head + 1) % len(q.buf)
		q.n--
	}
}

// publisher turns the table's change feed into direct batches of homes and serf user events of
// marks. One goroutine (run) owns all of its fields.
type publisher struct {
	cfg   Setup
	feed  <-chan homes.Change
	send  func(payload []byte) error // serf.UserEvent(wire.EventName, payload, false)
	depth func() int                 // serf's event queue depth; -1 if unknown
	m     *metrics
	log   zerolog.Logger

	enc   *wire.Encoder
	marks *fifo[homes.Mark]
	homes *fifo[homes.Home]
	// pendingBytes estimates the encoded size of the pending homes and marks, to flush
	// early once they fill an event.
	pendingBytes int

	interval  time.Duration // current flush interval: FlushInterval widened by backpressure
	lastFlush time.Time

	scratchM []homes.Mark
	scratchH []homes.Home
	scratchK []uint64             // sendToRelays': the homes' tenant hashes
	scratchR map[int][]homes.Home // sendToRelays': a group's homes by relay

	// direct sends homes straight to every member, or through relays (direct.go); marks go
	// through send.
	direct *directSender

	// flushReq lets tests flush now: the publisher drains the feed, flushes everything it
	// may (ignoring the interval, within MaxEventsPerFlush) and closes the channel it got.
	flushReq chan chan struct{}
}

func newPublisher(cfg Setup, send func([]byte) error, depth func() int, m *metrics, log zerolog.Logger) *publisher {
	return &publisher{
		cfg:      cfg,
		feed:     cfg.Table.Changes(),
		send:     send,
		depth:    depth,
		m:        m,
		log:      log,
		enc:      wire.NewEncoder(cfg.NodeName, cfg.EventSizeLimit, cfg.Now),
		marks:    newFIFO[homes.Mark](maxPendingMarks),
		homes:    newFIFO[homes.Home](cfg.MaxPending),
		interval: cfg.FlushInterval,
		flushReq: make(chan chan struct{}),
	}
}

// run publishes until ctx is done. What is pending then is left to repair.
func (p *publisher) run(ctx context.Context) {
	tick := time.NewTicker(p.cfg.FlushInterval)
	defer tick.Stop()
	copyT := time.NewTimer(time.Hour)
	copyT.Stop()
	armed := false // copyT runs
	p.m.flushInterval.Set(p.interval.Seconds())
	for {
		if !armed && len(p.direct.queue) > 0 {
			copyT.Reset(max(p.direct.queue[0].due.Sub(p.cfg.Now()), 0))
			armed = true
		}
		select {
		case <-ctx.Done():
			return
		case <-copyT.C:
			armed = false
			p.direct.sendCopies(p.cfg.Now())
		case c := <-p.feed:
			p.add(c)
			// A full event's worth: send it now rather than at the tick, unless
			// backpressure has widened the interval.
			if p.pendingBytes >= p.enc.Budget() && p.interval == p.cfg.FlushInterval {
				p.flush(p.cfg.Now(), true)
			}
		case <-tick.C:
			p.tick(p.cfg.Now())
		case done := <-p.flushReq:
			for drained := false; !drained; {
				select {
				case c := <-p.feed:
					p.add(c)
				default:
					drained = true
				}
			}
			p.flush(p.cfg.Now(), false)
			close(done)
		}
	}
}

// itemOverhead estimates the msgpack bytes of a home or mark besides its strings.
const itemOverhead = 20

func (p *publisher) add(c homes.Change) {
	switch c.Kind {
	case homes.ChangeHome:
		p.direct.rule.seen.Add(1)
		if p.homes.push(c.Home) {
			p.m.pendingDropped.Inc()
		} else {
			p.pendingBytes += itemOverhead + len(c.Home.Tenant) + len(c.Home.Region)
		}
	case homes.ChangeMark:
		if p.marks.push(c.Mark) {
			p.m.pendingDropped.Inc()
		} else {
			p.pendingBytes += itemOverhead + len(c.Mark.Region)
		}
	}
}

// tick adapts the flush interval to serf's queue and flushes when the interval has passed.
// Backpressure: while serf's event queue is above QueueHigh (events queue faster than
// gossip sends them, and serf would starve then drop them), each tick doubles the interval up
// to MaxFlushInterval, so that every event carries more homes and fewer events are made;
// below QueueLow it halves back. A tick that finds changes pending but waits for the widened
// interval counts a deferred flush.
func (p *publisher) tick(now time.Time) {
	p.observeRule(now)
	if d := p.depth(); d >= 0 {
		p.m.queueDepth.Set(float64(d))
		switch {
		case d >= p.cfg.QueueHigh:
			p.interval = min(2*p.interval, p.cfg.MaxFlushInterval)
		case d <= p.cfg.QueueLow:
			p.interval = max(p.interval/2, p.cfg.FlushInterval)
		}
		p.m.flushInterval.Set(p.interval.Seconds())
	}
	if p.marks.n == 0 && p.homes.n == 0 {
		return
	}
	// A tick lands a little before or after FlushInterval since the last one (timer jitter):
	// half a tick of slack, or a jittered tick would defer a flush by a whole tick.
	if now.Sub(p.lastFlush) < p.interval-p.cfg.FlushInterval/2 {
		p.m.flushesDeferred.Inc()
		return
	}
	p.flush(now, false)
}

// observeRule brings the relay rule up to now, and its gauges.
func (p *publisher) observeRule(now time.Time) {
	p.direct.rule.observe(now)
	on, est := p.direct.rule.state()
	v := 0.0
	if on {
		v = 1
	}
	p.m.relaysOn.Set(v)
	p.m.directEstimate.Set(est)
}

// flush sends up to MaxEventsPerFlush serf events of pending marks and up to
// MaxEventsPerFlush direct batches of pending homes, as many as the send budget holds; with
// fullOnly, only events and batches that are full.
func (p *publisher) flush(now time.Time, fullOnly bool) {
	p.scratchM = p.marks.appendTo(p.scratchM[:0])
	p.scratchH = p.homes.appendTo(p.scratchH[:0])
	var events, direct []wire.Event
	var nm, nh int
	limited := false // the budget held batches back
	events, nm, _ = p.split(p.scratchM, nil, fullOnly, p.cfg.MaxEventsPerFlush)
	// As many batches as the send budget holds (each at most a UDP packet): the homes
	// beyond wait in the queue, where the oldest go past MaxPending.
	n := p.cfg.MaxEventsPerFlush
	if b := p.direct.budget; b != nil && len(p.scratchH) > 0 {
		if a := b.affordable(now, p.cfg.EventSizeLimit+wire.Overhead); a < n {
			n, limited = a, true
			p.m.budgetDeferred.Inc()
		}
	}
	if n > 0 {
		direct, _, nh = p.split(nil, p.scratchH, fullOnly, n)
	}
	p.marks.pop(nm)
	p.homes.pop(nh)
	p.recount()
	// Homes the budget held back: the extra copies wait until they have gone.
	p.direct.backlog = limited && p.homes.n > 0
	if len(events)+len(direct) > 0 {
		p.lastFlush = now
	}
	for _, ev := range events {
		if err := p.send(ev.Payload); err != nil {
			p.m.eventsDropped.WithLabelValues("send").Inc()
			p.log.Debug().Err(err).Int("bytes", len(ev.Payload)).Msg("gossip: serf refused an event")
			continue
		}
		p.m.eventsSent.Inc()
		p.m.batchBytes.Observe(float64(len(ev.Payload) + len(wire.EventName)))
		p.m.batchHomes.Observe(float64(ev.Homes))
	}
	var plan *Plan
	if len(direct) > 0 {
		p.observeRule(now) // these homes counted before the rule decides where they go
		plan = p.direct.route(now, direct)
	}
	for _, ev := range direct {
		if err := p.direct.send(now, ev.Payload, plan); err != nil {
			p.m.eventsDropped.WithLabelValues("send").Inc()
			p.log.Warn().Err(err).Msg("gossip: sealing a direct batch failed; dropping it")
			continue
		}
		p.m.directBatches.Inc()
		p.m.batchBytes.Observe(float64(len(ev.Payload) + wire.Overhead))
		p.m.batchHomes.Observe(float64(ev.Homes))
	}
	if plan != nil {
		p.sendToRelays(now, plan, p.scratchH[:nh])
	}
	clear(p.scratchM)
	clear(p.scratchH)
}

// sendToRelays sends hs, the homes of the batches just sent to this entry's own group, to
// their relays in the other groups: in each group, each relay's homes in batches of their own
// (relay.go).
func (p *publisher) sendToRelays(now time.Time, plan *Plan, hs []homes.Home) {
	keys := p.scratchK[:0]
	for _, h := range hs {
		keys = append(keys, stablehash.Of(h.Tenant))
	}
	p.scratchK = keys
	if p.scratchR == nil {
		p.scratchR = make(map[int][]homes.Home)
	}
	for gi := range plan.Others {
		g := &plan.Others[gi]
		clear(p.scratchR)
		for i, h := range hs {
			r := g.Relay(keys[i])
			p.scratchR[r] = append(p.scratchR[r], h)
		}
		for r, part := range p.scratchR {
			p.sendToRelay(now, part, g.Members[r:r+1])
		}
	}
	clear(p.scratchR)
}

func (p *publisher) sendToRelay(now time.Time, part []homes.Home, relays []memberlist.Address) {
	events, _, _, _, err := p.enc.Split(nil, part, len(part), false) // skipped: counted in flush
	if err != nil {
		p.log.Warn().Err(err).Msg("gossip: encoding a relay batch failed; dropping it")
		return
	}
	for _, ev := range events {
		if err := p.direct.acks.send(now, wire.KindRelay, ev.Payload, relays, p.direct.fallback); err != nil {
			p.m.eventsDropped.WithLabelValues("send").Inc()
			p.log.Warn().Err(err).Msg("gossip: sealing a relay batch failed; dropping it")
		}
	}
}

// split encodes marks then hs into at most MaxEventsPerFlush events and returns them and
// how many marks and homes they carry (or were dropped: unencodable, counted).
func (p *publisher) split(marks []homes.Mark, hs []homes.Home, fullOnly bool, maxEvents int) ([]wire.Event, int, int) {
	events, nm, nh, skipped, err := p.enc.Split(marks, hs, maxEvents, fullOnly)
	if err != nil {
		p.log.Warn().Err(err).Msg("gossip: encoding a batch failed; dropping it")
		return nil, len(marks), len(hs)
	}
	if skipped > 0 {
		p.m.pendingDropped.Add(float64(skipped))
	}
	return events, nm, nh
}

// directSender sends direct batches to every member, DirectCopies times each,
// DirectCopyInterval apart. The publisher's goroutine owns it.
type directSender struct {
	codec  *wire.Codec
	peers  func() []memberlist.Address // every member but this entry
	write  func(pkt []byte, to memberlist.Address) error
	copies int
	every  time.Duration
	m      *metrics
	queue  []directCopy // copies still to send, by due time
	budget *tokenBucket // bytes to each member; nil: no bound (tests)
	// plan, if set, says where a batch goes through relays (relay.go); nil from it: there can
	// be none. rule decides whether a flush's batches go through them, by what sending them to
	// every peer costs. Through relays, batches go through acks (acked.go), not copies.
	plan func() *Plan
	rule relayRule
	own  *tokenBucket // what this entry's homes sent straight may cost it (route); nil: no bound
	acks *ackedSender
	self string
	now  func() time.Time // the clock of what is due, the budgets and the fallback's sends
	// backlog: homes wait for the budget; their first copies come before the extra copies
	// of batches already sent.
	backlog bool
}

// tokenBucket is a send budget: rate bytes a second, at most burst saved up (a second's worth
// from newTokenBucket). Not safe for concurrent use (the publisher's goroutine owns it).
type tokenBucket struct {
	rate, burst, tokens float64
	at                  time.Time
}

func newTokenBucket(rate float64, now time.Time) *tokenBucket {
	return &tokenBucket{rate: rate, burst: rate, tokens: rate, at: now}
}

func (b *tokenBucket) refill(now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(b.burst, b.tokens+b.rate*d.Seconds())
		b.at = now
	}
}

// take spends n bytes if the budget holds them.
func (b *tokenBucket) take(now time.Time, n int) bool {
	b.refill(now)
	if b.tokens < float64(n) {
		return false
	}
	b.tokens -= float64(n)
	return true
}

// spend takes n bytes whether or not the budget holds them (it may go below zero, and the
// next flushes wait for it to refill).
func (b *tokenBucket) spend(now time.Time, n int) {
	b.refill(now)
	b.tokens -= float64(n)
}

// affordable is how many packets of at most size bytes the budget holds now.
func (b *tokenBucket) affordable(now time.Time, size int) int {
	b.refill(now)
	return int(b.tokens / float64(size))
}

// maxDirectQueue bounds the packets waiting for their next copy; beyond it the oldest
// lose their last copies (repair carries what that loses).
const maxDirectQueue = 1024

// route is where a flush's batches go: through the relays of the plan it returns, or
// straight to every peer (nil). Through relays while the relay rule says so; else straight,
// unless that would cost this entry more than its own budget holds (own): then this flush,
// the part that does not fit, goes through relays (in a large fleet a home sent straight
// costs its origin N x 267 bytes, 1.3 MB at 5,000 entries).
func (d *directSender) route(now time.Time, batches []wire.Event) *Plan {
	plan := d.relayPlan()
	if plan == nil {
		return nil
	}
	if on, _ := d.rule.state(); on {
		return plan
	}
	if d.own == nil {
		return nil
	}
	cost := 0
	for _, ev := range batches {
		cost += len(ev.Payload) + wire.Overhead
	}
	if d.own.take(now, cost*len(d.peers())*max(d.copies, 1)) {
		return nil
	}
	d.m.ownRelayed.Inc()
	return plan
}

// relayPlan is where batches go through relays: nil while there can be none.
func (d *directSender) relayPlan() *Plan {
	if d.plan == nil || d.acks == nil {
		return nil
	}
	return d.plan()
}

// send seals payload and sends its first copy to every member now; with relays on (plan), once
// to its own group, acked (the relays get the batch's homes by shard: publisher.sendShards).
func (d *directSender) send(now time.Time, payload []byte, plan *Plan) error {
	if d.budget != nil {
		// Each member gets one packet of the batch either way. Checked before the batch was
		// made (affordable, with a packet's largest size), so it is there; spent whatever.
		d.budget.spend(now, len(payload)+wire.Overhead)
	}
	if plan != nil {
		return d.acks.send(now, wire.KindAcked, payload, plan.Own, nil)
	}
	return d.sendTo(now, wire.KindSealed, payload, d.peers())
}

// fallback sends a batch that relays never acked straight to the rest of their groups, acked;
// on the acked sender's goroutine. With relays off meanwhile, repair carries it.
func (d *directSender) fallback(payload []byte, missing []memberlist.Address) {
	plan := d.relayPlan()
	if plan == nil {
		return
	}
	for _, r := range missing {
		if err := d.acks.send(d.now(), wire.KindAcked, payload, plan.Rest(r.Name, d.self), nil); err == nil {
			d.m.relayFallbacks.Inc()
		}
	}
}

func (d *directSender) sendTo(now time.Time, kind byte, payload []byte, peers []memberlist.Address) error {
	if len(peers) == 0 {
		return nil
	}
	pkt, err := d.codec.SealAs(kind, payload)
	if err != nil {
		return err
	}
	d.sendAll(pkt, peers)
	if d.copies > 1 && len(peers) > 0 {
		if len(d.queue) >= maxDirectQueue {
			// The oldest loses its last copies: counted, repair carries what that loses.
			lost := d.queue[0]
			d.m.eventsDropped.WithLabelValues("copies_queue_full").Add(float64(lost.left * len(lost.peers)))
			d.queue = d.queue[1:]
		}
		d.queue = append(d.queue, directCopy{pkt: pkt, peers: peers, left: d.copies - 1, due: now.Add(d.every)})
	}
	return nil
}

// sendAll writes pkt to every peer; a packet the transport refused is counted as dropped,
// not sent.
func (d *directSender) sendAll(pkt []byte, peers []memberlist.Address) {
	writeCounted(d.write, d.m, pkt, peers)
}

// writeCounted writes pkt to every peer and counts the packets sent and those the transport
// refused (direct and acked sends alike).
func writeCounted(write func([]byte, memberlist.Address) error, m *metrics, pkt []byte, peers []memberlist.Address) {
	sent := 0
	for _, a := range peers {
		if write(pkt, a) == nil {
			sent++
		}
	}
	m.directPackets.Add(float64(sent))
	if failed := len(peers) - sent; failed > 0 {
		m.eventsDropped.WithLabelValues("direct_write").Add(float64(failed))
	}
}

// sendCopies sends the copies that are due and schedules the next ones.
func (d *directSender) sendCopies(now time.Time) {
	n := 0
	for n < len(d.queue) && !d.queue[n].due.After(now) {
		n++
	}
	due := d.queue[:n:n]
	d.queue = d.queue[n:] // appends below never reach due's elements
	for _, c := range due {
		if d.budget != nil && (d.backlog || !d.budget.take(now, len(c.pkt))) {
			// Over budget: the first copies of new batches come first. Counted; repair
			// carries what the missing copies lose.
			d.m.eventsDropped.WithLabelValues("copies_budget").Add(float64(c.left * len(c.peers)))
			continue
		}
		d.sendAll(c.pkt, c.peers)
		if c.left--; c.left > 0 {
			c.due = now.Add(d.every)
			d.queue = append(d.queue, c)
		}
	}
}

// recount recomputes pendingBytes after a flush.
func (p *publisher) recount() {
	n := 0
	for i := 0; i < p.homes.n; i++ {
		h := p.homes.buf[(p.homes.head+i)%len(p.homes.buf)]
		n += itemOverhead + len(h.Tenant) + len(h.Region)
	}
	for i := 0; i < p.marks.n; i++ {
		n += itemOverhead + len(p.marks.buf[(p.marks.head+i)%len(p.marks.buf)].Region)
	}
	p.pendingBytes = n
}
