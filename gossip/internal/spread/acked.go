package spread

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/fenec/fenec-entry/gossip/internal/wire"
)

// Acked sends, for relays (relay.go). Blind copies cost every receiver DirectCopies times
// each batch, which direct homes can afford at a few dozen entries and relays cannot at a
// thousand (500 homes a second x 89 B x 3 copies: 130 KB/s an entry). With relays on, a batch
// is sent once to each of its receivers, and each receiver answers with an ack naming the
// packet by its nonce (unique to the sealed packet, the same in every resend); the sender
// sends it again, AckTimeout apart, to the receivers whose ack has not come, at most
// ackTries times in all. A receiver acks every copy it takes, duplicates included, so a lost
// ack costs one more send, not a miss; it does not ack what it could not queue (its apply
// queue full), so that the packet comes again. What is still unacked after the last try is
// given up: counted, handed to the packet's giveUp (a relay that never acks: its group gets
// the batch straight), and otherwise left to repair. An ack is a sealed direct packet of its
// own kind, naming the packets it acks by their nonces (package wire, ack.go).

// ackTries is how many times an acked packet is sent to a receiver that does not ack it.
const ackTries = 5

// maxAckedPending bounds the packets waiting for acks (each at most a UDP packet, so about
// 1.4 MB); beyond it the oldest is given up on (counted, reason queue_full).
const maxAckedPending = 1024

// ackedPacket is a sealed packet waiting for its receivers' acks.
type ackedPacket struct {
	nonce   wire.Nonce
	pkt     []byte
	payload []byte
	peers   []memberlist.Address
	acked   []bool
	left    int // receivers not acked yet
	tries   int
	due     time.Time
	giveUp  func(payload []byte, missing []memberlist.Address)
	done    bool
}

// ackedSender sends acked packets and sends them again where no ack came. send and ack are
// safe for concurrent use (the publisher, the relay and the transport's goroutine call them);
// run resends.
type ackedSender struct {
	codec   *wire.Codec
	write   func(pkt []byte, to memberlist.Address) error
	m       *metrics
	timeout time.Duration
	now     func() time.Time // what is due is by this clock; the timer only wakes run

	mu      sync.Mutex
	pending map[wire.Nonce]*ackedPacket
	queue   []*ackedPacket // by due time: every wait is one timeout, so append order
	wake    chan struct{}
}

// newAckedSender sends through write, waiting timeout for acks by the clock now.
func newAckedSender(codec *wire.Codec, write func([]byte, memberlist.Address) error, m *metrics, timeout time.Duration,
	now func() time.Time) *ackedSender {
	return &ackedSender{codec: codec, write: write, m: m, timeout: timeout, now: now,
		pending: make(map[wire.Nonce]*ackedPacket), wake: make(chan struct{}, 1)}
}

// send seals payload as kind and sends it to every peer once, then again to those that do
// not ack. giveUp, if set, gets the peers still unacked after the last try, on run's
// goroutine.
func (s *ackedSender) send(now time.Time, kind byte, payload []byte, peers []memberlist.Address,
	giveUp func([]byte, []memberlist.Address)) error {
	if len(peers) == 0 {
		return nil
	}
	pkt, err := s.codec.SealAs(kind, payload)
	if err != nil {
		return err
	}
	p := &ackedPacket{nonce: wire.NonceOf(pkt), pkt: pkt, payload: payload, peers: peers,
		acked: make([]bool, len(peers)), left: len(peers), tries: 1, due: now.Add(s.timeout), giveUp: giveUp}
	var evicted *ackedPacket
	s.mu.Lock()
	if len(s.queue) >= maxAckedPending {
		s.compactLocked()
	}
	if len(s.queue) >= maxAckedPending {
		evicted = s.queue[0]
		s.queue = s.queue[1:]
		s.finishLocked(evicted)
	}
	s.pending[p.nonce] = p
	s.queue = append(s.queue, p)
	s.m.ackedPending.Set(float64(len(s.pending)))
	s.mu.Unlock()
	if evicted != nil {
		s.m.ackedGivenUp.WithLabelValues("queue_full").Add(float64(evicted.left))
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	s.writeAll(pkt, peers)
	return nil
}

// ack notes that from took the packet sealed with n. Unknown packets (acked already, given up
// on, or never sent by this entry) and unknown receivers are counted and ignored.
func (s *ackedSender) ack(from string, n wire.Nonce) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending[n]
	if p == nil {
		s.m.acksReceived.WithLabelValues("late").Inc()
		return
	}
	for i, a := range p.peers {
		if a.Name == from {
			if !p.acked[i] {
				p.acked[i] = true
				p.left--
			}
			s.m.acksReceived.WithLabelValues("matched").Inc()
			if p.left == 0 {
				s.finishLocked(p)
			}
			return
		}
	}
	s.m.acksReceived.WithLabelValues("late").Inc()
}

