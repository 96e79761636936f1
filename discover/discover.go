package discover

import (
	"cmp"
	"context"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Defaults of Config.
const (
	DefaultInterval   = 5 * time.Second // --resolve-interval
	DefaultTimeout    = 2 * time.Second // one name's lookups in one round
	DefaultMaxTargets = 64              // routers kept per name; the rest are dropped and counted
	maxParallel       = 8               // names SetSources resolves at once
)

// Resolver looks names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
}

// NewResolver returns the system's resolver for server "", else one that asks only server
// (host:port, over UDP and, for long answers, TCP): --dns-server, for tests and for Consul's
// DNS interface on bare metal.
func NewResolver(server string) Resolver {
	if server == "" {
		return net.DefaultResolver
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server)
	}}
}

// Config configures a Discoverer. Zero fields take the defaults above.
type Config struct {
	Resolver   Resolver      // nil: the system's
	Interval   time.Duration // how often every name is resolved again
	Timeout    time.Duration // bound on one name's lookups in one round
	MaxTargets int           // routers kept per name
	Logger     *zerolog.Logger
	Registerer prometheus.Registerer // nil: no metrics
	// OnChange is called, from Run's goroutine, after a round changed what Found returns.
	OnChange func()
}

// Discoverer resolves the DNS names of every region's routers. Make one with New; safe for
// concurrent use.
type Discoverer struct {
	cfg Config
	log zerolog.Logger
	met metrics

	mu      sync.Mutex            // guards the following
	regions []regionSources       // in --routers order
	state   map[Source]*nameState // by source, kept while a region lists it
}

type regionSources struct {
	name    string
	sources []Source
}

// nameState is what one name last resolved to.
type nameState struct {
	targets  []Target // the last good answer, sorted by Addr
	answered bool     // a lookup has succeeded: targets is an answer, not nothing yet
	failing  string   // the last lookup's error, "" after a success (for logging a change once)
}

type metrics struct {
	lookups *prometheus.CounterVec // by result
	dropped prometheus.Counter
	routers *prometheus.GaugeVec // by region
}

// New returns a Discoverer with no names; SetSources gives it some.
func New(cfg Config) *Discoverer {
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxTargets <= 0 {
		cfg.MaxTargets = DefaultMaxTargets
	}
	d := &Discoverer{cfg: cfg, state: map[Source]*nameState{}, log: zerolog.Nop()}
	if cfg.Logger != nil {
		d.log = *cfg.Logger
	}
	d.met = metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_dns_lookups_total",
			Help: "Lookups of the routers' DNS names (dns+, srv+ in --routers), by result (ok, error). A name that fails keeps its last good answer.",
		}, []string{"result"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_dns_targets_dropped_total",
			Help: "Addresses found for a router name beyond the 64 kept per name (dropped, in address order).",
		}),
		routers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fenec_entry_dns_routers",
			Help: "Routers found in DNS, by region.",
		}, []string{"region"}),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(d.met.lookups, d.met.dropped, d.met.routers)
	}
	for _, r := range []string{"ok", "error"} {
		d.met.lookups.WithLabelValues(r)
	}
	return d
}

// SetSources makes these the names to resolve, by region in order (a region with no name
// may be left out). A name still listed keeps its last answer; a new one is resolved now,
// within ctx and the Timeout, before SetSources returns, so that a reload applies routers it
// has looked up (up to 8 names at once, so about one Timeout in all). A new name that fails
// gives its region nothing until a round resolves it.
func (d *Discoverer) SetSources(ctx context.Context, regions []string, sources map[string][]Source) {
	d.mu.Lock()
	next := make([]regionSources, 0, len(regions))
	keep := map[Source]bool{}
	var fresh []Source
	for _, r := range regions {
		ss := sources[r]
		if len(ss) == 0 {
			continue
		}
		next = append(next, regionSources{name: r, sources: slices.Clone(ss)})
		for _, s := range ss {
			keep[s] = true
			if d.state[s] == nil {
				d.state[s] = &nameState{}
				fresh = append(fresh, s)
			}
		}
	}
	for s := range d.state {
		if !keep[s] {
			delete(d.state, s)
		}
	}
	old := d.regions
	d.regions = next
	d.mu.Unlock()
	for _, r := range old {
		if !slices.ContainsFunc(next, func(n regionSources) bool { return n.name == r.name }) {
			d.met.routers.DeleteLabelValues(r.name)
		}
	}
	// New names in parallel (a few at a time), so that a start or reload with many names
	// waits about one Timeout, not one a name.
	sem := make(chan struct{}, maxParallel)
	var wg sync.WaitGroup
	for _, s := range fresh {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			d.resolve(ctx, s)
		})
	}
	wg.Wait()
	d.updateGauges()
}

// Found returns the routers found for each region that has names: the targets of its names in
// order, each name's sorted by address, without repeats.
func (d *Discoverer) Found() map[string][]Target {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string][]Target, len(d.regions))
	for _, r := range d.regions {
		var ts []Target
		for _, s := range r.sources {
			for _, t := range d.state[s].targets {
				if !slices.Contains(ts, t) {
					ts = append(ts, t)
				}
			}
		}
		out[r.name] = ts
	}
	return out
}

// Names returns the names of each region that has some, as --routers writes them.
func (d *Discoverer) Names() map[string][]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string][]string, len(d.regions))
	for _, r := range d.regions {
		for _, s := range r.sources {
			out[r.name] = append(out[r.name], s.String())
		}
	}
	return out
}

