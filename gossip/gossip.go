package gossip

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/cmd/serf/command/agent"
	"github.com/hashicorp/serf/serf"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/gossip/internal/keyring"
	"github.com/fenec/fenec-entry/gossip/internal/mux"
	"github.com/fenec/fenec-entry/gossip/internal/spread"
	"github.com/fenec/fenec-entry/gossip/internal/tablesync"
	"github.com/fenec/fenec-entry/gossip/internal/validate"
	"github.com/fenec/fenec-entry/gossip/internal/wire"
	"github.com/fenec/fenec-entry/internal/clock"
)

// Member is a cluster member as serf sees it.
type Member struct {
	Name  string
	Addr  string // memberlist address, ip:port
	State string // alive, leaving, left, failed
	Tags  map[string]string
}

// PeerMember is an alive member other than this entry.
type PeerMember struct {
	Name string
	Addr string // memberlist address, ip:port: where its table is fetched too
	Tags map[string]string
}

// Gossip is this entry's part in the cluster: serf membership, marks and clears as serf user
// events, homes in direct packets, the joiner's table and repair (Sync), all over one
// address, memberlist's (--gossip-bind). Lifecycle: New, Start, Leave, Close; Leave and Close
// are idempotent, and Close waits for every goroutine Start started. Members, Peers, Up,
// Joined and Addr are safe for concurrent use at any time (empty before Start).
//
// If serf shuts itself down (it lost a node name conflict), Gossip says so (Up is false, the
// members are gone) and starts a fresh serf on the same address after a backoff (1 s
// doubling to 30 s), keeping the keyring, the table and the RPC listener; it never restarts
// after Leave or Close. A Gossip on an injected Transport cannot be restarted: it stays down.
type Gossip struct {
	cfg  Config
	log  zerolog.Logger
	m    *metrics
	keys keyring.Keys // the keyring of every incarnation
	wire mux.Bytes    // the bytes every incarnation's transport carried

	spread         *spread.Spread // homes, marks and clears, to every member and from them
	membersChanged chan struct{}
	peers          atomic.Pointer[peerList]  // directPeers' list
	peersDirty     atomic.Bool               // a member event since the list was made
	plan           atomic.Pointer[planEntry] // relayPlan's
	planDirty      atomic.Bool
	joined         atomic.Bool
	selfAddr       atomic.Pointer[string] // Addr, readable without mu (the conflict log line)
	keyRep         *keyReport             // peers holding another gossip key, from memberlist's log and Join

	sync       *tablesync.Sync
	syncLn     *mux.Listener // the sync streams every incarnation's transport sorts out
	syncSrv    *http.Server
	syncClient *http.Client

	// tagMu orders SetTag's calls, whose wait for serf's broadcast is made without mu.
	tagMu sync.Mutex
	// setAgentTags is agentSetTags (tags.go); a test's stand-in waits as serf can.
	setAgentTags func(*agent.Agent, map[string]string) error

	mu        sync.Mutex // guards the following
	started   bool
	closed    bool
	left      bool               // Leave was called: serf ends on purpose, no restart
	inc       *incarnation       // the current serf; nil before Start
	rpcLn     net.Listener       // nil without RPCAddr
	port      int                // memberlist's port, kept across incarnations (BindAddr's, or the one picked)
	cancel    context.CancelFunc // stops every goroutine
	joinStop  context.CancelFunc // stops the joiner (Leave)
	leaveDone chan struct{}      // closed when the leave ended; nil before Leave
	joining   chan struct{}      // closed when the joiner's join in flight returns; nil: none
	leaveErr  error
	known     []string // members the snapshot listed at Start, for the joiner; read-only after

	wg sync.WaitGroup
}

// incarnation is one serf: its agent, its RPC server and its transport.
type incarnation struct {
	agent *agent.Agent
	ipc   *agent.AgentIPC // nil without RPCAddr
	ipcLn *mux.Listener
	tr    *mux.Transport
}

// Restart backoff after serf shut itself down.
const (
	restartMin = time.Second
	restartMax = 30 * time.Second
)

