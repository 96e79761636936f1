package memnet

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Port is the port of every fake address handed out by a Network.
const Port = 7946

// Network is an in-process network of memberlist transports with per-link
// latency, loss and partitions. Create one with New; the zero value is not
// usable. All methods are safe for concurrent use.
type Network struct {
	counters counters

	mu     sync.Mutex // guards the following fields
	rng    *rand.Rand
	byName map[string]*Transport
	byAddr map[string]*Transport
	next   int // index of the next new name, for its address
	addrOf map[string]string
	minLat time.Duration
	maxLat time.Duration
	loss   float64
	group  map[string]int // partition group by node name; absent = group 0
	conns  map[*streamPair]struct{}
}

// New returns an empty Network with no latency, no loss and no partition.
// seed seeds the random source of latency and loss draws.
func New(seed int64) *Network {
	return &Network{
		rng:    rand.New(rand.NewPCG(uint64(seed), 0x6d656d6e6574)),
		byName: make(map[string]*Transport),
		byAddr: make(map[string]*Transport),
		addrOf: make(map[string]string),
		group:  make(map[string]int),
		conns:  make(map[*streamPair]struct{}),
	}
}

// NewTransport returns a new transport for the node called name, ready to
// be set as memberlist.Config.Transport. It may be called at any time,
// also while other nodes run.
//
// A name keeps its address for the life of the Network: a transport for a
// name whose previous transport was shut down replaces it, with the same
// address, which models a restarted process. NewTransport panics if name
// is empty or its current transport is still open.
func (n *Network) NewTransport(name string) *Transport {
	if name == "" {
		panic("memnet: NewTransport with an empty name")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if old, ok := n.byName[name]; ok && !old.isClosed() {
		panic(fmt.Sprintf("memnet: NewTransport(%q): a transport of that name is still open", name))
	}
	addr, ok := n.addrOf[name]
	if !ok {
		n.next++
		i := n.next
		if i >= 1<<24-1<<16 {
			panic("memnet: out of addresses")
		}
		ip := net.IPv4(127, byte(1+i>>16), byte(i>>8), byte(i))
		addr = net.JoinHostPort(ip.String(), fmt.Sprint(Port))
		n.addrOf[name] = addr
	}
	t := newTransport(n, name, addr)
	n.byName[name] = t
	n.byAddr[addr] = t
	return t
}

// Addr returns the fake "ip:port" address of the node called name, and
// false if no transport of that name was ever created.
func (n *Network) Addr(name string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	a, ok := n.addrOf[name]
	return a, ok
}

// SetLatency sets the one-way latency of every link: each packet, and each
// stream dial, is delayed by a duration drawn uniformly from [min, max].
// Data on an established stream is not delayed. It applies to packets sent
// after the call. SetLatency panics if min < 0 or max < min.
func (n *Network) SetLatency(min, max time.Duration) {
	if min < 0 || max < min {
		panic(fmt.Sprintf("memnet: SetLatency(%v, %v): want 0 <= min <= max", min, max))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.minLat, n.maxLat = min, max
}

// SetLoss sets the probability, in [0, 1], that a packet is lost. Streams
// are not lossy. SetLoss panics if p is outside [0, 1].
func (n *Network) SetLoss(p float64) {
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("memnet: SetLoss(%v): want 0 <= p <= 1", p))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.loss = p
}

// Partition splits the network into groups: nodes in different groups can
// neither exchange packets nor dial streams, and established streams
// between them are closed. Every node named in no group, including nodes
// created later, is in one more implicit group: Partition([]string{"a"})
// cuts a off from everyone else. Partition replaces any previous
// partition; packets already in flight are still delivered. It panics if a
// name appears in two groups.
func (n *Network) Partition(groups ...[]string) {
	g := make(map[string]int)
	for i, names := range groups {
		for _, name := range names {
			if _, dup := g[name]; dup {
				panic(fmt.Sprintf("memnet: Partition: %q is in two groups", name))
			}
			g[name] = i + 1
		}
	}
	n.mu.Lock()
	n.group = g
	cut := n.collectConnsLocked(func(p *streamPair) bool {
		return !n.reachableLocked(p.a.name, p.b.name)
	})
	n.mu.Unlock()
	closeAll(cut)
}

// Heal removes any partition.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.group = make(map[string]int)
}

