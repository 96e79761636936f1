package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/certs"
	"github.com/fenec/fenec-entry/clientinfo"
	"github.com/fenec/fenec-entry/discover"
	"github.com/fenec/fenec-entry/door"
	"github.com/fenec/fenec-entry/gossip"
	"github.com/fenec/fenec-entry/h1"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/clock"
	"github.com/fenec/fenec-entry/procs"
	"github.com/fenec/fenec-entry/proxy"
	"github.com/fenec/fenec-entry/state"
	"github.com/fenec/fenec-entry/status"
)

// Limits of the listeners that are not flags.
const (
	maxHeaderBytes = door.MaxHead      // net/http's limit, above the door's (it reads up to 4096 bytes more): the door refuses first
	idleTimeout    = 120 * time.Second // an idle client keep-alive connection is closed after this
	ShutdownGrace  = 10 * time.Second  // after the drain, open requests get this long (then are ended)
	adminGrace     = time.Second       // the admin listener's own shutdown grace
)

var errClosed = errors.New("node: closed")

// certError names the flag of the certificate file a *certs.FileError is about.
func certError(err error) error {
	var fe *certs.FileError
	if !errors.As(err, &fe) {
		return err
	}
	flag := map[string]string{certs.FileCert: "tls-cert", certs.FileKey: "tls-key", certs.FileCA: "router-ca"}[fe.Which]
	return &ConfigError{Flag: flag, Msg: fe.Msg}
}

// Node is one running entry: the client listener serving a proxy.Handler, the admin listener,
// the home table and a Prometheus registry. Make one with New; the zero Node is not usable.
//
// Its lifecycle is New -> Start -> Drain -> Close, and every method is safe for concurrent use:
//   - Start binds the listeners and serves. A second call returns the first call's result;
//     Start after Drain or Close returns an error and binds nothing.
//   - Drain stops the entry gracefully (serve --drain more with Connection: close, stop
//     listening, give open requests up to 10 s, then end them). A second call waits for the
//     first to finish and returns nil.
//   - Close stops everything at once, ending open requests. It is safe to call more than
//     once, before Start, during or after Drain; it waits for every goroutine the Node started.
type Node struct {
	cfg    Config
	log    zerolog.Logger
	homes  *homes.Table
	proxy  *proxy.Handler
	certs  *certs.Reloader           // nil without --tls-cert
	pp     *clientinfo.ProxyProtocol // nil unless --client-ip proxy-protocol
	geoip  *clientinfo.GeoIP         // nil without --geoip
	client *http.Server
	lean   *h1.Server // HTTP/1.x (plain and TLS) under --http1-server lean; nil otherwise
	// maxConns is the bound on client connections in effect (--max-conns, or the open-file
	// limit less the reserve: conns.go).
	maxConns int
	disc     *discover.Discoverer
	admin    *http.Server
	// adminRefused counts changes asked of the admin listener and refused (mayChange).
	adminRefused prometheus.Counter
	upgrades     *prometheus.CounterVec // fenec_entry_upgrades_total{result}
	reg          *prometheus.Registry
	// cluster is the gossip part, set by Start when gossip is enabled; guarded by mu
	// until Start returns, read-only after.
	cluster *gossip.Gossip
	state   *state.Store // --state-dir; nil without
	warm    bool         // New restored homes from --state-dir: ready at once (state.go)

	grace      time.Duration // open requests' time after the drain: ShutdownGrace (tests shorten it)
	certsEvery time.Duration // how often the certificate files are checked: certs.CheckEvery

	ready    atomic.Bool // true from New; false while a starting entry fetches a peer's table (startCluster)
	draining atomic.Bool
	// handedOver: a new process serves on this entry's sockets (upgrade) and this one drains.
	handedOver atomic.Bool
	startedAt  atomic.Pointer[time.Time] // nil until Start has bound the listeners
	traffic    status.Traffic            // gossip event rates for Status; zero value ready
	digest     tableDigest               // the status's table digest, made again only on a change

	bg       context.Context // ends the background goroutines; cancelled by stopBackground
	bgCancel context.CancelFunc
	wg       sync.WaitGroup // serve loops and background goroutines
	failed   chan error     // a serve loop's failure after Start; capacity 2, never closed
	closed   chan struct{}  // closed by Close

	mu          sync.Mutex // guards the following fields
	startCalled bool
	startErr    error
	stopped     bool // Drain or Close was called
	clientAddr  net.Addr
	adminAddr   net.Addr

	// reloadMu serialises reloads and the application of what DNS found; it guards cur, the
	// configuration in force (cfg is the one the entry started with).
	reloadMu sync.Mutex
	cur      Config

	drainOnce sync.Once
	closeOnce sync.Once

	// tickets are the client listener's session ticket keys (certs.TicketKeys); nil without
	// --tls-cert.
	tickets *certs.TicketKeys

	procs *procs.Controller // nil: GOMAXPROCS is the operator's (Config.AdaptProcs)

	stateStop context.CancelFunc // stops the state file's write-behind; nil without --state-dir
}