// New validates cfg and builds a Gossip. It does no I/O.
func New(cfg Config) (*Gossip, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System
	}
	if cfg.LookupIP == nil {
		cfg.LookupIP = func(ctx context.Context, host string) ([]net.IP, error) {
			return net.DefaultResolver.LookupIP(ctx, "ip", host)
		}
	}
	cfg.Tags = maps.Clone(cfg.Tags)
	if cfg.Tags == nil {
		cfg.Tags = make(map[string]string)
	}
	cfg.Tags["role"] = "entry"
	cfg.Tags[spread.RelayTag] = spread.RelayVersion // this build relays, acked
	keys, err := keyring.New(cfg.Key)
	if err != nil {
		return nil, err
	}
	v := validate.NewTable(cfg.Table, cfg.Clock.Now)
	g := &Gossip{
		keys:           keys,
		cfg:            cfg,
		log:            cfg.Logger.With().Str("component", "gossip").Logger(),
		membersChanged: make(chan struct{}, 1),
		syncLn:         mux.NewListener(mux.PipeAddr("gossip sync streams"), mux.SyncBacklog),
		setAgentTags:   agentSetTags,
	}
	g.keyRep = newKeyReport(g.log)
	if g.m, err = newMetrics(cfg.Registerer, g.Up, g.otherRelayMembers, &g.wire, g.keyRep.counter); err != nil {
		return nil, err
	}
	// Before Start: the transport's goroutine hands it packets from the first one on.
	g.spread, err = spread.New(spread.Setup{
		Config:     cfg.Spread,
		NodeName:   cfg.NodeName,
		Keys:       keys,
		Label:      cfg.Label,
		Table:      cfg.Table,
		Validator:  v,
		Now:        cfg.Clock.Now,
		Logger:     g.log,
		Registerer: cfg.Registerer,
		Peers:      g.directPeers,
		PeerAddr:   g.peerAddr,
		Plan:       g.relayPlan,
		RTT:        g.rtt,
		Send:       g.sendEvent,
		Depth:      g.queueDepth,
		Write:      g.writeDirect,
	})
	if err != nil {
		return nil, err
	}
	g.syncClient = &http.Client{Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           g.dialSync,
		ResponseHeaderTimeout: 5 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   2,
		DisableCompression:    true, // a snapshot is a few MB on a private network
	}}
	g.sync, err = tablesync.NewSync(tablesync.Setup{
		Config:     cfg.Sync,
		Node:       cfg.NodeName,
		Keys:       keys,
		Table:      cfg.Table,
		Validator:  v,
		MemberAddr: g.MemberAddr,
		Peers:      g.syncPeers,
		Capacity:   cfg.Capacity,
		Client:     g.syncClient,
		Now:        cfg.Clock.Now,
		Logger:     cfg.Logger,
		Registerer: cfg.Registerer,
	})
	if err != nil {
		return nil, err
	}
	g.syncSrv = &http.Server{
		Handler:           g.sync.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(logWriter{log: g.log}, "", 0),
	}
	return g, nil
}

// resolveOne returns host as an IP address: itself if it is one, else its first address.
func resolveOne(host string) (string, error) {
	if ip := net.ParseIP(host); ip != nil {
		return ip.String(), nil
	}
	ips, err := net.DefaultResolver.LookupIP(context.Background(), "ip", host)
	if err != nil {
		return "", err
	}
	if len(ips) == 0 {
		return "", fmt.Errorf("%q has no address", host)
	}
	return ips[0].String(), nil
}

