// Package wan is a wide-area network on one Linux machine: one network namespace per site (a
// PoP or a region), each with a TUN device and one address, and a user-space link emulator in
// the calling process that carries every IP packet from one site to another after the pair's
// one-way delay, or drops it with the pair's loss probability.
//
// The machine's kernel need not have netem: the delays are kept here, by a goroutine per
// ordered pair of sites and a bounded queue per pair. Start needs root (it creates namespaces
// and TUN devices) and Linux; elsewhere it returns ErrUnsupported. Programs run in a site with
// Emulator.Command (ip netns exec) or, for sockets of this process, Emulator.Do.
package wan

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/fenec/fenec-entry/internal/clock"
)

// ErrUnsupported is what Start returns off Linux.
var ErrUnsupported = errors.New("wan: the link emulator needs Linux (network namespaces and TUN)")

// DefaultQueueLen is the bound of each ordered pair's delay queue, in packets, when
// Config.QueueLen is 0. A packet that finds its pair's queue full is dropped and counted
// (PairStats.Overflow). 1024 packets in flight on one pair is about 6,000 packets a second
// at the matrix's longest one-way delay (163 ms): far more than a lab of entries sends.
const DefaultQueueLen = 1024

// Link is one direction between two sites.
type Link struct {
	Delay time.Duration // one way
	Loss  float64       // probability in [0, 1] that a packet is dropped
}

// Config says which sites to make and how they are linked.
type Config struct {
	// Sites are the sites' names: 1 to 8 characters of a-z and 0-9, distinct. Site i (from 0)
	// gets the address 198.18.0.(i+1) in 198.18.0.0/15, the range set aside for benchmarks;
	// each namespace has its own, so runs never see each other's.
	Sites []string
	// Link gives the link from one site to another; nil means MatrixLink.
	Link func(from, to string) Link
	// Seed seeds the loss: with the same seed and the same packets on a pair, the same
	// packets are lost.
	Seed uint64
	// QueueLen bounds each pair's delay queue, in packets; 0 means DefaultQueueLen.
	QueueLen int
}

// PairStats counts what happened to the packets from one site to another.
type PairStats struct {
	From, To  string
	Delivered uint64 // written to To's TUN after the delay
	Lost      uint64 // dropped by the loss probability
	Overflow  uint64 // dropped because the pair's queue was full
	Failed    uint64 // writing to To's TUN failed
}

// Stats counts the emulator's packets.
type Stats struct {
	Pairs []PairStats
	// Unroutable counts packets read from a TUN that were not IPv4 to another site's address
	// (IPv6, broadcast, an address no site has).
	Unroutable uint64
}

// Pair returns the counts from one site to another (zero if there is no such pair).
func (s Stats) Pair(from, to string) PairStats {
	for _, p := range s.Pairs {
		if p.From == from && p.To == to {
			return p
		}
	}
	return PairStats{From: from, To: to}
}

// siteAddr returns site i's address.
func siteAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 18, byte((i + 1) >> 8), byte(i + 1)})
}

// check validates the configuration and fills its defaults.
func (c *Config) check() error {
	if len(c.Sites) == 0 {
		return errors.New("wan: no sites")
	}
	if len(c.Sites) > 250 {
		return errors.New("wan: more than 250 sites")
	}
	seen := make(map[string]bool, len(c.Sites))
	for _, s := range c.Sites {
		if len(s) == 0 || len(s) > 8 {
			return fmt.Errorf("wan: site name %q: want 1 to 8 characters", s)
		}
		for _, r := range s {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
				return fmt.Errorf("wan: site name %q: want only a-z and 0-9", s)
			}
		}
		if seen[s] {
			return fmt.Errorf("wan: site %q named twice", s)
		}
		seen[s] = true
	}
	if c.Link == nil {
		c.Link = MatrixLink
	}
	if c.QueueLen == 0 {
		c.QueueLen = DefaultQueueLen
	}
	if c.QueueLen < 0 {
		return errors.New("wan: negative QueueLen")
	}
	for _, a := range c.Sites {
		for _, b := range c.Sites {
			if a == b {
				continue
			}
			l := c.Link(a, b)
			if l.Delay < 0 || l.Loss < 0 || l.Loss > 1 || l.Loss != l.Loss {
				return fmt.Errorf("wan: link %s->%s: delay %v, loss %v", a, b, l.Delay, l.Loss)
			}
		}
	}
	return nil
}

// packet is one packet waiting in a pair's queue.
type packet struct {
	due time.Time
	b   []byte
}

// line is one ordered pair's link: the packets in flight, in the order they were sent. The
// delay is the same for every packet of a line, so the queue's order is also the order in
// which they are due, and the line delivers them in the order they were sent.
type line struct {
	from, to string
	delay    time.Duration // fixed: one delay per line keeps its packets in order
	loss     atomic.Uint64 // math.Float64bits of the loss probability; SetLoss changes it
	q        chan packet
	rng      *rand.Rand // used only by offer, which only the from site's reader calls

	delivered, lost, overflow, failed atomic.Uint64
}

func newLine(from, to string, link Link, queueLen int, seed uint64, index int) *line {
	l := &line{
		from: from, to: to, delay: link.Delay,
		q:   make(chan packet, queueLen),
		rng: rand.New(rand.NewPCG(seed, uint64(index))),
	}
	l.setLoss(link.Loss)
	return l
}

// setLoss changes the line's loss for the packets offered from now on; packets already
// queued are delivered.
func (l *line) setLoss(p float64) { l.loss.Store(math.Float64bits(p)) }

// link returns the line's link as it is now.
func (l *line) link() Link {
	return Link{Delay: l.delay, Loss: math.Float64frombits(l.loss.Load())}
}

// checkLoss reports whether p is a probability.
func checkLoss(p float64) error {
	if p < 0 || p > 1 || p != p {
		return fmt.Errorf("wan: loss %v: want a probability in [0, 1]", p)
	}
	return nil
}

// offer takes packet b, read at now: drops it with the link's loss, or queues it to be
// delivered after the delay, or drops it if the queue is full. It never blocks. b is kept.
func (l *line) offer(b []byte, now time.Time) {
	if loss := math.Float64frombits(l.loss.Load()); loss > 0 && l.rng.Float64() < loss {
		l.lost.Add(1)
		return
	}
	select {
	case l.q <- packet{due: now.Add(l.delay), b: b}:
	default:
		l.overflow.Add(1)
	}
}

// run delivers the line's packets with write, each when due, until ctx is done.
func (l *line) run(ctx context.Context, write func([]byte) error) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var p packet
		select {
		case <-ctx.Done():
			return
		case p = <-l.q:
		}
		if d := p.due.Sub(clock.System.Now()); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
		if err := write(p.b); err != nil {
			l.failed.Add(1)
			continue
		}
		l.delivered.Add(1)
	}
}

func (l *line) stats() PairStats {
	return PairStats{
		From: l.from, To: l.to,
		Delivered: l.delivered.Load(), Lost: l.lost.Load(),
		Overflow: l.overflow.Load(), Failed: l.failed.Load(),
	}
}

// ipv4Dst returns the destination of IPv4 packet b, and false if b is not one.
func ipv4Dst(b []byte) (netip.Addr, bool) {
	if len(b) < 20 || b[0]>>4 != 4 {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte(b[16:20])), true
}
