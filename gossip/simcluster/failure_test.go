package simcluster

import (
	"fmt"
	"testing"
	"time"
)

// TestKilledEntryListedFailedWithin10s pins docs/REFERENCE.md, "Cluster and operations": a killed
// (or frozen) entry is listed failed by every peer within 10 s, and no live one is listed failed
// meanwhile. It runs gossip's production failure detector (not FastTiming) on links of 10-150 ms
// with 1 % loss. With the WAN suspicion settings of before (ProbeInterval 2 s, SuspicionMult 6)
// this took ~15 s at 3 entries.
func TestKilledEntryListedFailedWithin10s(t *testing.T) {
	c := start(t, Options{Nodes: 3, Seed: 3, MinLatency: 10 * time.Millisecond, MaxLatency: 150 * time.Millisecond, Loss: 0.01})
	const victim = 2
	name := c.Entry(victim).Name
	c.Kill(victim)
	killed := time.Now()
	var liveFailed string // the first live entry some peer listed failed
	err := poll(within(t, 10*time.Second), name+" listed failed by every peer", func() string {
		missing := ""
		for i := range c.Len() {
			if i == victim {
				continue
			}
			e := c.Entry(i)
			state := "absent"
			for _, m := range e.Gossip.Members() {
				switch {
				case m.Name == name:
					state = m.State
				case m.State == "failed" && liveFailed == "":
					liveFailed = fmt.Sprintf("%s listed live %s failed", e.Name, m.Name)
				}
			}
			if state != "failed" && missing == "" {
				missing = fmt.Sprintf("%s lists %s %s", e.Name, name, state)
			}
		}
		return missing
	})
	if err != nil {
		t.Fatalf("%v after %v; the reference wants every peer to list a killed entry failed within 10 s",
			err, time.Since(killed).Round(time.Millisecond))
	}
	t.Logf("every peer listed %s failed %v after the kill", name, time.Since(killed).Round(time.Millisecond))
	if liveFailed != "" {
		t.Error(liveFailed)
	}
}