// New builds a Node from cfg: it validates cfg, reads --router-ca and the TLS certificate, and
// builds the home table, the proxy and the metrics. It binds nothing and starts no goroutine.
// Errors from a bad cfg or an unreadable file are *ConfigError.
func New(cfg Config, logger zerolog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System
	}
	n := &Node{
		cfg:        cfg,
		cur:        cfg,
		log:        logger,
		failed:     make(chan error, 2),
		closed:     make(chan struct{}),
		grace:      ShutdownGrace,
		certsEvery: certs.CheckEvery,
	}
	hc := homes.Config{
		Regions:     cfg.RegionNames(),
		Capacity:    cfg.Homes,
		ReadBackoff: cfg.ReadBackoff,
		Origin:      cfg.Node,
		Clock:       cfg.Clock,
	}
	table, err := homes.New(hc)
	if err != nil {
		return nil, fmt.Errorf("node: home table: %w", err)
	}
	n.homes = table
	n.ready.Store(true)
	if n.maxConns, err = cfg.maxConns(fdLimit()); err != nil {
		return nil, err
	}

	var routerTLS *tls.Config
	if cfg.RouterCA != "" {
		if routerTLS, err = certs.RouterTLS(cfg.RouterCA); err != nil {
			return nil, certError(err)
		}
	}
	if cfg.TLSCert != "" {
		if n.certs, err = certs.NewReloader(cfg.TLSCert, cfg.TLSKey, logger); err != nil {
			return nil, certError(err)
		}
	}
	if cfg.AdaptProcs {
		n.procs = procs.New(procs.Config{OnChange: func(from, to int) {
			if n.lean != nil { // set before the controller runs (Start)
				n.lean.ProcsChanged()
			}
			n.log.Debug().Int("from", from).Int("to", to).Msg("Ps (GOMAXPROCS) follow the load")
		}})
	}
	reg, metrics := n.newRegistry()
	n.reg = reg
	if err := n.openState(); err != nil {
		return nil, err
	}
	n.takeTable()
	if cfg.GeoIP != "" {
		if n.geoip, err = clientinfo.OpenGeoIP(cfg.GeoIP); err != nil {
			return nil, cfgErr("geoip", "%v", err)
		}
	}
	continents := clientinfo.NewContinents(clientinfo.ContinentSources{
		GeoIP:          n.geoip,
		CountryHeader:  cfg.CountryHeader,
		TrustedProxies: cfg.TrustedProxies,
		Mode:           cfg.ClientIP,
		PopContinent:   cfg.Continent,
	}, reg)
	if cfg.ClientIP == ClientIPProxyProtocol {
		n.pp = clientinfo.NewProxyProtocol(cfg.TrustedProxies, cfg.HeaderTimeout, logger, reg)
	}
	n.disc = n.newDiscoverer()
	regions, _ := splitRouters(cfg.Routers)
	n.proxy, err = proxy.New(proxy.Config{
		Regions:         regions,
		Homes:           table,
		Continents:      cfg.ContinentMap(),
		DefaultRegion:   cfg.DefaultRegion,
		ClientAddr:      clientinfo.AddrFunc(cfg.ClientIP, cfg.TrustedProxies),
		ClientContinent: continents.Func(),
		EntryToken:      string(cfg.EntryToken),
		StripHeaders:    clientinfo.SourceHeaders(cfg.ClientIP, cfg.CountryHeader),
		CORS:            cfg.CORS,
		MaxInflight:     cfg.MaxInflight,
		BodyBuffer:      cfg.BodyBuffer,
		AnswerTimeout:   cfg.AnswerTimeout,
		RouterTLS:       routerTLS,
		LatencyChoice:   true,
		Logger:          &n.log,
		Metrics:         metrics,
		ConnClose:       n.draining.Load,
		// A process that handed over to a new one (upgrade) still answers what this host
		// is: ready, the new process serving beside it on the same sockets.
		Ready: func() bool { return n.isReady() && (!n.draining.Load() || n.handedOver.Load()) },
		// A router dial out of descriptors takes the client connections idle longest (h1
		// sheds them; net/http cannot tell which are idle).
		FreeDescriptors: func() bool { return n.lean != nil && n.lean.ShedIdle(h1ShedBatch) > 0 },
		Clock:           cfg.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("node: proxy: %w", err)
	}

	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	n.client = &http.Server{
		Handler:           n.proxy,
		Protocols:         protos,
		ReadHeaderTimeout: cfg.HeaderTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		IdleTimeout:       idleTimeout,
		ErrorLog:          httpErrorLog(logger, "client"),
	}
	if n.certs != nil {
		protos.SetHTTP2(true)
		n.client.TLSConfig = &tls.Config{GetCertificate: n.certs.GetCertificate, MinVersion: tls.VersionTLS12,
			NextProtos: []string{"h2", "http/1.1"}}
		n.openTickets()
		n.tickets.Apply(n.client.TLSConfig) // the very config the door hands tls.Server: never a clone
	} else {
		protos.SetUnencryptedHTTP2(true)
	}
	n.admin = &http.Server{
		Handler:           n.adminHandler(reg),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idleTimeout,
		ErrorLog:          httpErrorLog(logger, "admin"),
	}
	n.bg, n.bgCancel = context.WithCancel(context.Background())
	return n, nil
}

