package simcluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
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
	IP       netip.Addr // its memnet address, also its snapshot listener's and Sync client's
	SnapAddr string     // its snapshot listener, IP:port
	Table    *homes.Table
	Gossip   *gossip.Gossip
	Sync     *gossip.Sync
	Registry *prometheus.Registry // the gossip and sync metrics of this incarnation

	mod    func(*gossip.Config)
	srv    *http.Server
	client *http.Client

	mu         sync.Mutex // guards the following
	closed     bool
	repairStop context.CancelFunc

	wg sync.WaitGroup // the HTTP server and the repair loop
}

// start builds and starts the entry called name, index i, on tr.
func (c *Cluster) start(i int, name string, tr *memnet.Transport, mod func(*gossip.Config)) (*Entry, error) {
	host, _, err := net.SplitHostPort(tr.Addr())
	if err != nil {
		return nil, err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return nil, err
	}
	table, err := homes.New(homes.Config{Regions: c.opts.Regions, Origin: name})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("simcluster: %s: snapshot listener: %w", name, err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	var join []string
	for _, s := range c.seeds {
		if s != tr.Addr() {
			join = append(join, s)
		}
	}
	log := c.log.With().Str("node", name).Logger()
	reg := prometheus.NewRegistry()
	cfg := gossip.Config{
		NodeName:   name,
		Join:       join,
		Key:        c.opts.Key,
		Tags:       map[string]string{"pop": name, "continent": "EU", "version": "sim", "snap": port},
		Table:      table,
		Regions:    c.opts.Regions,
		Logger:     log,
		Registerer: reg,
		Transport:  tr,
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
		ln.Close()
		tr.Shutdown()
		return nil, fmt.Errorf("simcluster: %s: %w", name, err)
	}
	g, err := gossip.New(cfg)
	if err != nil {
		return fail(err)
	}
	e := &Entry{
		Name:     name,
		IP:       ip,
		SnapAddr: ln.Addr().String(),
		Table:    table,
		Gossip:   g,
		Registry: reg,
		mod:      mod,
		client:   c.syncClient(name, ip),
	}
	e.Sync, err = gossip.NewSync(gossip.SyncConfig{
		Node:       name,
		Key:        cfg.Key,
		Table:      table,
		Validator:  gossip.NewValidator(cfg.Regions, nil),
		MemberAddr: g.MemberAddr,
		Peers:      func() []gossip.Peer { return snapPeers(g) },
		Interval:   c.opts.RepairInterval,
		Client:     e.client,
		Logger:     log,
		Registerer: reg,
	})
	if err != nil {
		return fail(err)
	}
	c.mu.Lock()
	c.byIP[host] = name
	c.mu.Unlock()
	if err := g.Start(context.Background()); err != nil {
		return fail(err)
	}
	e.srv = &http.Server{Handler: e.Sync.Handler(), ReadHeaderTimeout: 10 * time.Second}
	e.wg.Go(func() { e.srv.Serve(ln) })
	c.mu.Lock()
	repairs := c.repairs
	c.mu.Unlock()
	if repairs {
		e.startRepair(c.bgCtx)
	}
	return e, nil
}

// snapPeers is node's peer list: the alive members with a snapshot port in their "snap" tag,
// at their member IP.
func snapPeers(g *gossip.Gossip) []gossip.Peer {
	var out []gossip.Peer
	for _, p := range g.Peers() {
		host, _, err := net.SplitHostPort(p.Addr)
		port, perr := strconv.Atoi(p.Tags["snap"])
		if err != nil || perr != nil || port <= 0 {
			continue
		}
		out = append(out, gossip.Peer{Name: p.Name, SnapAddr: net.JoinHostPort(host, strconv.Itoa(port))})
	}
	return out
}

// syncClient is the Sync client of entry name: it dials from the entry's IP, so that peers see
// its member address, and refuses to dial across a partition or to or from a killed entry.
func (c *Cluster) syncClient(name string, ip netip.Addr) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip.AsSlice()}, Timeout: 2 * time.Second}
	return &http.Client{Transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if err := c.reachable(name, addr); err != nil {
				return nil, &net.OpError{Op: "dial", Net: network, Err: err}
			}
			return d.DialContext(ctx, network, addr)
		},
		DisableKeepAlives:     true, // no connection outlives a partition
		ResponseHeaderTimeout: 5 * time.Second,
		DisableCompression:    true,
	}}
}

func (e *Entry) startRepair(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.repairStop != nil {
		return
	}
	rctx, stop := context.WithCancel(ctx)
	e.repairStop = stop
	e.wg.Go(func() { e.Sync.Run(rctx) })
}

// Close stops this incarnation without leaving: its repair loop, its snapshot listener, serf
// and memberlist (and so its memnet transport). It waits for the goroutines it started.
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
	e.srv.Close()
	err := e.Gossip.Close()
	e.wg.Wait()
	e.client.CloseIdleConnections()
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