// memberlistConfig starts from memberlist's WAN profile (entries are on several continents)
// and tunes it with Config.Membership, where each value's reason is. Called with g.mu
// held.
func (g *Gossip) memberlistConfigLocked() (*memberlist.Config, error) {
	c := g.cfg
	mc := memberlist.DefaultWANConfig()
	mc.Name = c.NodeName
	host, port, _ := splitHostPort(c.BindAddr) // validated
	if g.port != 0 {
		port = g.port // a restart binds where the first incarnation did
	}
	if host == "" {
		host = "0.0.0.0"
	} else if net.ParseIP(host) == nil {
		// memberlist binds every interface for a name it cannot parse as an IP: resolve it,
		// so that --gossip-bind fly-local-6pn:7946 binds the 6PN address only.
		ip, err := resolveOne(host)
		if err != nil {
			return nil, fmt.Errorf("gossip: --gossip-bind %q: %v", c.BindAddr, err)
		}
		host = ip
	}
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = "", port
	if c.AdvertiseAddr != "" {
		ahost, aport, _ := splitHostPort(c.AdvertiseAddr)
		ip, err := resolveOne(ahost)
		if err != nil {
			return nil, fmt.Errorf("gossip: --gossip-advertise %q: %v", c.AdvertiseAddr, err)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = ip, aport
	}
	m := c.Membership
	mc.UDPBufferSize = m.UDPBufferSize
	mc.GossipInterval, mc.GossipNodes, mc.RetransmitMult = m.GossipInterval, m.GossipNodes, m.RetransmitMult
	mc.ProbeInterval, mc.ProbeTimeout, mc.SuspicionMult = m.ProbeInterval, m.ProbeTimeout, m.SuspicionMult
	mc.PushPullInterval, mc.TCPTimeout = m.PushPullInterval, m.TCPTimeout
	mc.DeadNodeReclaimTime = m.DeadNodeReclaimTime
	// Our payloads are DEFLATEd already; memberlist's LZW of every packet would cost CPU for
	// little (the agent sets this from its own config too).
	mc.EnableCompression = false
	if g.keys.Secure() {
		// The keyring, not SecretKey: memberlist would make SecretKey the primary key again,
		// and a restarted serf must keep what a rotation installed.
		mc.Keyring = g.keys.Ring()
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	mc.Label = c.Label
	return mc, nil
}

// transport is memberlist's transport for mc: Config.Transport (first incarnation only) or a
// UDP/TCP one on BindAddr, under a mux.Transport that takes out the direct packets and the
// sync streams (package mux).
func (g *Gossip) transportLocked(mc *memberlist.Config) (*mux.Transport, error) {
	inner := g.cfg.Transport
	if inner == nil {
		nt, err := newNetTransport(mc, log.New(g.logWriter(), "", log.LstdFlags), g.cfg.BindWait)
		if err != nil {
			return nil, err
		}
		inner = nt
	} else if g.inc != nil {
		return nil, errors.New("gossip: an injected transport is not restarted")
	}
	return mux.NewTransport(inner, wire.Magic, g.spread.HandlePacket, g.syncLn,
		func(reason string) { g.m.streamsRefused.WithLabelValues(reason).Inc() }, &g.wire), nil
}

// boundTransport is memberlist's NetTransport whose streams are dialled from the address it
// is bound to. memberlist's own leave the source to the kernel, which on a host with more than
// one address (a second address on the interface, IPv6's temporary ones, 127.0.X.Y) may pick
// another than the one the entry advertises, and the peer's table sync then refuses the
// stream (wrong_source: only a member's address may fetch the table).
type boundTransport struct {
	*memberlist.NetTransport
	local *net.TCPAddr
}

func (t *boundTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, LocalAddr: t.local}
	return d.Dial("tcp", addr)
}

func (t *boundTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}

// bindRetry is how often a gossip address in use is tried again (Config.BindWait).
const bindRetry = 100 * time.Millisecond

// newNetTransport makes the UDP/TCP transport memberlist would make for mc (which it
// does only when Config.Transport is nil), so that the mux.Transport can sit on it. Port 0
// picks a free port and writes it into mc, as memberlist does. Bound to one address, its
// streams are dialled from it (boundTransport). A fixed port in use is tried again every
// bindRetry for wait.
func newNetTransport(mc *memberlist.Config, logOut *log.Logger, wait time.Duration) (memberlist.NodeAwareTransport, error) {
	nc := &memberlist.NetTransportConfig{BindAddrs: []string{mc.BindAddr}, BindPort: mc.BindPort, Logger: logOut}
	tries := 1 + int(wait/bindRetry)
	if mc.BindPort == 0 {
		tries = 10 // the port is picked for TCP, then bound for UDP too: racy
	}
	var err error
	for try := range tries {
		if try > 0 && mc.BindPort != 0 {
			time.Sleep(bindRetry)
		}
		var nt *memberlist.NetTransport
		if nt, err = memberlist.NewNetTransport(nc); err == nil {
			if mc.BindPort == 0 {
				mc.BindPort = nt.GetAutoBindPort()
				mc.AdvertisePort = mc.BindPort
			}
			if ip := net.ParseIP(mc.BindAddr); ip != nil && !ip.IsUnspecified() {
				return &boundTransport{NetTransport: nt, local: &net.TCPAddr{IP: ip}}, nil
			}
			return nt, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, &BindError{Flag: "--gossip-bind", Err: bindCause(net.JoinHostPort(mc.BindAddr, strconv.Itoa(mc.BindPort)), err)}
}

// BindError is an address of the entry's that cannot be bound, as the operator set it: the
// flag and the system's error, "--gossip-bind: listen udp 127.0.0.1:7946: bind: address
// already in use", with nothing of the layers it went through.
type BindError struct {
	Flag string // with its dashes
	Err  error
}

func (e *BindError) Error() string { return e.Flag + ": " + e.Err.Error() }
func (e *BindError) Unwrap() error { return e.Err }

// bindCause is the system's error for binding addr, which memberlist's flattens into its own
// text ("failed to start TCP listener on ..."): binding the address again, TCP then UDP, as
// memberlist does, gives it back as net's. If both bind now, memberlist's error is kept.
func bindCause(addr string, mlErr error) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	ln.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	pc.Close()
	return mlErr
}

// writeDirect sends a direct packet to one member through the current transport, under
// memberlist (no label header: the label is in the packet's additional data).
func (g *Gossip) writeDirect(pkt []byte, to memberlist.Address) error {
	g.mu.Lock()
	inc := g.inc
	g.mu.Unlock()
	if inc == nil {
		return errNoTransport
	}
	_, err := inc.tr.WriteToAddress(pkt, to)
	return err
}

// serfConfig is serf's configuration on mc, with its member snapshot at snapshot ("" for
// none).
func (g *Gossip) serfConfig(mc *memberlist.Config, snapshot string) *serf.Config {
	sc := serf.DefaultConfig()
	sc.NodeName = g.cfg.NodeName
	sc.Tags = maps.Clone(g.cfg.Tags)
	sc.MemberlistConfig = mc
	sc.UserEventSizeLimit = g.cfg.Spread.EventSizeLimit
	sc.MaxQueueDepth = g.cfg.Membership.MaxQueueDepth
	// With a snapshot, a restart rejoins the members it knew, also after the drain's
	// graceful leave; without, it rejoins through Join/JoinDNS only.
	sc.SnapshotPath = snapshot
	sc.RejoinAfterLeave = snapshot != ""
	sc.LeavePropagateDelay = g.cfg.Membership.LeavePropagateDelay
	// Member events are delivered as they happen: nothing here batches them.
	sc.CoalescePeriod, sc.QuiescentPeriod = 0, 0
	sc.UserCoalescePeriod, sc.UserQuiescentPeriod = 0, 0
	return sc
}

// Start binds memberlist's listeners and the RPC listener, creates serf through its agent
// (so that its IPC serves `serf members` and `serf keys`), and starts the publisher, the
// receiver, the joiner, the members watcher, the sync server and the supervisor that starts
// serf again if it shuts itself down. It returns once listening; joining retries in the
// background every JoinInterval until a peer answers. ctx bounds nothing after Start
// returns: Close stops everything.
func (g *Gossip) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started || g.closed {
		return errors.New("gossip: start: already started or closed")
	}
	if g.cfg.RPCAddr != "" {
		ln, err := net.Listen("tcp", g.cfg.RPCAddr)
		if err != nil {
			return &BindError{Flag: "--rpc-addr", Err: err}
		}
		g.rpcLn = ln
	}
	if g.cfg.SnapshotPath != "" {
		g.known = snapshotMembers(g.cfg.SnapshotPath, g.cfg.NodeName)
	}
	if err := g.startIncarnationLocked(); err != nil {
		if g.rpcLn != nil {
			g.rpcLn.Close()
		}
		return fmt.Errorf("gossip: start: %w", err)
	}
	g.started = true

	runCtx, cancel := context.WithCancel(context.Background())
	joinCtx, joinStop := context.WithCancel(runCtx)
	g.cancel, g.joinStop = cancel, joinStop
	g.wg.Add(5)
	go func() { defer g.wg.Done(); g.spread.Run(runCtx) }()
	go func() { defer g.wg.Done(); g.joiner(joinCtx) }()
	go func() { defer g.wg.Done(); g.watchMembers(runCtx) }()
	go func() { defer g.wg.Done(); g.supervise(runCtx) }()
	go func() { defer g.wg.Done(); g.syncSrv.Serve(g.syncLn) }()
	if g.rpcLn != nil {
		g.wg.Go(g.acceptRPC)
	}
	g.log.Info().Str("addr", g.addrLocked()).Str("rpc", g.cfg.RPCAddr).Bool("encrypted", g.keys.Secure()).
		Msg("gossip: started")
	return nil
}

// startIncarnationLocked builds and starts one serf: transport, agent, RPC server. Every
// incarnation uses the same member snapshot (the one before it has closed it: serf's
// Shutdown waits for its snapshotter). If serf cannot start with the snapshot, the file is
// moved aside and serf is started once more without one: a bad file never keeps gossip down.
func (g *Gossip) startIncarnationLocked() error {
	snap := g.checkSnapshot()
	a, tr, err := g.startSerfLocked(snap)
	for retry := 0; err != nil && snap != "" && !errors.Is(err, errTransport); retry++ {
		// A fresh file in its place first, then none at all.
		g.log.Error().Err(err).Str("file", snap).Msg("gossip: serf cannot start with its member snapshot")
		if _, serr := os.Lstat(snap); serr == nil && retry == 0 {
			snap = g.moveSnapshotAside(snap)
		} else {
			snap = ""
		}
		a, tr, err = g.startSerfLocked(snap)
	}
	if err != nil {
		return err
	}
	inc := &incarnation{agent: a, tr: tr}
	if g.rpcLn != nil {
		lw := g.logWriter()
		inc.ipcLn = mux.NewListener(g.rpcLn.Addr(), 16)
		inc.ipc = agent.NewAgentIPC(a, g.cfg.RPCAuth, inc.ipcLn, lw, agent.NewLogWriter(256), false)
	}
	g.inc = inc
	addr := g.addrLocked()
	g.selfAddr.Store(&addr)
	return nil
}

// errNoTransport is a send or a dial while no serf runs (before Start, or while it is started
// again).
var errNoTransport = errors.New("gossip: not running")

// errTransport marks a failure to build the transport (a bind error): not the snapshot's.
var errTransport = errors.New("gossip: transport")

// startSerfLocked builds the memberlist transport and starts serf's agent on it, with its
// member snapshot at snapshot ("" for none).
func (g *Gossip) startSerfLocked(snapshot string) (*agent.Agent, *mux.Transport, error) {
	mc, err := g.memberlistConfigLocked()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errTransport, err)
	}
	tr, err := g.transportLocked(mc)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errTransport, err)
	}
	mc.Transport = tr
	lw := g.logWriter()
	ac := agent.DefaultConfig()
	ac.NodeName = g.cfg.NodeName
	ac.Tags = maps.Clone(g.cfg.Tags)
	ac.EnableCompression = false
	a, err := agent.Create(ac, g.serfConfig(mc, snapshot), lw)
	if err != nil {
		_ = tr.Shutdown()
		return nil, nil, err
	}
	a.RegisterEventHandler(eventHandler{g})
	if err := a.Start(); err != nil {
		_ = tr.Shutdown() // memberlist may not have taken it over
		return nil, nil, err
	}
	g.port = mc.BindPort // the one picked for port 0 (newNetTransport writes it back)
	return a, tr, nil
}

