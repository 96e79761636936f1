package memnet

import (
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// Five serf nodes on one Network agree on membership and all receive a
// user event sent by one of them.
func TestSerfUserEvent(t *testing.T) {
	nw := New(1)
	nw.SetLatency(time.Millisecond, 20*time.Millisecond)
	const n = 5
	var (
		nodes []*serf.Serf
		names []string
		mu    sync.Mutex
		got   = map[string]string{} // node -> payload of event "hello"
		wg    sync.WaitGroup
		quit  = make(chan struct{})
	)
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		conf := serf.DefaultConfig()
		conf.NodeName = name
		conf.LogOutput = io.Discard
		conf.MemberlistConfig = fastConfig(name, nw.NewTransport(name), 200*time.Millisecond)
		events := make(chan serf.Event, 64)
		conf.EventCh = events
		s, err := serf.Create(conf)
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		// serf sends to EventCh holding its event lock: drain it promptly.
		wg.Go(func() {
			for {
				select {
				case e := <-events:
					if ue, ok := e.(serf.UserEvent); ok && ue.Name == "hello" {
						mu.Lock()
						got[name] = string(ue.Payload)
						mu.Unlock()
					}
				case <-quit:
					return
				}
			}
		})
		nodes = append(nodes, s)
		names = append(names, name)
	}
	t.Cleanup(func() {
		for _, s := range nodes {
			_ = s.Shutdown()
		}
		// serf never closes EventCh, and may still send to it (into
		// its buffer) while shutting down: stop draining by quit.
		close(quit)
		wg.Wait()
	})
	seed, _ := nw.Addr("s0")
	for _, s := range nodes[1:] {
		if _, err := s.Join([]string{seed}, false); err != nil {
			t.Fatalf("join: %v", err)
		}
	}
	testutil.Eventually(t, 10*time.Second, "all see 5 alive", func() bool {
		for _, s := range nodes {
			alive := 0
			for _, m := range s.Members() {
				if m.Status == serf.StatusAlive {
					alive++
				}
			}
			if alive != n {
				return false
			}
		}
		return true
	})

	if err := nodes[2].UserEvent("hello", []byte("from s2"), false); err != nil {
		t.Fatal(err)
	}
	d := testutil.Eventually(t, 10*time.Second, "all got the event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, name := range names {
			if got[name] != "from s2" {
				return false
			}
		}
		return true
	})
	t.Logf("event reached all %d nodes in %v; %+v", n, d, nw.Stats())
}