// Kill cuts the current transport of the node called name off the network,
// as if its host lost power while the process kept running: packets to and
// from it vanish (also those already in flight to it), its dials and dials
// to it time out, and its established streams are closed. Revive undoes
// it. Kill of an unknown name does nothing.
func (n *Network) Kill(name string) {
	n.mu.Lock()
	t := n.byName[name]
	var cut []*streamPair
	if t != nil {
		t.killed.Store(true)
		cut = n.collectConnsLocked(func(p *streamPair) bool { return p.a == t || p.b == t })
	}
	n.mu.Unlock()
	closeAll(cut)
}

// Revive reconnects a node cut off by Kill.
func (n *Network) Revive(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if t := n.byName[name]; t != nil {
		t.killed.Store(false)
	}
}

// Stats counts what the network carried since New. Packets: Sent =
// Delivered + every Dropped* + NoRoute + packets still waiting out their
// latency.
type Stats struct {
	Sent      uint64 // packets handed to WriteTo / WriteToAddress
	SentBytes uint64
	Delivered uint64 // packets put in a destination's inbox
	// DeliveredBytes counts the bytes of delivered packets.
	DeliveredBytes   uint64
	DroppedLoss      uint64 // lost to SetLoss
	DroppedPartition uint64 // sent across a partition
	DroppedDown      uint64 // sender or destination killed or shut down
	DroppedQueueFull uint64 // destination's pending queue or inbox full
	NoRoute          uint64 // sent to an address no transport ever had; WriteTo returned an error

	Dials       uint64 // stream dials
	DialsFailed uint64 // dials that returned an error
}

// Stats returns a snapshot of the network's counters.
func (n *Network) Stats() Stats {
	c := &n.counters
	return Stats{
		Sent:             c.sent.Load(),
		SentBytes:        c.sentBytes.Load(),
		Delivered:        c.delivered.Load(),
		DeliveredBytes:   c.deliveredBytes.Load(),
		DroppedLoss:      c.droppedLoss.Load(),
		DroppedPartition: c.droppedPartition.Load(),
		DroppedDown:      c.droppedDown.Load(),
		DroppedQueueFull: c.droppedQueueFull.Load(),
		NoRoute:          c.noRoute.Load(),
		Dials:            c.dials.Load(),
		DialsFailed:      c.dialsFailed.Load(),
	}
}

type counters struct {
	sent, sentBytes, delivered, deliveredBytes                   atomic.Uint64
	droppedLoss, droppedPartition, droppedDown, droppedQueueFull atomic.Uint64
	noRoute, dials, dialsFailed                                  atomic.Uint64
}

// verdict is what the network does with one packet or dial.
type verdict int

const (
	pass        verdict = iota
	noRoute             // no transport has that address or name
	unreachable         // partition, or either end killed
	refused             // destination shut down (its host is up)
	lost                // packet loss
)

// route looks up the destination of a packet or dial from src and decides
// its fate; delay is the one-way latency to apply when it passes (or is
// refused).
func (n *Network) route(src *Transport, a addrKey, packet bool) (dst *Transport, v verdict, delay time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a.name != "" {
		dst = n.byName[a.name]
	}
	if dst == nil {
		dst = n.byAddr[a.addr]
	}
	switch {
	case dst == nil:
		return nil, noRoute, 0
	case src.killed.Load() || dst.killed.Load():
		return dst, unreachable, 0
	case !n.reachableLocked(src.name, dst.name):
		return dst, unreachable, 0
	}
	if packet && n.loss > 0 && n.rng.Float64() < n.loss {
		return dst, lost, 0
	}
	delay = n.minLat
	if n.maxLat > n.minLat {
		delay += time.Duration(n.rng.Int64N(int64(n.maxLat-n.minLat) + 1))
	}
	if dst.isClosed() {
		return dst, refused, delay
	}
	return dst, pass, delay
}

type addrKey struct{ name, addr string }

func (n *Network) reachableLocked(a, b string) bool {
	return n.group[a] == n.group[b]
}

// collectConnsLocked removes from the registry, and returns, the stream
// pairs for which cut is true. The caller closes them after unlocking.
func (n *Network) collectConnsLocked(cut func(*streamPair) bool) []*streamPair {
	var out []*streamPair
	for p := range n.conns {
		if cut(p) {
			delete(n.conns, p)
			out = append(out, p)
		}
	}
	return out
}

func closeAll(ps []*streamPair) {
	for _, p := range ps {
		p.close()
	}
}