// acceptRPC hands each RPC connection to the current serf's IPC server; while serf is being
// started again, connections are closed at once. Returns when the listener closes.
func (g *Gossip) acceptRPC() {
	for {
		c, err := g.rpcLn.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // a transient accept error (EMFILE)
			continue
		}
		g.mu.Lock()
		inc := g.inc
		g.mu.Unlock()
		if inc == nil || inc.ipcLn == nil || !inc.ipcLn.Push(c) {
			c.Close()
		}
	}
}

// supervise watches the current serf and starts a fresh one, after a backoff, when it shut
// itself down (serf's name conflict resolution does): gossip is then down, and says so, until
// the new serf is up. It never restarts after Leave or Close.
func (g *Gossip) supervise(ctx context.Context) {
	backoff := restartMin
	for {
		g.mu.Lock()
		inc := g.inc
		g.mu.Unlock()
		up := g.cfg.Clock.Now()
		select {
		case <-ctx.Done():
			return
		case <-inc.agent.Serf().ShutdownCh():
		}
		if ctx.Err() != nil || g.leftOrClosed() {
			return
		}
		if g.cfg.Clock.Now().Sub(up) > restartMax {
			backoff = restartMin // it ran a while: this is a new trouble
		}
		g.countMembers()
		for {
			g.log.Error().Str("node", g.cfg.NodeName).Stringer("retry_in", backoff).
				Msg("gossip: serf shut down by itself (see the lines above): gossip is down; starting a fresh serf")
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, restartMax)
			err := g.restart()
			if err == nil {
				g.m.restarts.Inc()
				g.log.Info().Str("addr", g.Addr()).Msg("gossip: serf started again")
				break
			}
			if errors.Is(err, errClosed) {
				return
			}
			g.log.Error().Err(err).Msg("gossip: starting serf again failed")
		}
	}
}

