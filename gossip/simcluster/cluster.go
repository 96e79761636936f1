package simcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/gossip"
	"github.com/fenec/fenec-entry/gossip/memnet"
)

// DefaultRegions are the regions of a cluster whose Options name none.
var DefaultRegions = []string{"ams", "iad", "sin", "syd", "gru", "nrt"}

// DefaultKey is the gossip key of a cluster whose Options name none.
var DefaultKey = bytes.Repeat([]byte{7}, 32)

// Options configure a Cluster. Zero values take the defaults each field names.
type Options struct {
	// Nodes is how many entries New starts, named e00, e01, ... (at least 1).
	Nodes int

	// Regions are every entry's configured regions; nil means DefaultRegions.
	Regions []string

	// Key is the gossip key; nil means DefaultKey.
	Key []byte

	// Seed seeds memnet's latency and loss draws.
	Seed int64

	// MinLatency and MaxLatency bound memnet's one-way latency (uniform); Loss is its packet
	// loss probability. Zero: none.
	MinLatency, MaxLatency time.Duration
	Loss                   float64

	// Fast shortens gossip's intervals (FastTiming) so that tests take seconds. Without it
	// every entry runs gossip's production defaults, except JoinInterval (see New).
	Fast bool

	// Repair starts every entry's repair loop (Sync.Run) at start; otherwise StartRepair
	// does, later. RepairInterval is gossip's Sync.RepairInterval; 0 keeps its default.
	Repair         bool
	RepairInterval time.Duration

	// LatTagEvery models the latency tag real entries publish (node/latency.go): every entry
	// publishes a "lat" tag (LatTagKey) once it starts and, if LatTagEvery is positive,
	// changes it about every LatTagEvery, each change an alive broadcast the whole cluster
	// retransmits. Zero: the tag once, never changed.
	LatTagEvery time.Duration

	// Gossip, if set, has the last word on each entry's gossip.Config (i is the entry's
	// index), e.g. to try other tuning in a benchmark.
	Gossip func(i int, c *gossip.Config)

	// Logger gets every entry's logs, tagged with the entry's name. The zero Logger writes
	// nothing unless SIMCLUSTER_LOG is set, which logs at debug to stderr.
	Logger zerolog.Logger
}

// FastTiming shortens c's intervals for tests on a shared 2-core machine under -race: fast
// enough that a cluster forms and a home travels in well under a second, slow enough that
// probes are not missed.
func FastTiming(c *gossip.Config) {
	c.Spread.FlushInterval = 20 * time.Millisecond
	c.Spread.MaxFlushInterval = 200 * time.Millisecond
	c.JoinInterval = 200 * time.Millisecond
	m := &c.Membership
	m.GossipInterval = 50 * time.Millisecond
	m.ProbeInterval = 500 * time.Millisecond
	m.ProbeTimeout = 250 * time.Millisecond
	m.PushPullInterval = 5 * time.Second
	m.TCPTimeout = 2 * time.Second
	m.LeavePropagateDelay = 100 * time.Millisecond
}

// Cluster is N entries on one memnet Network. Make one with New. Its methods are safe for
// concurrent use, but Restart and Close of one entry must not race with each other.
type Cluster struct {
	opts    Options
	net     *memnet.Network
	log     zerolog.Logger
	seeds   []string // memnet addresses every entry joins
	bgCtx   context.Context
	bgStop  context.CancelFunc
	repairs bool // StartRepair was called or Options.Repair

	mu      sync.Mutex // guards the following
	entries []*Entry
	closed  bool
}

// New creates the network, starts opts.Nodes entries joined to the first three, and returns
// without waiting for them to find each other (WaitMembers does). Every entry's table is
// empty. On error, what was started is closed.
func New(opts Options) (*Cluster, error) {
	if opts.Nodes < 1 {
		return nil, errors.New("simcluster: Options.Nodes: need at least 1")
	}
	if opts.Regions == nil {
		opts.Regions = DefaultRegions
	}
	if opts.Key == nil {
		opts.Key = DefaultKey
	}
	log := opts.Logger // the zero Logger writes nothing
	if os.Getenv("SIMCLUSTER_LOG") != "" {
		log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).With().Timestamp().Logger()
	}
	nw := memnet.New(opts.Seed)
	nw.SetLatency(opts.MinLatency, opts.MaxLatency)
	nw.SetLoss(opts.Loss)
	bg, stop := context.WithCancel(context.Background())
	c := &Cluster{
		opts:    opts,
		net:     nw,
		log:     log,
		bgCtx:   bg,
		bgStop:  stop,
		repairs: opts.Repair,
	}
	// Every transport before any node, so that the join targets exist (memnet hands out
	// addresses in creation order).
	names := make([]string, opts.Nodes)
	trs := make([]*memnet.Transport, opts.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("e%02d", i)
		trs[i] = nw.NewTransport(names[i])
		if i < 3 {
			c.seeds = append(c.seeds, trs[i].Addr())
		}
	}
	for i, name := range names {
		e, err := c.start(len(c.entries), name, trs[i], nil)
		if err != nil {
			for _, tr := range trs[i:] {
				tr.Shutdown()
			}
			c.Close()
			return nil, err
		}
		c.mu.Lock()
		c.entries = append(c.entries, e)
		c.mu.Unlock()
	}
	return c, nil
}

