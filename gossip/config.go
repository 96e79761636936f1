package gossip

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/gossip/internal/spread"
	"github.com/fenec/fenec-entry/gossip/internal/validate"
	"github.com/fenec/fenec-entry/gossip/internal/wire"
	"github.com/fenec/fenec-entry/homes"
)

// Defaults of Config. The memberlist values start from memberlist.DefaultWANConfig (entries
// sit in PoPs on several continents) and are tuned as each comment says; see memberlistConfig.
const (
	DefaultBindPort = 7946          // memberlist's usual port, UDP and TCP
	DefaultBindAddr = ":7946"       // --gossip-bind: every interface, DefaultBindPort
	DefaultLabel    = "fenec-entry" // memberlist cluster label

	// DefaultEventSizeLimit is serf's UserEventSizeLimit: what an event's name and payload
	// may take, encoded (package wire gives its reason).
	DefaultEventSizeLimit = wire.DefaultEventSizeLimit

	// The batching and spreading of homes and marks: package spread, which uses them, gives
	// each value's reason and its cost.
	DefaultFlushInterval      = spread.DefaultFlushInterval
	DefaultMaxFlushInterval   = spread.DefaultMaxFlushInterval
	DefaultMaxPending         = spread.DefaultMaxPending
	DefaultMaxEventsPerFlush  = spread.DefaultMaxEventsPerFlush
	DefaultQueueHigh          = spread.DefaultQueueHigh
	DefaultQueueLow           = spread.DefaultQueueLow
	DefaultRecvQueue          = spread.DefaultRecvQueue
	DefaultDirectCopies       = spread.DefaultDirectCopies
	DefaultDirectCopyInterval = spread.DefaultDirectCopyInterval
	DefaultDirectBudget       = spread.DefaultDirectBudget
	DefaultDirectLimit        = spread.DefaultDirectLimit
	DefaultRelayFlush         = spread.DefaultRelayFlush
	DefaultRelayAckTimeout    = spread.DefaultRelayAckTimeout

	// DefaultMaxQueueDepth is serf's MaxQueueDepth: beyond it serf drops queued events
	// without telling anyone (checked every 30 s). Events are at most DefaultEventSizeLimit,
	// so the queue holds at most ~4 MB.
	DefaultMaxQueueDepth = 4096

	// DefaultJoinInterval is how often the joiner resolves Join and JoinDNS and joins the
	// addresses that are not alive members (first join, restarts, healed partitions).
	DefaultJoinInterval = 5 * time.Second

	// DefaultUDPBufferSize is memberlist's largest UDP packet. WireGuard on Fly's 6PN has an
	// MTU of 1420; less 40 B of IPv6 header and 8 B of UDP header leaves 1,372 B. memberlist's
	// 1,400 would fragment every full gossip packet on 6PN.
	DefaultUDPBufferSize = 1372

	// DefaultGossipInterval (WAN default 500 ms) and DefaultGossipNodes (WAN default 4): a node
	// sends at most GossipNodes packets per GossipInterval, 40 packets (~52 KB) a second at
	// these values. The WAN 500 ms costs a round of hops half a second, too slow for 3 s
	// convergence over several hops at 100 entries; 100 ms is the value the limits in
	// gossip's defaults were measured with.
	DefaultGossipInterval = 100 * time.Millisecond
	DefaultGossipNodes    = 4

	// DefaultRetransmitMult is memberlist's RetransmitMult (WAN default 4): every node sends
	// each broadcast (membership changes, serf user events) RetransmitMult x ceil(log10(N+1))
	// times. serf's queues and memberlist's copy this one value: it cannot differ between
	// membership and events.
	DefaultRetransmitMult = 4

	// DefaultProbeInterval (WAN default 5 s), DefaultProbeTimeout (WAN 3 s) and
	// DefaultSuspicionMult (WAN 6) are memberlist's failure detector, chosen so that a killed
	// or frozen entry is listed failed by every peer within 10 s (docs/REFERENCE.md, Cluster
	// and operations) on links of 10-150 ms one way. How memberlist spends that time
	// (state.go probeNode, suspectNode):
	//
	//   - Each entry probes one peer per ProbeInterval, round robin, so a dead entry is
	//     probed about once per ProbeInterval cluster-wide, whatever N.
	//   - A probe waits ProbeTimeout for the direct ack, then asks IndirectChecks (3) peers
	//     and tries TCP until one ProbeInterval after it began; then the prober suspects the
	//     entry. 400 ms is the longest round trip (300 ms) plus 100 ms; the 400 ms left carry
	//     most indirect probes (4 legs of 10-150 ms) and the TCP fallback.
	//   - Each member then fails it after SuspicionMult x log10(max(N, 10)) x ProbeInterval:
	//     2.4 s up to 10 entries, 4.8 s at 100, 5.2 s at 150, once one more member's failed
	//     probe confirms the suspicion (SuspicionMult-2 = 1 confirmation); until then after
	//     SuspicionMaxTimeoutMult (6) times that. So a live entry that one lagging peer
	//     accuses has 14-29 s to refute; it takes two independent failed probes to fail it
	//     fast. 4 (the LAN value) needs 2 confirmations and 6.4 s at 100 entries; 2 needs
	//     none, so one lagging prober could fail a live entry in 1.6 s.
	//
	// In all ~2 intervals + the suspicion timeout + the gossip of the news. Measured
	// (docs/BENCHMARKS.md "Failure detection": memnet, 10-150 ms, 1 % loss, 10 runs each),
	// kill to every peer listing it failed, min/median/max: 3.3/3.8/4.3 s at 3 entries,
	// 3.3/4.1/4.3 s at 10, 5.9/6.6/7.6 s at 100; with the WAN-derived 2 s / 1 s / 6 of
	// before: 15-17 s at 3 and 10, 27-30 s at 100. In 10 minutes of 20 entries (~15,000
	// probes, 314 direct acks late or lost, 4 probes answered only over TCP) no live entry
	// was suspected or listed failed.
	//
	// Cost: each entry sends 1.25 pings a second and acks as many, plus 3 indirect requests
	// when a direct ack is lost (~2 % of probes at 1 % loss); idle, 3.3 packets/s per entry
	// against 1.5 with 2 s (measured, 20 entries). Nacks from the indirect peers come after
	// 2 x ProbeTimeout + 2 legs, past the interval, so memberlist's self-awareness counts
	// each failed probe as 3 missed nacks (as it did before). Failure detection does not
	// route requests (marks do).
	DefaultProbeInterval = 800 * time.Millisecond
	DefaultProbeTimeout  = 400 * time.Millisecond
	DefaultSuspicionMult = 3

	// DefaultPushPullInterval (WAN default 60 s): a full state exchange with one random node,
	// the backstop that heals membership after lost gossip. 30 s (the LAN value) is cheap at
	// the cluster sizes here (a PoP each).
	DefaultPushPullInterval = 30 * time.Second

	// DefaultTCPTimeout (WAN default 30 s): joins and push/pull over 6PN get an answer in well
	// under a second or not at all; 10 s bounds how long a dead join target holds the joiner
	// (and Close, which waits for it).
	DefaultTCPTimeout = 10 * time.Second

	// DefaultDeadNodeReclaimTime (memberlist default: never) lets an entry restarted with the
	// same name on a new address (a Fly machine moved to another host) take its name back
	// once the old incarnation has been dead this long, instead of being refused as a
	// conflict.
	DefaultDeadNodeReclaimTime = 30 * time.Second
)