var errClosed = errors.New("gossip: closed")

func (g *Gossip) leftOrClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.left || g.closed
}

// restart replaces a shut-down serf with a fresh one.
func (g *Gossip) restart() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.left || g.closed {
		return errClosed
	}
	old := g.inc
	if old.ipc != nil {
		old.ipc.Shutdown()
	}
	_ = old.agent.Shutdown() // serf is down already; this ends the agent's own goroutines
	_ = old.tr.Shutdown()
	return g.startIncarnationLocked()
}

func (g *Gossip) sendEvent(payload []byte) error {
	s := g.serfOrNil()
	if s == nil {
		return errNoTransport
	}
	return s.UserEvent(wire.EventName, payload, false)
}

// queueDepth is serf's user event queue depth: the events (ours and relayed) still to be
// retransmitted. serf drops the oldest beyond MaxQueueDepth. -1 if unknown.
func (g *Gossip) queueDepth() int {
	s := g.serfOrNil()
	if s == nil {
		return -1
	}
	n, err := strconv.Atoi(s.Stats()["event_queue"])
	if err != nil {
		return -1
	}
	return n
}

// watchMembers keeps the members gauge and Joined current: on every member event, and every
// second (state changes serf reports no event for, such as a reap or serf's own shutdown).
func (g *Gossip) watchMembers(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		g.countMembers()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-g.membersChanged:
		}
	}
}