// Start binds the client listener (--listen) and the admin listener (--admin-listen) and
// serves them; the entry is ready (/readyz) once Start returns nil, or, with peers to join,
// once it holds a peer's table (or none answered). A bind error names its flag ("--listen: listen tcp ...: address already in use"); it
// is a runtime failure, not a *ConfigError. ctx bounds only the binding. See Node for calling
// Start twice.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.startCalled:
		return n.startErr
	case n.stopped:
		return errClosed
	}
	n.startCalled = true
	n.startErr = n.startLocked(ctx)
	return n.startErr
}

func (n *Node) startLocked(ctx context.Context) error {
	// The routers' DNS names first: the entry serves with what they resolve to (a name that
	// fails leaves its region to the others until a later round finds it).
	n.resolveRouters(ctx, n.cfg)
	n.rediscovered()
	al, err := n.listen(ctx, "--admin-listen", n.cfg.AdminListen)
	if err != nil {
		return fmt.Errorf("--admin-listen: %w", err)
	}
	cl, err := n.listen(ctx, "--listen", n.cfg.Listen)
	if err != nil {
		al.Close()
		return fmt.Errorf("--listen: %w", err)
	}
	n.clientAddr = cl.Addr()
	n.serveClient(cl)
	n.adminAddr = al.Addr()
	n.serve("--admin-listen", func() error { return n.admin.Serve(al) })
	n.wg.Go(func() { n.disc.Run(n.bg) })
	if n.cfg.ReloadOn != nil {
		n.wg.Go(n.watchReloads)
	}
	if n.certs != nil {
		n.wg.Go(func() { n.certs.Watch(n.bg, n.certsEvery) })
		n.wg.Go(func() { n.tickets.Run(n.bg, certs.TicketCheckEvery) })
	}
	if n.state != nil {
		var sctx context.Context
		sctx, n.stateStop = context.WithCancel(n.bg)
		n.wg.Go(func() { n.state.Run(sctx) })
	}
	n.readyForUpgrades(ctx)
	if n.cfg.gossipEnabled() {
		if err := n.startCluster(ctx); err != nil {
			n.closeClient()
			n.admin.Close()
			n.stopBackground()
			return err
		}
	} else {
		// No gossip to publish to: drain the change feed so that it never fills.
		n.wg.Go(func() {
			for {
				select {
				case <-n.bg.Done():
					return
				case <-n.homes.Changes():
				}
			}
		})
	}

	if n.procs != nil {
		n.wg.Go(func() { n.procs.Run(n.bg) })
	}
	n.wg.Go(n.runLatency) // after the cluster: its first round gossips the latency tag
	now := n.cfg.Clock.Now()
	n.startedAt.Store(&now)
	n.logStart()
	return nil
}

