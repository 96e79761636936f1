package gossip

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/homes"
)

// validConfig is DefaultConfig with the fields that have no default filled.
func validConfig(t *testing.T) Config {
	t.Helper()
	table, err := homes.New(homes.Config{Regions: testRegions, Origin: "n"})
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.NodeName, c.Insecure, c.Table, c.Regions = "n", true, table, testRegions
	return c
}

// DefaultConfig holds a value for every setting: with the caller's fields filled it passes
// Validate, and the address and port defaults agree.
func TestDefaultConfig(t *testing.T) {
	if err := validConfig(t).Validate(); err != nil {
		t.Fatalf("DefaultConfig with the caller's fields: %v", err)
	}
	d := DefaultConfig()
	if DefaultBindAddr != ":"+strconv.Itoa(DefaultBindPort) || d.BindAddr != DefaultBindAddr {
		t.Errorf("DefaultBindAddr %q, DefaultBindPort %d, DefaultConfig().BindAddr %q", DefaultBindAddr, DefaultBindPort, d.BindAddr)
	}
}

// Validate names the field it refuses, its part's name first, wrapped around ErrConfig; a
// setting left at its zero value is refused, not defaulted.
func TestValidateNamesTheField(t *testing.T) {
	for field, mod := range map[string]func(*Config){
		"--node":                               func(c *Config) { c.NodeName = "" },
		"--gossip-key: required":               func(c *Config) { c.Insecure = false },
		"--gossip-key: 10 bytes":               func(c *Config) { c.Key = clusterKey[:10] },
		"Table":                                func(c *Config) { c.Table = nil },
		"Regions":                              func(c *Config) { c.Regions = nil },
		"--gossip-bind":                        func(c *Config) { c.BindAddr = "nope" },
		"--join":                               func(c *Config) { c.Join = []string{"host"} },
		"--gossip-advertise":                   func(c *Config) { c.AdvertiseAddr = "1.2.3.4" },
		"Spread.QueueLow":                      func(c *Config) { c.Spread.QueueLow, c.Spread.QueueHigh = 10, 5 },
		"Spread.RelayAckTimeout":               func(c *Config) { c.Spread.RelayAckTimeout = -1 },
		"Membership.SuspicionMult":             func(c *Config) { c.Membership.SuspicionMult = -1 },
		"--gossip-bind: missing port":          func(c *Config) { c.BindAddr = "" },
		"JoinInterval":                         func(c *Config) { c.JoinInterval = 0 },
		"Capacity":                             func(c *Config) { c.Capacity = 0 },
		"BindWait":                             func(c *Config) { c.BindWait = -time.Second },
		"Membership.ProbeTimeout":              func(c *Config) { c.Membership.ProbeTimeout = 0 },
		"Membership.MaxQueueDepth":             func(c *Config) { c.Membership.MaxQueueDepth = 0 },
		"Membership.LeavePropagateDelay":       func(c *Config) { c.Membership.LeavePropagateDelay = -1 },
		"Spread.FlushInterval":                 func(c *Config) { c.Spread.FlushInterval = 0 },
		"Spread.EventSizeLimit: 1300; at most": func(c *Config) { c.Spread.EventSizeLimit = 1300 },
		"Sync.RepairInterval":                  func(c *Config) { c.Sync.RepairInterval = 0 },
	} {
		c := validConfig(t)
		mod(&c)
		err := c.Validate()
		if !errors.Is(err, ErrConfig) || !strings.HasPrefix(strings.TrimPrefix(err.Error(), ErrConfig.Error()+": "), field) {
			t.Errorf("%s: %v, want ErrConfig naming it", field, err)
		}
	}
	// Zero is a value where it means one: no reclaim, no delay, no wait.
	c := validConfig(t)
	c.Membership.DeadNodeReclaimTime, c.Membership.LeavePropagateDelay, c.BindWait = 0, 0, 0
	if err := c.Validate(); err != nil {
		t.Errorf("zero reclaim, delay and wait: %v", err)
	}
}

// memberlist and serf get Config.Membership and the event size as they are.
func TestMembershipReachesMemberlistAndSerf(t *testing.T) {
	c := validConfig(t)
	c.BindAddr = "127.0.0.1:0"
	m := &c.Membership
	m.UDPBufferSize, m.GossipInterval, m.GossipNodes, m.RetransmitMult = 1300, 70*time.Millisecond, 5, 3
	m.ProbeInterval, m.ProbeTimeout, m.SuspicionMult = 900*time.Millisecond, 300*time.Millisecond, 5
	m.PushPullInterval, m.TCPTimeout, m.DeadNodeReclaimTime = 40*time.Second, 7*time.Second, 11*time.Second
	m.MaxQueueDepth, m.LeavePropagateDelay = 333, 250*time.Millisecond
	c.Spread.EventSizeLimit = 900
	g := &Gossip{cfg: c}
	mc, err := g.memberlistConfigLocked()
	if err != nil {
		t.Fatal(err)
	}
	got := Membership{UDPBufferSize: mc.UDPBufferSize, GossipInterval: mc.GossipInterval, GossipNodes: mc.GossipNodes,
		RetransmitMult: mc.RetransmitMult, ProbeInterval: mc.ProbeInterval, ProbeTimeout: mc.ProbeTimeout,
		SuspicionMult: mc.SuspicionMult, PushPullInterval: mc.PushPullInterval, TCPTimeout: mc.TCPTimeout,
		DeadNodeReclaimTime: mc.DeadNodeReclaimTime}
	sc := g.serfConfig(mc, "")
	got.MaxQueueDepth, got.LeavePropagateDelay = sc.MaxQueueDepth, sc.LeavePropagateDelay
	if got != *m {
		t.Errorf("memberlist and serf got %+v, want %+v", got, *m)
	}
	if sc.UserEventSizeLimit != 900 || mc.Label != c.Label {
		t.Errorf("serf's UserEventSizeLimit %d, memberlist's label %q; want 900, %q", sc.UserEventSizeLimit, mc.Label, c.Label)
	}
}
