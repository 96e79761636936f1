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
	"github.com/fenec/fenec-entry/gossip/internal/tablesync"
	"github.com/fenec/fenec-entry/gossip/internal/validate"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/clock"
)

// Config configures a Gossip. Start from DefaultConfig, which fills every setting that has a
// default; the fields without one (NodeName, Key or Insecure, Table, Regions, and the
// optional Join, JoinDNS, Tags, RPCAddr, SnapshotPath, Logger, Registerer, Transport) are the
// caller's. New uses the Config as it is, after Validate.
type Config struct {
	// NodeName is this entry's serf node name (--node). Required, at most 128 bytes.
	NodeName string

	// BindAddr (DefaultBindAddr) is host:port for memberlist's UDP and TCP listeners
	// (--gossip-bind). Port 0 picks a free port (tests); Addr reports it.
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

	// Label ("fenec-entry") is memberlist's cluster label, checked on every packet and
	// stream, and sealed into every direct packet: clusters with different labels ignore each
	// other. "": no label, as memberlist's.
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
	// ahead", nonce expiry, and what is due when: flushes, direct copies and acked resends,
	// the send budgets and the relay rule, the joiner's settle rounds, the repair round after
	// a fetch, the member lists' age, the restart backoff's reset. Timers only wake the loops
	// that then read the clock, so a test that moves it moves what is due. Socket deadlines,
	// the waits between attempts, and the table streams' pacers (which time this process's
	// own work) run on real time. Nil: the system clock. It should be the Table's clock.
	Clock clock.Clock

	// Registerer gets the gossip metrics; nil means none are registered (they still count).
	Registerer prometheus.Registerer

	// Transport replaces memberlist's UDP/TCP transport (tests inject an in-process one);
	// nil means memberlist's net transport on BindAddr.
	Transport memberlist.NodeAwareTransport

	// LookupIP resolves a host name for Join and JoinDNS; nil means net.DefaultResolver
	// (A and AAAA). Tests inject one.
	LookupIP func(ctx context.Context, host string) ([]net.IP, error)

	// JoinInterval (5 s) is how often the joiner resolves Join and JoinDNS and joins the
	// addresses that are not alive members (first join, restarts, healed partitions): a
	// restarted peer is found again within it, for a DNS lookup and a join attempt each time.
	JoinInterval time.Duration

	// Capacity (homes.DefaultCapacity) is the table's capacity (--homes): a peer's stream
	// may carry at most twice as many records.
	Capacity int

	// Membership is memberlist's and serf's tuning: failure detection, gossip's fan-out and
	// the queues.
	Membership Membership

	// Spread is the batching and spreading of homes and marks (package spread's Config
	// gives each field's default, reason and cost).
	Spread spread.Config

	// Sync is the joiner's table and anti-entropy repair (package tablesync's Config gives
	// each field's default, reason and cost).
	Sync tablesync.Config
}

// Membership is serf's and memberlist's tuning. The values start from memberlist's WAN
// profile (entries sit in PoPs on several continents) and are tuned as each comment says.
type Membership struct {
	// UDPBufferSize (1,372 B) is memberlist's largest UDP packet. WireGuard on Fly's 6PN has
	// an MTU of 1420; less 40 B of IPv6 header and 8 B of UDP header leaves 1,372 B.
	// memberlist's 1,400 would fragment every full gossip packet on 6PN.
	UDPBufferSize int

	// GossipInterval (100 ms; WAN 500 ms) and GossipNodes (4, as WAN): a node sends at most
	// GossipNodes packets per GossipInterval, 40 packets (~52 KB) a second at these values.
	// The WAN 500 ms costs a round of hops half a second, too slow for 3 s convergence over
	// several hops at 100 entries; 100 ms is the value serf's limits (GOSSIP-NOTES) were
	// measured with.
	GossipInterval time.Duration
	GossipNodes    int

	// RetransmitMult (4, as WAN): every node sends each broadcast (membership changes, serf
	// user events) RetransmitMult x ceil(log10(N+1)) times. serf's queues and memberlist's
	// copy this one value: it cannot differ between membership and events. 3 loses 0.4-1.2 %
	// of events at some entry; 2 breaks membership at 100 entries (bench/gossipsim/README.md).
	RetransmitMult int

	// ProbeInterval (800 ms; WAN 5 s), ProbeTimeout (400 ms; WAN 3 s) and SuspicionMult (3;
	// WAN 6) are memberlist's failure detector, chosen so that a killed or frozen entry is
	// listed failed by every peer within 10 s (docs/REFERENCE.md, Cluster and operations) on
	// links of 10-150 ms one way. How memberlist spends that time (state.go probeNode,
	// suspectNode):
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
	// In all ~2 intervals + the suspicion timeout + the gossip of the news (docs/BENCHMARKS.md
	// "Gossip: convergence and failure detection": about 4 s at 10 entries, 6.6 s at 100).
	//
	// Cost: each entry sends 1.25 pings a second and acks as many, plus 3 indirect requests
	// when a direct ack is lost (~2 % of probes at 1 % loss); idle, 3.3 packets/s per entry
	// against 1.5 with WAN-derived 2 s / 1 s / 6. Nacks from the indirect peers come after 2 x
	// ProbeTimeout + 2 legs, past the interval, so memberlist's self-awareness counts each
	// failed probe as 3 missed nacks. Failure detection does not route requests (marks do).
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	SuspicionMult int

	// PushPullInterval (30 s; WAN 60 s): a full state exchange with one random node, the
	// backstop that heals membership after lost gossip. 30 s (the LAN value) is cheap at the
	// cluster sizes here (a PoP each); memberlist stretches it with log2 N.
	PushPullInterval time.Duration

	// TCPTimeout (10 s; WAN 30 s): joins and push/pull over 6PN get an answer in well under a
	// second or not at all; 10 s bounds how long a dead join target holds the joiner (and
	// Close, which waits for it).
	TCPTimeout time.Duration

	// DeadNodeReclaimTime (30 s; memberlist: never, 0) lets an entry restarted with the same
	// name on a new address (a Fly machine moved to another host) take its name back once the
	// old incarnation has been dead this long, instead of being refused as a conflict.
	DeadNodeReclaimTime time.Duration

	// MaxQueueDepth (4,096) is serf's MaxQueueDepth: the events serf keeps queued before it
	// silently drops the oldest (checked every 30 s). Events are at most Spread.EventSizeLimit,
	// so the queue holds at most ~4 MB.
	MaxQueueDepth int

	// LeavePropagateDelay (1 s, serf's) is how long Leave stays up after its leave message
	// went out, so that peers probing it learn it left rather than failed.
	LeavePropagateDelay time.Duration
}

