package gossip

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/cmd/serf/command/agent"
	"github.com/hashicorp/serf/serf"
	"github.com/rs/zerolog"
)

// Member is a cluster member as serf sees it.
type Member struct {
	Name  string
	Addr  string // memberlist address, ip:port
	State string // alive, leaving, left, failed
	Tags  map[string]string
}

// PeerMember is an alive member other than this entry. (Peer, in snapshot.go, is the same
// entry as the snapshot client sees it: node builds it from Name and Tags["snap"].)
type PeerMember struct {
	Name string
	Addr string // memberlist address, ip:port
	Tags map[string]string
}

// Gossip is this entry's membership in the cluster and the publishing and applying of homes
// and marks (homes in direct packets, marks in serf user events). Lifecycle: New, Start, Leave, Close; Leave and Close are
// idempotent, and Close waits for every goroutine Start started. Members, Peers, Joined and
// Addr are safe for concurrent use at any time (empty before Start).
type Gossip struct {
	cfg Config
	log zerolog.Logger
	m   *metrics
	v   *Validator

	recvq          chan []byte
	codec          *directCodec
	dedup          *directDedup // owned by the directTransport's goroutine
	membersChanged chan struct{}
	joined         atomic.Bool

	mu        sync.Mutex // guards the following
	started   bool
	closed    bool
	agent     *agent.Agent
	ipc       *agent.AgentIPC
	rpcAddr   net.Addr
	cancel    context.CancelFunc // stops every goroutine
	joinStop  context.CancelFunc // stops the joiner (Leave)
	leaveDone chan struct{}      // closed when the leave ended; nil before Leave
	leaveErr  error
	pub       *publisher
	tr        *directTransport

	wg sync.WaitGroup
}