// Run resolves every name every Interval until ctx ends, calling OnChange after a round that
// changed Found.
func (d *Discoverer) Run(ctx context.Context) {
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if d.Refresh(ctx) && d.cfg.OnChange != nil && ctx.Err() == nil {
			d.cfg.OnChange()
		}
	}
}

// Refresh resolves every name once, one after the other, and reports whether Found changed.
func (d *Discoverer) Refresh(ctx context.Context) bool {
	d.mu.Lock()
	var names []Source
	for _, r := range d.regions {
		for _, s := range r.sources {
			if !slices.Contains(names, s) {
				names = append(names, s)
			}
		}
	}
	d.mu.Unlock()
	changed := false
	for _, s := range names {
		if ctx.Err() != nil {
			break
		}
		if d.resolve(ctx, s) {
			changed = true
		}
	}
	if changed {
		d.updateGauges()
	}
	return changed
}

// resolve looks s up and stores the answer, or keeps the last good one when the lookup fails.
// It logs a change of answer, and a change between failing and not, once. It reports whether
// the targets changed.
func (d *Discoverer) resolve(ctx context.Context, s Source) bool {
	lctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	targets, err := d.lookup(lctx, s)
	cancel()
	d.mu.Lock()
	st := d.state[s]
	if st == nil { // no longer listed
		d.mu.Unlock()
		return false
	}
	if err != nil {
		d.met.lookups.WithLabelValues("error").Inc()
		msg := err.Error()
		first := st.failing != msg
		st.failing = msg
		kept, answered := len(st.targets), st.answered
		d.mu.Unlock()
		if first {
			why := "router name failed to resolve: its last good answer is kept"
			switch {
			case kept > 0:
			case !answered: // at start, or a name a reload added
				why = "router name failed to resolve: no answer yet, the region has no router from this name until one"
			default:
				why = "router name failed to resolve: its last answer held no router, the region has none from this name until one"
			}
			d.log.Warn().Str("name", s.String()).Str("error", msg).Int("routers_kept", kept).Msg(why)
		}
		return false
	}
	d.met.lookups.WithLabelValues("ok").Inc()
	if len(targets) > d.cfg.MaxTargets {
		d.met.dropped.Add(float64(len(targets) - d.cfg.MaxTargets))
		targets = targets[:d.cfg.MaxTargets]
	}
	recovered, again := st.failing != "", st.answered
	st.failing, st.answered = "", true
	old := st.targets
	changed := !slices.Equal(old, targets)
	st.targets = targets
	d.mu.Unlock()
	switch {
	case recovered && again:
		d.log.Info().Str("name", s.String()).Int("routers", len(targets)).Msg("router name resolves again")
	case recovered:
		d.log.Info().Str("name", s.String()).Int("routers", len(targets)).Msg("router name resolves: its first answer")
	}
	if changed {
		added, removed := diff(old, targets)
		d.log.Info().Str("name", s.String()).Strs("added", added).Strs("removed", removed).
			Int("routers", len(targets)).Msg("routers found by name changed")
	}
	return changed
}

func (d *Discoverer) lookup(ctx context.Context, s Source) ([]Target, error) {
	var out []Target
	switch s.Kind {
	case KindAddr:
		ips, err := d.cfg.Resolver.LookupNetIP(ctx, "ip", s.Name)
		if err != nil {
			return nil, err
		}
		for _, ip := range ips {
			out = append(out, Target{Scheme: s.Scheme, Addr: net.JoinHostPort(ip.Unmap().String(), s.Port), Name: s.Name})
		}
	case KindSRV:
		_, srvs, err := d.cfg.Resolver.LookupSRV(ctx, "", "", s.Name)
		if err != nil {
			return nil, err
		}
		for _, srv := range srvs {
			host := strings.TrimSuffix(srv.Target, ".")
			port := strconv.Itoa(int(srv.Port))
			if ip, err := netip.ParseAddr(host); err == nil {
				out = append(out, Target{Scheme: s.Scheme, Addr: net.JoinHostPort(ip.Unmap().String(), port), Name: host})
				continue
			}
			ips, err := d.cfg.Resolver.LookupNetIP(ctx, "ip", host)
			if err != nil {
				return nil, err // one target unresolved: keep the whole last answer rather than half of it
			}
			for _, ip := range ips {
				out = append(out, Target{Scheme: s.Scheme, Addr: net.JoinHostPort(ip.Unmap().String(), port), Name: host})
			}
			if len(out) > 4*d.cfg.MaxTargets {
				break // bounded work for a huge answer; the rest would be dropped anyway
			}
		}
	}
	slices.SortFunc(out, func(a, b Target) int { return cmp.Or(cmp.Compare(a.Addr, b.Addr), cmp.Compare(a.Name, b.Name)) })
	return slices.Compact(out), nil
}

func (d *Discoverer) updateGauges() {
	for region, ts := range d.Found() {
		d.met.routers.WithLabelValues(region).Set(float64(len(ts)))
	}
}

// diff returns the addresses in b not in a, and those in a not in b.
func diff(a, b []Target) (added, removed []string) {
	for _, t := range b {
		if !slices.Contains(a, t) {
			added = append(added, t.Addr)
		}
	}
	for _, t := range a {
		if !slices.Contains(b, t) {
			removed = append(removed, t.Addr)
		}
	}
	return added, removed
}