// Config configures a Gossip. Zero-valued optional fields take the defaults above.
type Config struct {
	// NodeName is this entry's serf node name (--node). Required, at most 128 bytes.
	NodeName string

	// BindAddr is host:port for memberlist's UDP and TCP listeners (--gossip-bind); "" means
	// ":7946". Port 0 picks a free port (tests); Addr reports it.
	BindAddr string

	// AdvertiseAddr is host:port peers use to reach this entry (--gossip-advertise); ""
	// means detected by memberlist (the bind address, or a private address when bound to
	// all interfaces).
	AdvertiseAddr string

	// Join are static peers, host:port. Join and JoinDNS are resolved again every
	// JoinInterval, and the addresses that are not alive members are joined, until Leave.
	Join []string

	// JoinDNS is a name resolved (A and AAAA) every JoinInterval; each address is joined at
	// this entry's gossip port. On Fly: <app>.internal.
	JoinDNS string

	// Key is the gossip key (memberlist keyring, AES-GCM), 16, 24 or 32 bytes. Required
	// unless Insecure: a node without it can neither join nor inject anything.
	Key []byte

	// Insecure allows a nil Key: gossip in clear (--insecure-gossip).
	Insecure bool

	// Label is memberlist's cluster label, checked on every packet and stream; "" means
	// DefaultLabel. Clusters with different labels ignore each other.
	Label string

	// Tags are this entry's serf tags. Role "entry" is always set; node adds pop, continent,
	// version and whatever else it needs. At most 512 bytes encoded (memberlist's meta).
	Tags map[string]string

	// RPCAddr is the listener for serf's agent IPC (--rpc-addr), so that the stock
	// `serf members -rpc-addr ...` works; "" disables it. RPCAuth, if set, is the token every
	// client must send first (`-rpc-auth`).
	RPCAddr, RPCAuth string

	// Table is the home table: its change feed is published, what peers send is applied to
	// it. Required.
	Table *homes.Table

	// SnapshotPath is serf's member snapshot file (--state-dir's serf.snapshot); "" means
	// none. With it, serf appends member changes and its clocks there (compacted once past
	// 128 KiB or 256 B a member, whichever is more), and a start rejoins the members the file
	// lists as alive, even after a graceful leave (RejoinAfterLeave), and the joiner keeps
	// trying them with Join and JoinDNS until a first peer answers: a restarted entry finds
	// its cluster when Join and JoinDNS do not answer. A file serf cannot open is moved
	// aside (state.MoveAside: SnapshotPath+".bad-" and the time, state.KeepBad kept) and serf
	// starts a fresh one; see startIncarnationLocked.
	SnapshotPath string

	// BindWait is how long binding BindAddr is tried again while the address is in use (every
	// 100 ms): the process an upgrade in place starts binds it as the one it replaces lets it
	// go. 0: once.
	BindWait time.Duration

	// Regions are the regions configured at start. Required. Homes and marks a peer sends
	// are checked against Table's regions at each moment (homes.Table.SetRegions), so a region
	// added by a reload is taken and a removed one refused from then on.
	Regions []string

	// Logger receives serf's and memberlist's logs at debug, member changes at info.
	Logger zerolog.Logger

	// Clock is the time source of every reading that decides or measures something: a
	// batch's stamp, arrival times and the propagation histogram, the validator's "too far
	// ahead", nonce expiry. Nil: the system clock. Timers (flushes, copies, probes, backoffs)
	// and socket deadlines run on real time. It should be the Table's clock.
	Clock homes.Clock

	// Registerer gets the gossip metrics; nil means none are registered (they still count).
	Registerer prometheus.Registerer

	// Transport replaces memberlist's UDP/TCP transport (tests inject an in-process one);
	// nil means memberlist's net transport on BindAddr.
	Transport memberlist.NodeAwareTransport

	// FlushInterval is how long a change waits to be batched (DefaultFlushInterval).
	// Shorter: lower latency, more and smaller events (serf's capacity is in events).
	FlushInterval time.Duration

	// MaxFlushInterval bounds the flush interval under backpressure
	// (DefaultMaxFlushInterval).
	MaxFlushInterval time.Duration

	// EventSizeLimit is serf's UserEventSizeLimit (DefaultEventSizeLimit), at most
	// DefaultUDPBufferSize-100. Larger: more homes per event, fewer events sharing a packet.
	EventSizeLimit int

	// MaxPending bounds the homes waiting to be published (DefaultMaxPending); beyond it the
	// oldest is dropped and counted. Memory: about 100 B a home.
	MaxPending int

	// MaxEventsPerFlush bounds the events one flush hands serf (DefaultMaxEventsPerFlush),
	// and the direct batches it sends.
	MaxEventsPerFlush int

	// DirectCopies is how many times a direct batch is sent to each member
	// (DefaultDirectCopies), DirectCopyInterval apart (DefaultDirectCopyInterval).
	DirectCopies       int
	DirectCopyInterval time.Duration

	// DirectBudget bounds the bytes of direct batches this entry sends to each member a
	// second (DefaultDirectBudget), with a burst of one second's worth.
	DirectBudget int

	// DirectLimit (DefaultDirectLimit; negative: relays never) and RelayFlush
	// (DefaultRelayFlush, the least a relay packs for: longer in large groups): see package
	// spread's relay.go. RelayAckTimeout (DefaultRelayAckTimeout): its acked.go.
	DirectLimit     int
	RelayFlush      time.Duration
	RelayAckTimeout time.Duration

	// QueueHigh and QueueLow are serf event queue depths that widen and narrow the flush
	// interval (DefaultQueueHigh, DefaultQueueLow). QueueLow must be below QueueHigh.
	QueueHigh, QueueLow int

	// MaxQueueDepth is serf's MaxQueueDepth (DefaultMaxQueueDepth): the events serf keeps
	// queued before it silently drops the oldest. Memory: up to EventSizeLimit each.
	MaxQueueDepth int

	// RecvQueue bounds the received events waiting to be applied (DefaultRecvQueue); beyond
	// it they are dropped and counted. Memory: up to EventSizeLimit each.
	RecvQueue int

	// JoinInterval is how often Join and JoinDNS are resolved and joined
	// (DefaultJoinInterval).
	JoinInterval time.Duration

	// LookupIP resolves a host name for Join and JoinDNS; nil means net.DefaultResolver
	// (A and AAAA). Tests inject one.
	LookupIP func(ctx context.Context, host string) ([]net.IP, error)

	// memberlist tuning; zero means the default of the same name. Tests shorten them.
	GossipInterval   time.Duration // DefaultGossipInterval
	GossipNodes      int           // DefaultGossipNodes
	RetransmitMult   int           // DefaultRetransmitMult
	ProbeInterval    time.Duration // DefaultProbeInterval
	ProbeTimeout     time.Duration // DefaultProbeTimeout
	SuspicionMult    int           // DefaultSuspicionMult
	PushPullInterval time.Duration // DefaultPushPullInterval
	TCPTimeout       time.Duration // DefaultTCPTimeout
	UDPBufferSize    int           // DefaultUDPBufferSize

	// RepairInterval is the mean time between anti-entropy rounds with a random peer
	// (DefaultRepairInterval); SyncTimeout bounds one table, digest or pull exchange
	// (DefaultSyncTimeout); MaxStreams bounds the table and pull streams served at once
	// (DefaultMaxStreams). See package tablesync's SyncConfig.
	RepairInterval, SyncTimeout time.Duration
	MaxStreams                  int

	// Capacity is the table's capacity (--homes; 0 means homes.DefaultCapacity): a peer's
	// stream may carry at most twice as many records.
	Capacity int

	// LeavePropagateDelay is how long Leave stays up after its leave message went out, so
	// that peers probing it learn it left rather than failed; 0 means serf's 1 s.
	LeavePropagateDelay time.Duration
}

