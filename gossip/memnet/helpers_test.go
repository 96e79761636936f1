package memnet

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// fastConfig is memberlist's LAN config tuned so that a test cluster
// converges, and detects failures, within seconds. probe is the probe
// interval; the probe timeout is half of it, so keep it above twice the
// network's largest one-way latency.
func fastConfig(name string, tr *Transport, probe time.Duration) *memberlist.Config {
	c := memberlist.DefaultLANConfig()
	c.Name = name
	c.Transport = tr
	c.LogOutput = io.Discard
	c.GossipInterval = 20 * time.Millisecond
	c.ProbeInterval = probe
	c.ProbeTimeout = probe / 2
	c.PushPullInterval = 2 * time.Second
	c.SuspicionMult = 2
	c.TCPTimeout = time.Second
	c.GossipToTheDeadTime = 2 * time.Second
	// A node cut off by a partition fails every probe; memberlist then
	// stretches its probe interval up to this many times (default 8), which
	// makes a partition test take a dozen seconds.
	c.AwarenessMaxMultiplier = 2
	return c
}

// cluster is n memberlist nodes on one Network, named n0..n{n-1}.
type cluster struct {
	net   *Network
	names []string
	ms    []*memberlist.Memberlist
}

// startCluster creates n nodes and joins each to n0. Cleanup shuts them down.
func startCluster(t testing.TB, nw *Network, n int, probe time.Duration) *cluster {
	t.Helper()
	c := &cluster{net: nw}
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		m, err := memberlist.Create(fastConfig(name, nw.NewTransport(name), probe))
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		t.Cleanup(func() { _ = m.Shutdown() })
		c.names = append(c.names, name)
		c.ms = append(c.ms, m)
	}
	seed, _ := nw.Addr("n0")
	for i, m := range c.ms[1:] {
		if _, err := m.Join([]string{seed}); err != nil {
			t.Fatalf("join n%d: %v", i+1, err)
		}
	}
	return c
}

// aliveSet returns the names m sees alive.
func aliveSet(m *memberlist.Memberlist) map[string]bool {
	s := make(map[string]bool)
	for _, node := range m.Members() {
		if node.State == memberlist.StateAlive {
			s[node.Name] = true
		}
	}
	return s
}

// allSeeAlive reports whether every node of ms sees exactly want alive.
func allSeeAlive(ms []*memberlist.Memberlist, want []string) bool {
	for _, m := range ms {
		s := aliveSet(m)
		if len(s) != len(want) {
			return false
		}
		for _, name := range want {
			if !s[name] {
				return false
			}
		}
	}
	return true
}