func (g *Gossip) countMembers() {
	counts := make(map[string]int, len(memberStates))
	for _, m := range g.Members() {
		counts[m.State]++
		if m.State == "alive" && m.Name != g.cfg.NodeName {
			g.joined.Store(true)
		}
	}
	for _, s := range memberStates {
		g.m.members.WithLabelValues(s).Set(float64(counts[s]))
	}
}

// Leave leaves the cluster gracefully: peers see this entry "left", not failed. It stops
// the joiner (no rejoin), broadcasts the leave and waits for it to propagate (serf's
// BroadcastTimeout, 5 s at most, plus LeavePropagateDelay), or until ctx is done. Safe to
// call twice: later calls wait for the first leave and return its result. Before Start it
// does nothing.
func (g *Gossip) Leave(ctx context.Context) error {
	g.mu.Lock()
	if !g.started || g.closed && g.leaveDone == nil {
		g.mu.Unlock()
		return nil
	}
	if g.leaveDone == nil {
		g.left = true
		g.leaveDone = make(chan struct{})
		g.joinStop()
		a, done, joining := g.inc.agent, g.leaveDone, g.joining
		go func() { // ends within serf's bounded leave, whoever waits
			if joining != nil {
				// A join in flight: the peer it reached counts this entry alive, but the
				// entry learns the peer only from its answer. Leaving before that answer
				// would tell no one, and the peer would see this entry fail, not leave.
				t := time.NewTimer(leaveJoinWait)
				select {
				case <-joining:
				case <-t.C:
				}
				t.Stop()
			}
			err := a.Leave()
			g.mu.Lock()
			g.leaveErr = err
			g.mu.Unlock()
			close(done)
		}()
	}
	done := g.leaveDone
	g.mu.Unlock()
	select {
	case <-done:
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.leaveErr != nil {
			return fmt.Errorf("gossip: leave: %w", g.leaveErr)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("gossip: leave: %w", ctx.Err())
	}
}

// Close shuts gossip down without leaving (peers see this entry failed unless Leave came
// first): it stops the RPC listener, the sync server, serf and memberlist, and waits for its
// goroutines. What is still pending publication is dropped (repair carries it). Safe to call
// twice.
func (g *Gossip) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	if !g.started {
		g.mu.Unlock()
		return nil
	}
	g.cancel()
	if g.rpcLn != nil {
		g.rpcLn.Close()
	}
	inc, leaveDone := g.inc, g.leaveDone
	if inc.ipc != nil {
		inc.ipc.Shutdown()
	}
	g.mu.Unlock()
	if leaveDone != nil {
		<-leaveDone // a leave in progress ends within serf's bounds; shutting down under it races
	}
	err := inc.agent.Shutdown()
	_ = inc.tr.Shutdown()
	g.syncSrv.Close()
	g.syncLn.Close()
	g.wg.Wait()
	g.syncClient.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("gossip: close: %w", err)
	}
	return nil
}