// Defaults that the command line shows (--gossip-bind) and reads (the node name's port rule).
const (
	DefaultBindPort = 7946    // memberlist's usual port, UDP and TCP
	DefaultBindAddr = ":7946" // --gossip-bind: every interface, DefaultBindPort
)

// DefaultConfig returns a Config with every setting at its default, as memberlist's
// DefaultLANConfig does: each field's comment gives its value, its reason and its cost. The
// fields without a default are left for the caller (see Config).
func DefaultConfig() Config {
	return Config{
		BindAddr:     DefaultBindAddr,
		Label:        "fenec-entry",
		JoinInterval: 5 * time.Second,
		Capacity:     homes.DefaultCapacity,
		Membership: Membership{
			UDPBufferSize:       1372,
			GossipInterval:      100 * time.Millisecond,
			GossipNodes:         4,
			RetransmitMult:      4,
			ProbeInterval:       800 * time.Millisecond,
			ProbeTimeout:        400 * time.Millisecond,
			SuspicionMult:       3,
			PushPullInterval:    30 * time.Second,
			TCPTimeout:          10 * time.Second,
			DeadNodeReclaimTime: 30 * time.Second,
			MaxQueueDepth:       4096,
			LeavePropagateDelay: time.Second,
		},
		Spread: spread.DefaultConfig(),
		Sync:   tablesync.DefaultConfig(),
	}
}

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
	if _, _, err := splitHostPort(c.BindAddr); err != nil {
		return bad("--gossip-bind: %v", err)
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
	switch {
	case c.JoinInterval <= 0:
		return bad("JoinInterval: %v; need more than 0", c.JoinInterval)
	case c.BindWait < 0:
		return bad("BindWait: %v is negative", c.BindWait)
	case c.Capacity < 1:
		return bad("Capacity: %d; need at least 1", c.Capacity)
	}
	if err := c.Membership.validate(); err != nil {
		return bad("Membership.%w", err)
	}
	if err := c.Spread.Validate(); err != nil {
		return bad("Spread.%w", err)
	}
	if err := c.Sync.Validate(); err != nil {
		return bad("Sync.%w", err)
	}
	if limit := c.Membership.UDPBufferSize - 100; c.Spread.EventSizeLimit > limit {
		return bad("Spread.EventSizeLimit: %d; at most Membership.UDPBufferSize-100 (%d)", c.Spread.EventSizeLimit, limit)
	}
	return nil
}

// validate reports the first field of m out of range, by name.
func (m Membership) validate() error {
	for _, d := range []struct {
		name   string
		v      time.Duration
		zeroOK bool
	}{
		{"GossipInterval", m.GossipInterval, false}, {"ProbeInterval", m.ProbeInterval, false},
		{"ProbeTimeout", m.ProbeTimeout, false}, {"PushPullInterval", m.PushPullInterval, false},
		{"TCPTimeout", m.TCPTimeout, false}, {"DeadNodeReclaimTime", m.DeadNodeReclaimTime, true},
		{"LeavePropagateDelay", m.LeavePropagateDelay, true},
	} {
		if d.v < 0 || d.v == 0 && !d.zeroOK {
			return fmt.Errorf("%s: %v; need more than 0", d.name, d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{
		{"UDPBufferSize", m.UDPBufferSize}, {"GossipNodes", m.GossipNodes},
		{"RetransmitMult", m.RetransmitMult}, {"SuspicionMult", m.SuspicionMult},
		{"MaxQueueDepth", m.MaxQueueDepth},
	} {
		if n.v < 1 {
			return fmt.Errorf("%s: %d; need at least 1", n.name, n.v)
		}
	}
	return nil
}

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