// finishLocked forgets p: acked by every receiver, or given up on.
func (s *ackedSender) finishLocked(p *ackedPacket) {
	p.done = true
	delete(s.pending, p.nonce)
	s.m.ackedPending.Set(float64(len(s.pending)))
}

// compactLocked drops the finished packets from the queue.
func (s *ackedSender) compactLocked() {
	live := s.queue[:0]
	for _, p := range s.queue {
		if !p.done {
			live = append(live, p)
		}
	}
	clear(s.queue[len(live):])
	s.queue = live
}

func (s *ackedSender) writeAll(pkt []byte, peers []memberlist.Address) {
	writeCounted(s.write, s.m, pkt, peers)
}

// run sends again what is due until ctx is done.
func (s *ackedSender) run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		s.mu.Lock()
		for len(s.queue) > 0 && s.queue[0].done {
			s.queue[0] = nil
			s.queue = s.queue[1:]
		}
		var wait time.Duration = -1
		if len(s.queue) > 0 {
			wait = max(s.queue[0].due.Sub(s.now()), 0)
		}
		s.mu.Unlock()
		if wait >= 0 {
			t.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C:
			s.resend(s.now())
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
	}
}

type resend struct {
	p      *ackedPacket
	to     []memberlist.Address
	giveUp bool
}

// resend sends the due packets again to the peers that did not ack them, or gives them up
// after ackTries.
func (s *ackedSender) resend(now time.Time) {
	var due []resend
	s.mu.Lock()
	for len(s.queue) > 0 && !s.queue[0].due.After(now) {
		p := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		if p.done {
			continue
		}
		r := resend{p: p}
		for i, a := range p.peers {
			if !p.acked[i] {
				r.to = append(r.to, a)
			}
		}
		if p.tries >= ackTries {
			r.giveUp = true
			s.finishLocked(p)
		} else {
			p.tries++
			p.due = now.Add(s.timeout)
			s.queue = append(s.queue, p)
		}
		due = append(due, r)
	}
	s.mu.Unlock()
	for _, r := range due {
		if r.giveUp {
			s.m.ackedGivenUp.WithLabelValues("tries").Add(float64(len(r.to)))
			if r.p.giveUp != nil {
				r.p.giveUp(r.p.payload, r.to)
			}
			continue
		}
		s.m.ackedResent.Add(float64(len(r.to)))
		s.writeAll(r.p.pkt, r.to)
	}
}

// pendingCount is how many packets wait for acks.
func (s *ackedSender) pendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// ackReq is an ack to send: to the sender of a packet, its nonce.
type ackReq struct {
	to string
	n  wire.Nonce
}

// acker sends the acks the transport's goroutine queues (it must not block on a write): it
// takes what is queued, groups it by sender, and sends one ack packet per sender. An ack
// dropped (queue full, unknown sender) costs the sender one resend.
type acker struct {
	self  string
	in    chan ackReq
	codec *wire.Codec
	addr  func(name string) (memberlist.Address, bool)
	write func(pkt []byte, to memberlist.Address) error
	m     *metrics
}

// ackQueue bounds the acks waiting to be sent.
const ackQueue = 4096

// queue asks for an ack; never blocks.
func (a *acker) queue(to string, n wire.Nonce) {
	select {
	case a.in <- ackReq{to: to, n: n}:
	default:
		a.m.acksSent.WithLabelValues("queue_full").Inc()
	}
}

func (a *acker) run(ctx context.Context) {
	by := map[string][]wire.Nonce{}
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-a.in:
			by[r.to] = append(by[r.to], r.n)
		drain:
			for range ackQueue {
				select {
				case r := <-a.in:
					by[r.to] = append(by[r.to], r.n)
				default:
					break drain
				}
			}
			for to, ns := range by {
				a.send(to, ns)
				delete(by, to)
			}
		}
	}
}

func (a *acker) send(to string, ns []wire.Nonce) {
	addr, ok := a.addr(to)
	if !ok {
		a.m.acksSent.WithLabelValues("unknown_sender").Add(float64(len(ns)))
		return
	}
	for len(ns) > 0 {
		k := min(len(ns), wire.MaxAckNonces)
		pkt, err := a.codec.SealAs(wire.KindAck, wire.EncodeAck(a.self, ns[:k]))
		if err == nil && a.write(pkt, addr) == nil {
			a.m.acksSent.WithLabelValues("sent").Add(float64(k))
		} else {
			a.m.acksSent.WithLabelValues("write_failed").Add(float64(k))
		}
		ns = ns[k:]
	}
}