// New validates cfg and builds a Gossip. It does no I/O.
func New(cfg Config) (*Gossip, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.Tags = maps.Clone(cfg.Tags)
	if cfg.Tags == nil {
		cfg.Tags = make(map[string]string)
	}
	cfg.Tags["role"] = "entry"
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	codec, err := newDirectCodec(cfg.Key, cfg.Label)
	if err != nil {
		return nil, err
	}
	return &Gossip{
		codec:          codec,
		dedup:          newDirectDedup(),
		cfg:            cfg,
		log:            cfg.Logger.With().Str("component", "gossip").Logger(),
		m:              m,
		v:              NewValidator(cfg.Regions, nil),
		recvq:          make(chan []byte, cfg.RecvQueue),
		membersChanged: make(chan struct{}, 1),
	}, nil
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
// and tunes it; each value's reason is at its Default constant in config.go.
func (g *Gossip) memberlistConfig() (*memberlist.Config, error) {
	c := g.cfg
	mc := memberlist.DefaultWANConfig()
	mc.Name = c.NodeName
	host, port, _ := splitHostPort(c.BindAddr) // validated
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
	mc.UDPBufferSize = c.UDPBufferSize
	mc.GossipInterval = c.GossipInterval
	mc.GossipNodes = c.GossipNodes
	mc.RetransmitMult = c.RetransmitMult
	mc.ProbeInterval = c.ProbeInterval
	mc.ProbeTimeout = c.ProbeTimeout
	mc.SuspicionMult, mc.DisableTcpPings = c.SuspicionMult, c.DisableTCPPings
	mc.PushPullInterval = c.PushPullInterval
	mc.TCPTimeout = c.TCPTimeout
	mc.DeadNodeReclaimTime = DefaultDeadNodeReclaimTime
	// Our payloads are DEFLATEd already; memberlist's LZW of every packet would cost CPU for
	// little (the agent sets this from its own config too).
	mc.EnableCompression = false
	if len(c.Key) > 0 {
		mc.SecretKey = append([]byte(nil), c.Key...)
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	mc.Label = c.Label
	return mc, nil
}

// transport is memberlist's transport for mc: Config.Transport or a UDP/TCP one on
// BindAddr, under a directTransport that takes the direct packets out (direct.go).
func (g *Gossip) transport(mc *memberlist.Config) (*directTransport, error) {
	inner := g.cfg.Transport
	if inner == nil {
		nt, err := newNetTransport(mc, log.New(logWriter{g.log}, "", log.LstdFlags))
		if err != nil {
			return nil, err
		}
		inner = nt
	}
	return newDirectTransport(inner, g.handleDirect), nil
}

// handleDirect takes a direct packet from the transport's goroutine: it opens it and
// queues its payload for the receiver, once per payload (its copies are counted and
// dropped). It never blocks.
func (g *Gossip) handleDirect(pkt []byte) {
	payload, err := g.codec.open(pkt)
	if err != nil {
		g.m.directReceived.WithLabelValues("invalid").Inc()
		g.log.Debug().Err(err).Int("bytes", len(pkt)).Msg("gossip: invalid direct packet dropped")
		return
	}
	if s, ok := payloadSender(payload); !ok || s == g.cfg.NodeName {
		g.m.directReceived.WithLabelValues("invalid").Inc()
		return
	}
	if g.dedup.has(payload) {
		g.m.directReceived.WithLabelValues("duplicate").Inc()
		return
	}
	select {
	case g.recvq <- payload:
		g.dedup.add(payload)
		g.m.directReceived.WithLabelValues("new").Inc()
	default:
		g.m.eventsDropped.WithLabelValues("recv_queue_full").Inc()
	}
}

// writeDirect sends a direct packet to one member, under memberlist (no label header: the
// label is in the packet's additional data). Only after Start.
func (g *Gossip) writeDirect(pkt []byte, to memberlist.Address) error {
	g.mu.Lock()
	tr := g.tr
	g.mu.Unlock()
	_, err := tr.NodeAwareTransport.WriteToAddress(pkt, to)
	return err
}

// directPeers are the members a direct batch goes to: every one memberlist considers
// alive or suspect, but this entry.
func (g *Gossip) directPeers() []memberlist.Address {
	ms := g.serf().Memberlist().Members()
	out := make([]memberlist.Address, 0, len(ms))
	for _, n := range ms {
		if n.Name != g.cfg.NodeName {
			out = append(out, memberlist.Address{Addr: n.Address(), Name: n.Name})
		}
	}
	return out
}

func (g *Gossip) serfConfig(mc *memberlist.Config) *serf.Config {
	sc := serf.DefaultConfig()
	sc.NodeName = g.cfg.NodeName
	sc.Tags = maps.Clone(g.cfg.Tags)
	sc.MemberlistConfig = mc
	sc.UserEventSizeLimit = g.cfg.EventSizeLimit
	sc.MaxQueueDepth = g.cfg.MaxQueueDepth
	sc.SnapshotPath = "" // no disk: a restarted entry rejoins through Join/JoinDNS
	if g.cfg.LeavePropagateDelay > 0 {
		sc.LeavePropagateDelay = g.cfg.LeavePropagateDelay
	}
	// Member events are delivered as they happen: nothing here batches them.
	sc.CoalescePeriod, sc.QuiescentPeriod = 0, 0
	sc.UserCoalescePeriod, sc.UserQuiescentPeriod = 0, 0
	return sc
}

// Start binds memberlist's listeners and the RPC listener, creates serf through its agent
// (so that its IPC serves `serf members`), and starts the publisher, the receiver, the
// joiner and the members watcher. It returns once listening; joining retries in the
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
	mc, err := g.memberlistConfig()
	if err != nil {
		return err
	}
	tr, err := g.transport(mc)
	if err != nil {
		return fmt.Errorf("gossip: start: %w", err)
	}
	mc.Transport = tr
	lw := logWriter{g.log}
	ac := agent.DefaultConfig()
	ac.NodeName = g.cfg.NodeName
	ac.Tags = maps.Clone(g.cfg.Tags)
	ac.EnableCompression = false
	a, err := agent.Create(ac, g.serfConfig(mc), lw)
	if err != nil {
		_ = tr.Shutdown()
		return fmt.Errorf("gossip: start: %w", err)
	}
	a.RegisterEventHandler(eventHandler{g})
	if err := a.Start(); err != nil {
		_ = tr.Shutdown() // memberlist may not have taken it over
		return fmt.Errorf("gossip: start: %w", err)
	}
	var ipc *agent.AgentIPC
	if g.cfg.RPCAddr != "" {
		ln, err := net.Listen("tcp", g.cfg.RPCAddr)
		if err != nil {
			_ = a.Shutdown()
			return fmt.Errorf("gossip: start: --rpc-addr: %w", err)
		}
		g.rpcAddr = ln.Addr()
		ipc = agent.NewAgentIPC(a, g.cfg.RPCAuth, ln, lw, agent.NewLogWriter(256), false)
	}
	g.started, g.agent, g.ipc, g.tr = true, a, ipc, tr

	runCtx, cancel := context.WithCancel(context.Background())
	joinCtx, joinStop := context.WithCancel(runCtx)
	g.cancel, g.joinStop = cancel, joinStop
	g.pub = newPublisher(g.cfg, g.sendEvent, g.queueDepth, g.m, g.log)
	if !g.cfg.SerfHomes {
		g.pub.direct = &directSender{codec: g.codec, peers: g.directPeers, copies: g.cfg.DirectCopies,
			every: g.cfg.DirectCopyInterval, m: g.m,
			write: func(pkt []byte, to memberlist.Address) { _, _ = tr.NodeAwareTransport.WriteToAddress(pkt, to) }}
	}
	recv := &receiver{table: g.cfg.Table, v: g.v, dec: newDecoder(), m: g.m, log: g.log, now: time.Now}
	g.wg.Add(4)
	go func() { defer g.wg.Done(); g.pub.run(runCtx) }()
	go func() { defer g.wg.Done(); recv.run(runCtx, g.recvq) }()
	go func() { defer g.wg.Done(); g.joiner(joinCtx) }()
	go func() { defer g.wg.Done(); g.watchMembers(runCtx) }()
	g.log.Info().Str("addr", g.addrLocked()).Str("rpc", g.cfg.RPCAddr).Bool("encrypted", len(g.cfg.Key) > 0).
		Msg("gossip: started")
	return nil
}

func (g *Gossip) sendEvent(payload []byte) error {
	return g.serf().UserEvent(EventName, payload, false)
}

// queueDepth is serf's user event queue depth: the events (ours and relayed) still to be
// retransmitted. serf drops the oldest beyond MaxQueueDepth. -1 if unknown.
func (g *Gossip) queueDepth() int {
	n, err := strconv.Atoi(g.serf().Stats()["event_queue"])
	if err != nil {
		return -1
	}
	return n
}

// serf returns the running serf; only called after Start succeeded.
func (g *Gossip) serf() *serf.Serf {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.agent.Serf()
}

// watchMembers keeps the members gauge and Joined current: on every member event, and every
// second (state changes serf reports no event for, such as a reap).
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
	for _, m := range g.serf().Members() {
		st := m.Status.String()
		counts[st]++
		if m.Status == serf.StatusAlive && m.Name != g.cfg.NodeName {
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
		g.leaveDone = make(chan struct{})
		g.joinStop()
		a, done := g.agent, g.leaveDone
		go func() { // ends within serf's bounded leave, whoever waits
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
// first): it stops the RPC listener, serf and memberlist, and waits for its goroutines. What
// is still pending publication is dropped (repair carries it). Safe to call twice.
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
	if g.ipc != nil {
		g.ipc.Shutdown()
	}
	a, leaveDone := g.agent, g.leaveDone
	g.mu.Unlock()
	if leaveDone != nil {
		<-leaveDone // a leave in progress ends within serf's bounds; shutting down under it races
	}
	err := a.Shutdown()
	g.wg.Wait()
	if err != nil {
		return fmt.Errorf("gossip: close: %w", err)
	}
	return nil
}

// Members returns every member serf knows, this entry included: alive, leaving, left (until
// reaped) and failed.
func (g *Gossip) Members() []Member {
	s := g.serfOrNil()
	if s == nil {
		return nil
	}
	ms := s.Members()
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, Member{Name: m.Name, Addr: memberAddr(m), State: m.Status.String(), Tags: m.Tags})
	}
	return out
}

// Peers returns the alive members other than this entry.
func (g *Gossip) Peers() []PeerMember {
	s := g.serfOrNil()
	if s == nil {
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
// included), for SyncConfig.MemberAddr.
func (g *Gossip) MemberAddr(node string) (netip.Addr, bool) {
	s := g.serfOrNil()
	if s == nil {
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

// Joined reports whether another member has been seen alive since Start.
func (g *Gossip) Joined() bool { return g.joined.Load() }

// Addr is this entry's memberlist address (ip:port, the advertised one), "" before Start.
func (g *Gossip) Addr() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.addrLocked()
}

func (g *Gossip) addrLocked() string {
	if g.agent == nil || g.agent.Serf() == nil {
		return ""
	}
	n := g.agent.Serf().Memberlist().LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// RPCAddr is the serf RPC listener's address, nil before Start or without RPCAddr.
func (g *Gossip) RPCAddr() net.Addr {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rpcAddr
}

// bindPort is the port memberlist listens on (BindAddr's, or the one picked for port 0).
func (g *Gossip) bindPort() int {
	_, p, _ := splitHostPort(g.cfg.BindAddr)
	if p != 0 {
		return p
	}
	s := g.serfOrNil()
	if s == nil {
		return 0
	}
	return int(s.Memberlist().LocalNode().Port)
}

func (g *Gossip) serfOrNil() *serf.Serf {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.agent == nil {
		return nil
	}
	return g.agent.Serf()
}