// DefaultConfig returns a Config with every tunable field at its default: the Default*
// constants above, each beside its reason and its cost (the spreading ones where package
// spread defines them, the event size in package wire), as memberlist's DefaultLANConfig
// documents its own. The fields that have no default (NodeName, Table, Regions, Key or
// Insecure, Join, Tags, RPCAddr, Logger, Registerer, Transport) are left for the caller. New
// fills the zero fields of any Config the same way.
func DefaultConfig() Config { return Config{}.withDefaults() }

// ErrConfig is wrapped by every error New returns for a bad Config.
var ErrConfig = errors.New("gossip: bad config")

// Validate reports the first thing wrong with c, naming the flag or field, wrapped around
// ErrConfig. It does no I/O (names are resolved later) and does not change c.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
	}
	if c.NodeName == "" || len(c.NodeName) > validate.MaxNodeName {
		return bad("--node: need a node name of 1 to %d bytes", validate.MaxNodeName)
	}
	if c.BindAddr != "" {
		if _, _, err := splitHostPort(c.BindAddr); err != nil {
			return bad("--gossip-bind: %v", err)
		}
	}
	if c.AdvertiseAddr != "" {
		host, port, err := splitHostPort(c.AdvertiseAddr)
		if err != nil {
			return bad("--gossip-advertise: %v", err)
		}
		if host == "" || port == 0 {
			return bad("--gossip-advertise: %q: need host:port with a port", c.AdvertiseAddr)
		}
	}
	for _, j := range c.Join {
		host, port, err := splitHostPort(j)
		if err != nil || host == "" || port == 0 {
			return bad("--join: %q: need host:port", j)
		}
	}
	switch len(c.Key) {
	case 0:
		if !c.Insecure {
			return bad("--gossip-key: required unless --insecure-gossip")
		}
	case 16, 24, 32:
	default:
		return bad("--gossip-key: %d bytes; need 16, 24 or 32", len(c.Key))
	}
	if c.Table == nil {
		return bad("Table: required")
	}
	if len(c.Regions) == 0 {
		return bad("Regions: required")
	}
	for _, r := range c.Regions {
		if r == "" || len(r) > homes.MaxRegionNameLen {
			return bad("Regions: region name %q: need 1 to %d bytes", r, homes.MaxRegionNameLen)
		}
	}
	if c.RPCAddr != "" {
		if _, _, err := splitHostPort(c.RPCAddr); err != nil {
			return bad("--rpc-addr: %v", err)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"FlushInterval", c.FlushInterval}, {"MaxFlushInterval", c.MaxFlushInterval},
		{"JoinInterval", c.JoinInterval}, {"GossipInterval", c.GossipInterval},
		{"ProbeInterval", c.ProbeInterval}, {"ProbeTimeout", c.ProbeTimeout},
		{"PushPullInterval", c.PushPullInterval}, {"TCPTimeout", c.TCPTimeout},
		{"LeavePropagateDelay", c.LeavePropagateDelay}, {"DirectCopyInterval", c.DirectCopyInterval},
		{"RepairInterval", c.RepairInterval}, {"SyncTimeout", c.SyncTimeout},
		{"RelayFlush", c.RelayFlush}, {"RelayAckTimeout", c.RelayAckTimeout},
	} {
		if d.v < 0 {
			return bad("%s: %v is negative (0 means the default)", d.name, d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{
		{"EventSizeLimit", c.EventSizeLimit}, {"MaxPending", c.MaxPending},
		{"MaxEventsPerFlush", c.MaxEventsPerFlush}, {"QueueHigh", c.QueueHigh},
		{"QueueLow", c.QueueLow}, {"MaxQueueDepth", c.MaxQueueDepth},
		{"RecvQueue", c.RecvQueue}, {"GossipNodes", c.GossipNodes},
		{"RetransmitMult", c.RetransmitMult}, {"SuspicionMult", c.SuspicionMult},
		{"DirectCopies", c.DirectCopies}, {"DirectBudget", c.DirectBudget},
		{"UDPBufferSize", c.UDPBufferSize}, {"MaxStreams", c.MaxStreams}, {"Capacity", c.Capacity},
	} {
		if n.v < 0 {
			return bad("%s: %d is negative (0 means the default)", n.name, n.v)
		}
	}
	d := c.withDefaults()
	if d.MaxFlushInterval < d.FlushInterval {
		return bad("MaxFlushInterval %v is below FlushInterval %v", d.MaxFlushInterval, d.FlushInterval)
	}
	if d.EventSizeLimit < wire.MinEventSizeLimit || d.EventSizeLimit > d.UDPBufferSize-100 {
		return bad("EventSizeLimit: %d; need %d to UDPBufferSize-100 (%d)",
			d.EventSizeLimit, wire.MinEventSizeLimit, d.UDPBufferSize-100)
	}
	if d.QueueLow >= d.QueueHigh {
		return bad("QueueLow %d must be below QueueHigh %d", d.QueueLow, d.QueueHigh)
	}
	return nil
}

func (c Config) withDefaults() Config {
	def := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	defi := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	if c.BindAddr == "" {
		c.BindAddr = DefaultBindAddr
	}
	if c.Label == "" {
		c.Label = DefaultLabel
	}
	def(&c.FlushInterval, DefaultFlushInterval)
	def(&c.MaxFlushInterval, DefaultMaxFlushInterval)
	def(&c.JoinInterval, DefaultJoinInterval)
	def(&c.GossipInterval, DefaultGossipInterval)
	def(&c.ProbeInterval, DefaultProbeInterval)
	def(&c.ProbeTimeout, DefaultProbeTimeout)
	def(&c.PushPullInterval, DefaultPushPullInterval)
	def(&c.TCPTimeout, DefaultTCPTimeout)
	defi(&c.EventSizeLimit, DefaultEventSizeLimit)
	defi(&c.MaxPending, DefaultMaxPending)
	defi(&c.MaxEventsPerFlush, DefaultMaxEventsPerFlush)
	defi(&c.QueueHigh, DefaultQueueHigh)
	defi(&c.QueueLow, DefaultQueueLow)
	defi(&c.MaxQueueDepth, DefaultMaxQueueDepth)
	defi(&c.RecvQueue, DefaultRecvQueue)
	defi(&c.GossipNodes, DefaultGossipNodes)
	defi(&c.RetransmitMult, DefaultRetransmitMult)
	defi(&c.SuspicionMult, DefaultSuspicionMult)
	defi(&c.DirectCopies, DefaultDirectCopies)
	defi(&c.DirectBudget, DefaultDirectBudget)
	defi(&c.DirectLimit, DefaultDirectLimit)
	def(&c.RelayFlush, DefaultRelayFlush)
	def(&c.RelayAckTimeout, DefaultRelayAckTimeout)
	def(&c.DirectCopyInterval, DefaultDirectCopyInterval)
	defi(&c.UDPBufferSize, DefaultUDPBufferSize)
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	if c.LookupIP == nil {
		c.LookupIP = func(ctx context.Context, host string) ([]net.IP, error) {
			return net.DefaultResolver.LookupIP(ctx, "ip", host)
		}
	}
	return c
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// splitHostPort is net.SplitHostPort with a numeric port.
func splitHostPort(hp string) (string, int, error) {
	host, p, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("%q: bad port", hp)
	}
	return host, int(port), nil
}