// serveClient serves clients on cl, every HTTP/1 request read through the door: by h1 (lean)
// HTTP/1.x, over TLS with --tls-cert, and by net/http what h1 hands it (h2 negotiated over
// TLS, h2c, PROXY-protocol connections); or everything by net/http (std).
func (n *Node) serveClient(cl net.Listener) {
	lean := n.cfg.HTTP1Server == "lean"
	if !lean {
		cl = n.limitStd(cl) // h1 bounds its own (every connection it takes, PROXY ones included)
	}
	if n.pp != nil {
		cl = n.pp.Wrap(cl) // under TLS too: the PROXY header comes before the handshake
	}
	// net/http's TLS: the door terminates it so that it reads HTTP/1.1 in the clear, and an
	// h2 connection goes on to net/http as the TLS connection it is (one h1 handshook passes
	// as it is).
	tlsConfig, timeout := n.client.TLSConfig, n.client.ReadHeaderTimeout
	switch {
	case lean:
		var handoff net.Listener
		n.lean, handoff = n.newLean(cl.Addr())
		n.serve("--listen", func() error { return n.lean.Serve(cl) })
		n.serve("--listen", func() error { return n.client.Serve(door.Listen(handoff, tlsConfig, timeout, n.handshakeLog)) })
	default:
		n.serve("--listen", func() error { return n.client.Serve(door.Listen(cl, tlsConfig, timeout, n.handshakeLog)) })
	}
}

// handshakeLog is told of a client's failed TLS handshake.
func (n *Node) handshakeLog(format string, args ...any) {
	n.log.Debug().Str("server", "client").Msgf(format, args...)
}

// shutdownClient shuts the client servers down (net/http's, and h1's when it serves), each
// waiting for its open requests until ctx ends.
func (n *Node) shutdownClient(ctx context.Context) error {
	errs := make(chan error, 1)
	go func() {
		if n.lean == nil {
			errs <- nil
			return
		}
		errs <- n.lean.Shutdown(ctx)
	}()
	err := n.client.Shutdown(ctx)
	return errors.Join(err, <-errs)
}

func (n *Node) closeClient() {
	if n.lean != nil {
		n.lean.Close()
	}
	n.client.Close()
}

// serve runs one listener's serve loop in a goroutine of n; a failure other than the server
// being shut down is reported on n.failed (Run stops on it).
func (n *Node) serve(flag string, loop func() error) {
	n.wg.Go(func() {
		if err := loop(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			select {
			case n.failed <- fmt.Errorf("%s: serve: %w", flag, err):
			default:
			}
		}
	})
}

