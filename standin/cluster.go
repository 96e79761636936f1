package standin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/internal/clock"
)

// ErrClosed is returned by the methods of a closed Cluster that would change it.
var ErrClosed = errors.New("standin: cluster closed")

// Cluster is every stand-in router of a deployment, run in one process. Create it with Start;
// stop it with Close. Its methods are safe for concurrent use.
type Cluster struct {
	log       zerolog.Logger
	clock     clock.Clock
	cors      corsPolicy
	keepAlive time.Duration
	items     int // Config.Items: seeded at Start and after every Reset
	marks     markCounter
	seen      seenLog
	store     store
	keys      keyStore
	hub       hub
	transport *http.Transport // relays
	ctx       context.Context // cancelled by Close: ends every request
	cancel    context.CancelFunc

	regions []*region // in Config order
	byName  map[string]*region
	routers []*Router
	byAddr  map[string]*Router // bound, dial and configured addresses

	dirMu sync.RWMutex // guards dir
	dir   map[string]string

	lifeMu   sync.RWMutex // guards closed; read-held while adding to handlers or serving
	closed   bool
	handlers sync.WaitGroup // requests being served
	serving  sync.WaitGroup // http.Server.Serve loops
}

// region is one region and its routers, in Config order.
type region struct {
	name    string
	routers []*Router
	remote  []string      // a remote region's router addresses (Region.Remote); routers is then empty
	next    atomic.Uint64 // round robin of relays into this region
}

// relayAddrs returns the addresses a relay into the region tries, in order.
func (r *region) relayAddrs() []string {
	if r.remote != nil {
		return r.remote
	}
	a := make([]string, len(r.routers))
	for i, rt := range r.routers {
		a[i] = rt.addr
	}
	return a
}

// Start binds every router's listener, then starts serving. On error nothing is left
// listening. A *ConfigError reports a bad Config.
func Start(cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cors, _ := parseCORS(cfg.CORS) // checked by Validate
	c := &Cluster{
		log:       zerolog.Nop(),
		clock:     cfg.Clock,
		cors:      cors,
		keepAlive: cfg.KeepAlive,
		items:     cfg.Items,
		byName:    make(map[string]*region),
		byAddr:    make(map[string]*Router),
		dir:       make(map[string]string, len(cfg.Tenants)),
	}
	if cfg.Logger != nil {
		c.log = *cfg.Logger
	}
	if c.clock == nil {
		c.clock = clock.System
	}
	if c.keepAlive == 0 {
		c.keepAlive = DefaultKeepAlive
	}
	if cfg.EntryToken != "" {
		c.marks.token = []byte(cfg.EntryToken)
	}
	c.seen.init(SeenCapacity)
	c.store.init()
	c.keys.init()
	c.hub.init()
	for t, home := range cfg.Tenants {
		c.dir[t] = home
	}
	c.transport = &http.Transport{
		Proxy:               nil, // routers talk to each other directly
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		DisableCompression:  true, // pass bodies and Accept-Encoding as they are
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())

	var lns []net.Listener
	fail := func(err error) (*Cluster, error) {
		for _, ln := range lns {
			ln.Close()
		}
		c.cancel()
		return nil, err
	}
	for _, rc := range cfg.Regions {
		reg := &region{name: rc.Name}
		if rc.Remote {
			reg.remote = append([]string(nil), rc.Addrs...)
		}
		for _, a := range rc.Addrs {
			if rc.Remote {
				break
			}
			ln, err := net.Listen("tcp", a)
			if err != nil {
				return fail(fmt.Errorf("standin: region %s: %w", rc.Name, err))
			}
			lns = append(lns, ln)
			rt := newRouter(c, rc.Name, ln)
			reg.routers = append(reg.routers, rt)
			c.routers = append(c.routers, rt)
			for _, k := range []string{rt.addr, rt.listenAddr, a} {
				if _, taken := c.byAddr[k]; !taken {
					c.byAddr[k] = rt
				}
			}
		}
		c.regions = append(c.regions, reg)
		c.byName[rc.Name] = reg
	}
	c.store.seed(c.configItems()...) // before any router serves: the first GET finds them

	c.lifeMu.RLock()
	for _, rt := range c.routers {
		rt.mu.Lock()
		rt.serveLocked(rt.ln)
		rt.mu.Unlock()
		c.log.Info().Str("router", rt.addr).Str("region", rt.region).Msg("router listening")
	}
	c.lifeMu.RUnlock()
	return c, nil
}

// Close stops every router: it closes the listeners and every connection, ends the requests
// in flight (streams, held writes, blackholed requests) and waits for them. It is safe to
// call more than once.
func (c *Cluster) Close() error {
	c.lifeMu.Lock()
	if c.closed {
		c.lifeMu.Unlock()
		return nil
	}
	c.closed = true
	c.lifeMu.Unlock()

	c.cancel()
	for _, rt := range c.routers {
		rt.shutdown()
	}
	c.serving.Wait()
	c.handlers.Wait()
	c.transport.CloseIdleConnections()
	c.log.Info().Msg("stand-in closed")
	return nil
}