// Members returns every member serf knows, this entry included: alive, leaving, left (until
// reaped) and failed. None while serf is shut down (it knows no one then).
func (g *Gossip) Members() []Member {
	s := g.serfOrNil()
	if s == nil || s.State() == serf.SerfShutdown {
		return nil
	}
	ms := s.Members()
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, Member{Name: m.Name, Addr: memberAddr(m), State: m.Status.String(), Tags: m.Tags})
	}
	return out
}

// otherRelayMembers counts the alive members whose relay tag is not this build's
// (spread.RelayVersion): any one keeps the fleet's homes off relays (spread.NewPlan).
func (g *Gossip) otherRelayMembers() int {
	n := 0
	for _, m := range g.Members() {
		if m.State == "alive" && m.Tags[spread.RelayTag] != spread.RelayVersion {
			n++
		}
	}
	return n
}

// Peers returns the alive members other than this entry; none while serf is not alive.
func (g *Gossip) Peers() []PeerMember {
	s := g.serfOrNil()
	if s == nil || s.State() != serf.SerfAlive {
		return nil
	}
	var out []PeerMember
	for _, m := range s.Members() {
		if m.Status == serf.StatusAlive && m.Name != g.cfg.NodeName {
			out = append(out, PeerMember{Name: m.Name, Addr: memberAddr(m), Tags: m.Tags})
		}
	}
	return out
}

// MemberAddr returns the IP address of node if it is an alive member (this entry
// included), for the table's SyncConfig.MemberAddr.
func (g *Gossip) MemberAddr(node string) (netip.Addr, bool) {
	s := g.serfOrNil()
	if s == nil || s.State() != serf.SerfAlive {
		return netip.Addr{}, false
	}
	for _, m := range s.Members() {
		if m.Name == node && m.Status == serf.StatusAlive {
			a, ok := netip.AddrFromSlice(m.Addr)
			return a.Unmap(), ok
		}
	}
	return netip.Addr{}, false
}

// rtt is the round trip to node that serf's network coordinates estimate; false while either
// coordinate is unknown (serf updates them with every probe).
func (g *Gossip) rtt(node string) (time.Duration, bool) {
	s := g.serfOrNil()
	if s == nil || s.State() != serf.SerfAlive {
		return 0, false
	}
	theirs, ok := s.GetCachedCoordinate(node)
	if !ok || theirs == nil {
		return 0, false
	}
	ours, err := s.GetCoordinate()
	if err != nil || ours == nil || !ours.IsCompatibleWith(theirs) {
		return 0, false
	}
	return ours.DistanceTo(theirs), true
}

// Joined reports whether another member has been seen alive since Start.
func (g *Gossip) Joined() bool { return g.joined.Load() }

// Up reports whether serf is running and a member (not before Start, not after Leave or
// Close, not while it is shut down and being started again): what fenec_entry_gossip_up
// shows.
func (g *Gossip) Up() bool {
	s := g.serfOrNil()
	return s != nil && s.State() == serf.SerfAlive
}

// State is serf's state: "alive", "leaving", "left" or "shutdown"; "" before Start.
func (g *Gossip) State() string {
	s := g.serfOrNil()
	if s == nil {
		return ""
	}
	return s.State().String()
}

// Addr is this entry's memberlist address (ip:port, the advertised one), "" before Start.
func (g *Gossip) Addr() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.addrLocked()
}

func (g *Gossip) addrLocked() string {
	if g.inc == nil {
		return ""
	}
	// serf's copy: memberlist's LocalNode points into its table, rewritten by every tag update.
	return memberAddr(g.inc.agent.Serf().LocalMember())
}

// RPCAddr is the serf RPC listener's address, nil before Start or without RPCAddr.
func (g *Gossip) RPCAddr() net.Addr {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.rpcLn == nil {
		return nil
	}
	return g.rpcLn.Addr()
}

// bindPort is the port memberlist listens on (BindAddr's, or the one picked for port 0).
func (g *Gossip) bindPort() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.port
}

func (g *Gossip) serfOrNil() *serf.Serf {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inc == nil {
		return nil
	}
	return g.inc.agent.Serf()
}