// Network is the memnet network the entries gossip on (for its Stats, or SetLatency and
// SetLoss while they run).
func (c *Cluster) Network() *memnet.Network { return c.net }

// Len is the number of entries, including those added with Add and those stopped.
func (c *Cluster) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Entry returns entry i: its current incarnation, which Restart replaces.
func (c *Cluster) Entry(i int) *Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[i]
}

// Entries returns the current incarnation of every entry.
func (c *Cluster) Entries() []*Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Entry(nil), c.entries...)
}

// Add starts one more entry called name, joined to the same seeds; mod, if not nil, changes
// its gossip config last (e.g. another Key). It returns the entry and its index.
func (c *Cluster) Add(name string, mod func(*gossip.Config)) (*Entry, int, error) {
	c.mu.Lock()
	i := len(c.entries)
	c.mu.Unlock()
	e, err := c.start(i, name, c.net.NewTransport(name), mod)
	if err != nil {
		return nil, 0, err
	}
	c.mu.Lock()
	c.entries = append(c.entries, e)
	c.mu.Unlock()
	return e, i, nil
}

// Learn has entry i learn that tenant's home is region, as a router's answer would teach it;
// it reports whether the table changed (false for an unknown region, or a home it held).
func (c *Cluster) Learn(i int, tenant, region string) bool {
	return c.Entry(i).Table.LearnName(tenant, region)
}

// StartRepair starts the repair loop of every running entry that has none, and of every
// entry restarted later.
func (c *Cluster) StartRepair() {
	c.mu.Lock()
	c.repairs = true
	es := append([]*Entry(nil), c.entries...)
	c.mu.Unlock()
	for _, e := range es {
		e.startRepair(c.bgCtx)
	}
}

// Partition splits the cluster into groups of entry indexes: entries in different groups
// exchange no gossip packet and no stream (memberlist's, the table's, repair's: all travel
// on memnet). Entries in no group form one more group. It replaces any earlier partition.
func (c *Cluster) Partition(groups ...[]int) {
	names := make([][]string, len(groups))
	c.mu.Lock()
	for k, idx := range groups {
		for _, i := range idx {
			names[k] = append(names[k], c.entries[i].Name)
		}
	}
	c.mu.Unlock()
	c.net.Partition(names...)
}

// Heal removes any partition.
func (c *Cluster) Heal() { c.net.Heal() }

// Kill cuts entry i off the network, as if its host lost power: its process keeps
// running. Revive undoes it.
func (c *Cluster) Kill(i int) { c.net.Kill(c.Entry(i).Name) }

// Revive reconnects entry i after Kill.
func (c *Cluster) Revive(i int) { c.net.Revive(c.Entry(i).Name) }

// Stop closes entry i's current incarnation without leaving (its process ended: peers find
// it failed). Idempotent.
func (c *Cluster) Stop(i int) error { return c.Entry(i).Close() }

// Restart stops entry i if it runs and starts a new incarnation with the same name and
// memnet address and an empty table.
// It returns once the entry listens; WaitReady then does what node does before /readyz.
func (c *Cluster) Restart(i int) (*Entry, error) {
	old := c.Entry(i)
	if err := old.Close(); err != nil {
		return nil, err
	}
	e, err := c.start(i, old.Name, c.net.NewTransport(old.Name), old.mod)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.entries[i] = e
	c.mu.Unlock()
	return e, nil
}

// Close stops every entry and waits for the goroutines the cluster started. Idempotent.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	es := append([]*Entry(nil), c.entries...)
	c.mu.Unlock()
	c.bgStop()
	var errs []error
	var wg sync.WaitGroup
	var emu sync.Mutex
	for _, e := range es {
		wg.Go(func() {
			if err := e.Close(); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