// logStart writes the one info line of a start (never a secret, never the whole Config), and a
// warning for each setting accepted but not yet in effect.
func (n *Node) logStart() {
	c := n.cfg
	// One process on every CPU: cpus is the most Ps it runs on (GOMAXPROCS, or the CPUs it
	// may use when the Ps follow the load), so that a log says what a start was given.
	cpus := runtime.GOMAXPROCS(0)
	if n.procs != nil {
		cpus = n.procs.Max()
	}
	n.log.Info().Str("version", n.version()).Str("node", c.Node).Str("pop", c.Pop).Str("continent", c.Continent).
		Str("listen", n.clientAddr.String()).Bool("tls", n.certs != nil).Str("admin_listen", n.adminAddr.String()).
		Array("regions", regionsLog(c.Routers)).Str("default_region", c.DefaultRegionName()).
		Int("cpus", cpus).Bool("cpus_follow_load", n.procs != nil).Int("max_conns", n.maxConns).
		Msg("entry started")
	if limit := fdLimit(); c.MaxConns == 0 && limit > 0 && n.maxConns > limit-c.connsReserve(limit) {
		n.log.Warn().Int("open_file_limit", limit).Int("max_conns", n.maxConns).Int("max_inflight", c.MaxInflight).
			Msg("the open-file limit is too low for --max-inflight: a router dial may fail for want of a descriptor; raise it (ulimit -n, LimitNOFILE=)")
	}
	n.log.Debug().Object("config", c).Msg("configuration")

	if db := n.geoip; db != nil {
		n.log.Info().Str("geoip", c.GeoIP).Str("database_type", db.DatabaseType()).
			Time("built", db.BuildTime()).Msg("geoip database opened")
	}
	if c.ClientIP == ClientIPProxyProtocol && len(c.TrustedProxies) == 0 {
		n.log.Info().Msg("--client-ip proxy-protocol without --trusted-proxies: a PROXY header is believed " +
			"from any peer, so --listen must be reachable by the proxies only")
	}
	if !c.gossipEnabled() {
		n.log.Info().Msg("gossip off (no --gossip-key, no --insecure-gossip): this entry serves alone")
	}
	if c.AnswerTimeout < 30*time.Second {
		n.log.Warn().Stringer("answer_timeout", c.AnswerTimeout).
			Msg("--answer-timeout is shorter than a held write's 30 s: held writes will fail as may_have_run")
	}
	if len(c.ContinentMap()) == 0 && len(c.Routers) > 1 {
		n.log.Info().Str("default_region", c.DefaultRegionName()).
			Msg("no continent maps to a configured region: tenants heard nowhere go to the default region first")
	}
}

// isReady reports whether the node is started and ready holds (draining aside).
func (n *Node) isReady() bool {
	return n.startedAt.Load() != nil && n.ready.Load()
}

// ClientAddr returns the client listener's address, nil before Start.
func (n *Node) ClientAddr() net.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.clientAddr
}

// AdminAddr returns the admin listener's address, nil before Start.
func (n *Node) AdminAddr() net.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.adminAddr
}

func (n *Node) version() string {
	if n.cfg.Version == "" {
		return "dev"
	}
	return n.cfg.Version
}

// Drain stops the entry gracefully, as after SIGTERM (docs/REFERENCE.md, "Cluster and
// operations"): every answer carries Connection: close and /readyz answers 503 for --drain;
// then the listeners close, open requests get up to 10 s (streams included) and are ended;
// then the proxy's idle router connections close and the background goroutines stop; then,
// with --state-dir, the home table is written a last time. It returns when all that is done.
//
// If ctx ends (or Close is called) first, the waits are cut short and open requests are
// ended at once; Drain then returns ctx's error. Drain before Start amounts to Close. See Node
// for calling Drain twice.
func (n *Node) Drain(ctx context.Context) error {
	var err error
	n.drainOnce.Do(func() { err = n.drain(ctx, false) })
	return err
}

// drainAfterUpgrade is Drain once a new process serves on this entry's sockets (upgrade): it
// does not leave the cluster but stops its gossip and hands it to the new process (which
// joins under the same name), closes the admin listener at once (the new process answers
// /readyz on it), stops writing --state-dir (the new process writes it) and goes on answering
// the connections it holds with Connection: close for --drain, then as Drain.
func (n *Node) drainAfterUpgrade(ctx context.Context) error {
	var err error
	n.drainOnce.Do(func() { err = n.drain(ctx, true) })
	return err
}

