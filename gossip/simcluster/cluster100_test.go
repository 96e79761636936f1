//go:build gossip100

package simcluster

// 100 entries in one process: run with
//
//	go test -tags gossip100 -run 100 -v ./gossip/simcluster
//
// (a few seconds; with -race several times that on 2 cores).

import (
	"testing"
	"time"
)

func TestHomeReachesAll100(t *testing.T) {
	// Production timing (gossip's defaults), memnet latency 10-150 ms and 1 % loss.
	c, err := New(Options{Nodes: 100, MinLatency: 10 * time.Millisecond, MaxLatency: 150 * time.Millisecond, Loss: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	begin := time.Now()
	if err := c.WaitMembers(within(t, 90*time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Logf("100 entries see each other alive %v after start", time.Since(begin).Round(time.Millisecond))
	want := map[string]string{"acme": "sin", "globex": "iad", "initech": "ams"}
	begin = time.Now()
	c.Learn(42, "acme", "sin")
	c.Learn(0, "globex", "iad")
	c.Learn(99, "initech", "ams")
	if err := c.WaitHomes(within(t, 10*time.Second), want); err != nil {
		t.Fatal(err)
	}
	t.Logf("3 homes reached 100 entries in %v", time.Since(begin).Round(time.Millisecond))
}