// enter registers a request being served; false once the cluster is closing.
func (c *Cluster) enter() bool {
	c.lifeMu.RLock()
	defer c.lifeMu.RUnlock()
	if c.closed {
		return false
	}
	c.handlers.Add(1)
	return true
}

func (c *Cluster) leave() { c.handlers.Done() }

// Regions returns the region names, in Config order.
func (c *Cluster) Regions() []string {
	s := make([]string, len(c.regions))
	for i, r := range c.regions {
		s[i] = r.name
	}
	return s
}

// Routers returns every router, region by region, in Config order.
func (c *Cluster) Routers() []*Router { return append([]*Router(nil), c.routers...) }

// URLs returns "http://host:port" of each router of region, in Config order; nil for an
// unknown region, and empty for a remote one (Region.Remote).
func (c *Cluster) URLs(region string) []string {
	r := c.byName[region]
	if r == nil {
		return nil
	}
	urls := make([]string, len(r.routers))
	for i, rt := range r.routers {
		urls[i] = rt.url
	}
	return urls
}

// Router returns the router listening on addr (as bound, as dialled, or as configured when the
// port was not 0), or nil.
func (c *Cluster) Router(addr string) *Router { return c.byAddr[addr] }

// SetFault puts the router at addr in fault f (Fault{} clears it). Clearing down or refuse
// listens again on the same address, which fails if another process took the port meanwhile.
func (c *Cluster) SetFault(addr string, f Fault) error {
	rt := c.byAddr[addr]
	if rt == nil {
		return fmt.Errorf("standin: set fault: no router at %q", addr)
	}
	return rt.setFault(f, nil)
}

// Move changes the directory: tenant's home becomes region. A tenant not yet in the directory
// is added. Requests already relayed to the old home are answered 502 not_home there.
func (c *Cluster) Move(tenant, region string) error {
	if err := validTenant(tenant); err != nil {
		return fmt.Errorf("standin: move: tenant %q: %v", tenant, err)
	}
	if c.byName[region] == nil {
		return fmt.Errorf("standin: move %s: unknown region %q", tenant, region)
	}
	c.dirMu.Lock()
	old := c.dir[tenant]
	c.dir[tenant] = region
	c.dirMu.Unlock()
	c.log.Info().Str("tenant", tenant).Str("from", old).Str("home", region).Msg("tenant moved")
	return nil
}

// Directory returns a copy of the directory, tenant -> home region.
func (c *Cluster) Directory() map[string]string {
	c.dirMu.RLock()
	defer c.dirMu.RUnlock()
	d := make(map[string]string, len(c.dir))
	for t, r := range c.dir {
		d[t] = r
	}
	return d
}

func (c *Cluster) home(tenant string) (string, bool) {
	c.dirMu.RLock()
	defer c.dirMu.RUnlock()
	r, ok := c.dir[tenant]
	return r, ok
}

// seedItem is item id of tenant as the first router of home would have written it.
func (c *Cluster) seedItem(tenant, home, id string) item {
	return item{ID: id, Tenant: tenant, Region: home, Router: c.byName[home].relayAddrs()[0]}
}

// configItems returns items 1..Config.Items of every tenant in the directory, in its home now.
func (c *Cluster) configItems() []item {
	var its []item
	for tenant, home := range c.Directory() {
		for i := 1; i <= c.items; i++ {
			its = append(its, c.seedItem(tenant, home, strconv.Itoa(i)))
		}
	}
	return its
}

// Ledger returns every write applied, in the order applied.
func (c *Cluster) Ledger() []Apply { return c.store.applies(0) }

// Seen returns the requests received by every router (the admin API excepted), oldest
// first: at most the last SeenCapacity. A request still in flight has a zero End.
func (c *Cluster) Seen() []Seen { return c.seen.since(0) }

// SeenSince returns the records of Seen with Seq > seq.
func (c *Cluster) SeenSince(seq uint64) []Seen { return c.seen.since(seq) }

// ClientMarks returns the Fenec-Client counts (all zero without Config.EntryToken).
func (c *Cluster) ClientMarks() MarkCounts { return c.marks.counts() }

// Reset clears the ledger, the items and idempotency keys, the requests seen (their Seq keeps
// counting), the client mark counts and every router's fault, then seeds Config.Items again
// (in every tenant's home now). The directory is kept.
func (c *Cluster) Reset() error {
	c.store.reset(c.configItems())
	c.keys.reset()
	c.seen.reset()
	c.marks.reset()
	var errs []error
	for _, rt := range c.routers {
		if err := rt.setFault(Fault{}, nil); err != nil {
			errs = append(errs, err)
		}
	}
	c.log.Info().Msg("stand-in reset")
	return errors.Join(errs...)
}
