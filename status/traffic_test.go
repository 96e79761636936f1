package status

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec/fenec-entry/gossip"
	"github.com/fenec/fenec-entry/homes"
)

// trafficCounters are the gossip counters, as package gossip registers them.
type trafficCountersForTest struct {
	sent, recv, directSent, invalid prometheus.Counter
	direct, dropped                 *prometheus.CounterVec
}

func trafficRegistry() (*prometheus.Registry, trafficCountersForTest) {
	reg := prometheus.NewRegistry()
	c := trafficCountersForTest{
		sent:       prometheus.NewCounter(prometheus.CounterOpts{Name: "fenec_entry_gossip_events_sent_total", Help: "h"}),
		recv:       prometheus.NewCounter(prometheus.CounterOpts{Name: "fenec_entry_gossip_events_received_total", Help: "h"}),
		directSent: prometheus.NewCounter(prometheus.CounterOpts{Name: "fenec_entry_gossip_direct_packets_sent_total", Help: "h"}),
		invalid:    prometheus.NewCounter(prometheus.CounterOpts{Name: "fenec_entry_gossip_events_invalid_total", Help: "h"}),
		direct: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fenec_entry_gossip_direct_packets_received_total", Help: "h"},
			[]string{"result"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fenec_entry_gossip_events_dropped_total", Help: "h"},
			[]string{"reason"}),
	}
	reg.MustRegister(c.sent, c.recv, c.directSent, c.invalid, c.direct, c.dropped)
	return reg, c
}

// TestTrafficCountersExist pins that every counter the status page sums is one package
// gossip registers (a renamed metric would silently read 0).
func TestTrafficCountersExist(t *testing.T) {
	reg := prometheus.NewRegistry()
	table, _ := homes.New(homes.Config{Regions: []string{"eu"}, Origin: "n"})
	gc := gossip.DefaultConfig()
	gc.NodeName, gc.Insecure, gc.Table, gc.Regions, gc.Registerer = "n", true, table, []string{"eu"}, reg
	if _, err := gossip.New(gc); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	for name := range trafficCounters {
		if !have[name] {
			t.Errorf("the status page sums %s, which gossip does not register", name)
		}
	}
}

func TestTrafficRates(t *testing.T) {
	reg, c := trafficRegistry()
	start := time.Unix(1_800_000_000, 0)
	var tr Traffic

	// Just after the start: totals, no rates.
	c.sent.Add(1)
	if g := tr.Rates(reg, start.Add(500*time.Millisecond), start); g.WindowSeconds != 0 || g.Sent != 1 {
		t.Errorf("at 0.5 s: %+v, want no window and 1 sent", g)
	}
	// Since the start, when every counter was 0: serf events and direct packets both count.
	c.sent.Add(4)
	c.directSent.Add(5)
	c.recv.Add(5)
	c.direct.WithLabelValues("new").Add(15)
	c.direct.WithLabelValues("duplicate").Add(30)
	c.direct.WithLabelValues("invalid").Add(1)
	c.invalid.Add(1)
	c.dropped.WithLabelValues("send").Add(1)
	c.dropped.WithLabelValues("recv_queue_full").Add(1)
	c.dropped.WithLabelValues("direct_write").Add(1)
	g := tr.Rates(reg, start.Add(10*time.Second), start)
	if g.WindowSeconds != 10 || g.SentPerSec != 1 || g.ReceivedPerSec != 2 || g.DuplicatesPerSec != 3 ||
		g.DroppedPerSec != 0.5 || g.Dropped != 5 || g.Received != 20 || g.Duplicates != 30 {
		t.Errorf("at 10 s: %+v", g)
	}
	// Looked at every 5 s for two minutes, 1 event sent a second: the window is the last minute.
	now := start.Add(10 * time.Second)
	for range 24 {
		now = now.Add(5 * time.Second)
		c.sent.Add(5)
		g = tr.Rates(reg, now, start)
	}
	if g.WindowSeconds != 60 || g.SentPerSec != 1 || g.ReceivedPerSec != 0 || g.DroppedPerSec != 0 {
		t.Errorf("after two minutes of looks: %+v, want 1 sent/s over 60 s", g)
	}
	// A pause of ten minutes: the rate is over the pause, since the last look.
	c.sent.Add(60)
	g = tr.Rates(reg, now.Add(10*time.Minute), start)
	if g.WindowSeconds != 600 || g.SentPerSec != 0.1 {
		t.Errorf("after a pause: %+v, want 0.1 sent/s over 600 s", g)
	}
	// Not started: totals only.
	if g := new(Traffic).Rates(reg, now, time.Time{}); g.WindowSeconds != 0 || g.Sent != 190 {
		t.Errorf("not started: %+v", g)
	}
}

// A relay's acks are messages too: sent and received count, an ack not sent and a packet
// given up on for a receiver are dropped.
func TestTrafficCountsAcks(t *testing.T) {
	reg := prometheus.NewRegistry()
	sent := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fenec_entry_gossip_acks_sent_total", Help: "h"}, []string{"result"})
	recv := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fenec_entry_gossip_acks_received_total", Help: "h"}, []string{"result"})
	gaveUp := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fenec_entry_gossip_acked_given_up_total", Help: "h"}, []string{"reason"})
	reg.MustRegister(sent, recv, gaveUp)
	sent.WithLabelValues("sent").Add(10)
	sent.WithLabelValues("queue_full").Add(2)
	recv.WithLabelValues("matched").Add(7)
	recv.WithLabelValues("late").Add(1)
	gaveUp.WithLabelValues("tries").Add(3)
	g := new(Traffic).Rates(reg, time.Unix(1_800_000_000, 0), time.Time{})
	if g.Sent != 10 || g.Received != 8 || g.Dropped != 5 {
		t.Errorf("acks: %+v, want 10 sent, 8 received, 5 dropped", g)
	}
}
