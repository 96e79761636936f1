package simcluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec/fenec-entry/gossip"
	"github.com/fenec/fenec-entry/gossip/memnet"
	"github.com/fenec/fenec-entry/homes"
)

// Entry is one incarnation of an entry: what node.startCluster wires, minus the request
// path. Its exported fields are set by the Cluster and must not be changed. Restart makes a
// new Entry for the same index; the old one stays closed.
type Entry struct {
	Name     string
	Addr     string // its memnet address: gossip, the table and repair all go there
	Table    *homes.Table
	Gossip   *gossip.Gossip
	Sync     *gossip.Sync         // Gossip.Sync()
	Registry *prometheus.Registry // the gossip and sync metrics of this incarnation

	mod func(*gossip.Config)

	mu         sync.Mutex // guards the following
	closed     bool
	repairStop context.CancelFunc
	latStop    context.CancelFunc // the latency tag's loop

	wg sync.WaitGroup // the repair loop and the latency tag's
}

// start builds and starts the entry called name, index i, on tr.
func (c *Cluster) start(i int, name string, tr *memnet.Transport, mod func(*gossip.Config)) (*Entry, error) {
	table, err := homes.New(homes.Config{Regions: c.opts.Regions, Origin: name})
	if err != nil {
		return nil, err
	}
	var join []string
	for _, s := range c.seeds {
		if s != tr.Addr() {
			join = append(join, s)
		}
	}
	log := c.log.With().Str("node", name).Logger()
	reg := prometheus.NewRegistry()
	cfg := gossip.DefaultConfig()
	cfg.NodeName, cfg.Join, cfg.Key = name, join, c.opts.Key
	cfg.Tags = map[string]string{"pop": name, "continent": "EU", "version": "sim"}
	cfg.Table, cfg.Regions, cfg.Logger, cfg.Registerer, cfg.Transport = table, c.opts.Regions, log, reg, tr
	if c.opts.RepairInterval > 0 {
		cfg.Sync.RepairInterval = c.opts.RepairInterval
	}
	if c.opts.Fast {
		FastTiming(&cfg)
	} else {
		// The one change to the production defaults: the joiner retries every second rather
		// than 5 s, so that a cluster started all at once forms quickly. It only matters
		// until the first join, and after a partition.
		cfg.JoinInterval = time.Second
	}
	if c.opts.Gossip != nil {
		c.opts.Gossip(i, &cfg)
	}
	if mod != nil {
		mod(&cfg)
	}
	fail := func(err error) (*Entry, error) {
		tr.Shutdown()
		return nil, fmt.Errorf("simcluster: %s: %w", name, err)
	}
	g, err := gossip.New(cfg)
	if err != nil {
		return fail(err)
	}
	e := &Entry{
		Name:     name,
		Addr:     tr.Addr(),
		Table:    table,
		Gossip:   g,
		Sync:     g.Sync(),
		Registry: reg,
		mod:      mod,
	}
	if err := g.Start(context.Background()); err != nil {
		return fail(err)
	}
	lctx, lstop := context.WithCancel(c.bgCtx)
	e.latStop = lstop
	e.wg.Go(func() { e.runLatTag(lctx, c.opts.Regions, c.opts.Seed, i, c.opts.LatTagEvery) })
	c.mu.Lock()
	repairs := c.repairs
	c.mu.Unlock()
	if repairs {
		e.startRepair(c.bgCtx)
	}
	return e, nil
}

func (e *Entry) startRepair(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.repairStop != nil {
		return
	}
	rctx, stop := context.WithCancel(ctx)
	e.repairStop = stop
	e.wg.Go(func() { e.Gossip.RunRepair(rctx) })
}

// Close stops this incarnation without leaving: its repair loop, serf and memberlist (and so
// its memnet transport). It waits for the goroutines it started.
// Idempotent.
func (e *Entry) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	stop := e.repairStop
	e.mu.Unlock()
	if stop != nil {
		stop()
	}
	e.latStop()
	err := e.Gossip.Close()
	e.wg.Wait()
	return err
}

// Closed reports whether Close was called.
func (e *Entry) Closed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// Has reports whether the entry's table holds tenant at region.
func (e *Entry) Has(tenant, region string) bool {
	id, ok := e.Table.Lookup(tenant)
	want, known := e.Table.RegionID(region)
	return ok && known && id == want
}

// WaitReady does what node does before it reports ready: it waits until the entry has seen a
// peer alive, then fetches a peer's table (Sync.Bootstrap). It returns Bootstrap's error, or
// ctx's if no peer appeared.
func (e *Entry) WaitReady(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !e.Gossip.Joined() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("simcluster: %s: no peer seen: %w", e.Name, ctx.Err())
		case <-t.C:
		}
	}
	return e.Sync.Bootstrap(ctx)
}