func (n *Node) drain(ctx context.Context, upgraded bool) error {
	n.mu.Lock()
	n.stopped = true
	started := n.startCalled && n.startErr == nil
	n.mu.Unlock()
	if !started {
		n.Close()
		return nil
	}

	n.draining.Store(true)
	if upgraded {
		n.shutdownAdmin()
		if n.stateStop != nil {
			n.stateStop()
		}
		n.closeCluster()
		n.cfg.Upgrades.ReleaseGossip()
	} else {
		// Peers see this entry "left" at once and stop sending it anything.
		n.leaveCluster()
	}
	// Every answer from now on carries Connection: close (the proxy's ConnClose; net/http
	// then closes an HTTP/1 connection after it, and sends an h2 one GOAWAY). A kept-alive
	// connection idle now stays open until the drain's end, so that a request its client sends
	// meanwhile is answered: net/http's SetKeepAlivesEnabled(false) would close it at once.
	if n.lean != nil {
		n.lean.StopKeepAlives()
	}
	n.log.Info().Stringer("drain", n.cfg.Drain).Int64("inflight", n.proxy.Inflight()).
		Msg("draining: answers carry Connection: close")
	t := time.NewTimer(n.cfg.Drain)
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-n.closed:
	}
	t.Stop()

	sctx, cancel := context.WithTimeout(ctx, n.grace)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() { // Close cuts the grace short.
		select {
		case <-n.closed:
			cancel()
		case <-stop:
		}
	}()
	if u := n.cfg.Upgrades; u != nil && !upgraded {
		u.Stop() // its copies of the listening sockets too: new connections are refused now
	}
	n.log.Info().Int64("inflight", n.proxy.Inflight()).Stringer("grace", n.grace).
		Msg("stopped listening; waiting for open requests")
	if err := n.shutdownClient(sctx); err != nil {
		// An event stream never ends by itself: ending it here is the drain doing its work
		// (clients reconnect). A request not yet answered is one the drain failed.
		inflight, streams := n.proxy.Inflight(), n.proxy.Streaming()
		if inflight > streams {
			n.log.Warn().Int64("inflight", inflight).Int64("streams", streams).
				Msg("open requests ended at the end of the grace, before their answer")
		} else {
			n.log.Info().Int64("streams", streams).Msg("open streams ended at the end of the grace")
		}
		n.closeClient()
	}
	n.proxy.Close()
	n.shutdownAdmin()
	n.closeCluster()
	n.stopBackground()
	if !upgraded {
		n.flushState()
	}
	n.log.Info().Msg("drained")
	return ctx.Err()
}

// shutdownAdmin closes the admin listener, giving its open requests adminGrace.
func (n *Node) shutdownAdmin() {
	actx, acancel := context.WithTimeout(context.Background(), adminGrace)
	defer acancel()
	if err := n.admin.Shutdown(actx); err != nil {
		n.admin.Close()
	}
}

// Close stops the entry at once: both listeners and every open connection close, requests in
// flight are ended, the background goroutines stop. See Node for calling Close twice.
func (n *Node) Close() {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.stopped = true
		close(n.closed)
		n.mu.Unlock()
		n.closeClient()
		n.admin.Close()
		n.proxy.Close()
		n.closeCluster()
		n.stopBackground()
	})
}

func (n *Node) stopBackground() {
	n.bgCancel()
	n.wg.Wait()
}

// Run runs an entry until ctx ends, then drains it: New, Start, wait, Drain, Close. It
// returns nil after a drain (exit status 0), a *ConfigError if cfg or a file it names is bad
// (exit status 2), and any other error for a runtime failure: a listener that cannot be bound
// or stops serving (exit status 1). The caller owns the signals: cancel ctx on the first
// SIGTERM or SIGINT; on a second, exit without waiting for Run.
func Run(ctx context.Context, cfg Config, logger zerolog.Logger) error {
	n, err := New(cfg, logger)
	if err != nil {
		return err
	}
	defer n.Close()
	if err := n.Start(ctx); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			// The drain has its own bounds (--drain, then 10 s); ctx is already done.
			n.Drain(context.WithoutCancel(ctx))
			return nil
		case err := <-n.failed:
			return err
		case <-cfg.UpgradeOn:
			if n.upgrade() {
				n.drainAfterUpgrade(context.WithoutCancel(ctx))
				return nil
			}
		}
	}
}
