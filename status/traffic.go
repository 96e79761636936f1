package status

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// GossipTraffic is the recent gossip traffic of this entry, per second over about the last
// minute and in all since the start. A message is a serf user event (marks and clears), a
// direct packet (a batch of homes, one copy to one member) or a relay's ack: all count.
type GossipTraffic struct {
	// WindowSeconds is how long the rates are averaged over: about a minute while the
	// status is looked at every few seconds, longer after a pause (since the last look
	// before the pause), shorter just after the start. 0: too short to tell, no rates.
	WindowSeconds    float64 `json:"window_seconds"`
	SentPerSec       float64 `json:"sent_per_sec"`
	ReceivedPerSec   float64 `json:"received_per_sec"`
	DuplicatesPerSec float64 `json:"duplicates_per_sec"`
	DroppedPerSec    float64 `json:"dropped_per_sec"`
	// Sent: events handed to serf and direct packets written. Received: events from peers
	// and new direct packets. Duplicates: direct packets whose payload was applied already
	// (the copies that guard against loss). Dropped: every reason, sending or receiving (a
	// full queue, a packet the transport refused, one that did not open or decode).
	Sent       uint64 `json:"sent"`
	Received   uint64 `json:"received"`
	Duplicates uint64 `json:"duplicates"`
	Dropped    uint64 `json:"dropped"`
}

// The gossip counters the rates come from (package gossip registers them on the node's
// registry), and which total each adds to.
var trafficCounters = map[string]func(s *trafficSample, result string) *float64{
	"fenec_entry_gossip_events_sent_total":         func(s *trafficSample, _ string) *float64 { return &s.sent },
	"fenec_entry_gossip_direct_packets_sent_total": func(s *trafficSample, _ string) *float64 { return &s.sent },
	"fenec_entry_gossip_events_received_total":     func(s *trafficSample, _ string) *float64 { return &s.received },
	"fenec_entry_gossip_events_dropped_total":      func(s *trafficSample, _ string) *float64 { return &s.dropped },
	"fenec_entry_gossip_events_invalid_total":      func(s *trafficSample, _ string) *float64 { return &s.dropped },
	// Relays' acks (gossip/internal/spread/acked.go): an ack sent or received is a message; one not
	// sent, or a packet given up on for a receiver, is dropped.
	"fenec_entry_gossip_acks_sent_total": func(s *trafficSample, result string) *float64 {
		if result == "sent" {
			return &s.sent
		}
		return &s.dropped
	},
	"fenec_entry_gossip_acks_received_total":  func(s *trafficSample, _ string) *float64 { return &s.received },
	"fenec_entry_gossip_acked_given_up_total": func(s *trafficSample, _ string) *float64 { return &s.dropped },
	"fenec_entry_gossip_direct_packets_received_total": func(s *trafficSample, result string) *float64 {
		switch result {
		case "new":
			return &s.received
		case "duplicate":
			return &s.duplicates
		}
		return &s.dropped // invalid
	},
}

const (
	trafficWindow = time.Minute     // the rates' window
	trafficEvery  = 5 * time.Second // at most one sample kept per this long
	trafficKeep   = 16              // samples kept: trafficKeep*trafficEvery > trafficWindow
	trafficMin    = time.Second     // a shorter window gives no rates
)

// trafficSample is the gossip counters at one time.
type trafficSample struct {
	at                                  time.Time
	sent, received, duplicates, dropped float64
}

// Traffic turns the gossip counters into rates. There is no sampling goroutine: each
// Status reads the counters once (Gather of the node's registry, the cost of one /metrics
// scrape) and keeps that sample if the newest kept is trafficEvery old. The rates compare
// the fresh sample with the oldest kept within trafficWindow, or, when none is, the newest
// kept before it; the start, when every counter was 0, is the first sample. The zero value
// is ready; safe for concurrent use.
type Traffic struct {
	mu      sync.Mutex // guards the following fields
	samples [trafficKeep]trafficSample
	n       int // samples kept, at most trafficKeep
	next    int // where the next one goes
}

// Rates reads the counters from g and returns the traffic as of now, for an entry started at
// started (zero: not started, no rates).
func (t *Traffic) Rates(g prometheus.Gatherer, now, started time.Time) *GossipTraffic {
	cur := gatherTraffic(g, now)
	out := &GossipTraffic{Sent: uint64(cur.sent), Received: uint64(cur.received),
		Duplicates: uint64(cur.duplicates), Dropped: uint64(cur.dropped)}
	if started.IsZero() {
		return out
	}
	t.mu.Lock()
	base := t.baselineLocked(now, trafficSample{at: started})
	t.addLocked(cur)
	t.mu.Unlock()

	d := cur.at.Sub(base.at)
	if d < trafficMin {
		return out
	}
	sec := d.Seconds()
	out.WindowSeconds = sec
	out.SentPerSec = nonNegative(cur.sent-base.sent) / sec
	out.ReceivedPerSec = nonNegative(cur.received-base.received) / sec
	out.DuplicatesPerSec = nonNegative(cur.duplicates-base.duplicates) / sec
	out.DroppedPerSec = nonNegative(cur.dropped-base.dropped) / sec
	return out
}

// baselineLocked returns the sample to compare one taken at now with: the oldest within
// trafficWindow, else the newest before it; start is older than every kept sample.
func (t *Traffic) baselineLocked(now time.Time, start trafficSample) trafficSample {
	from := now.Add(-trafficWindow)
	base := start
	if !start.at.Before(from) {
		return start
	}
	for i := range t.n {
		s := t.samples[(t.next-t.n+i+trafficKeep)%trafficKeep] // oldest first
		if !s.at.Before(from) {
			return s
		}
		base = s
	}
	return base
}

func (t *Traffic) addLocked(s trafficSample) {
	if t.n > 0 && s.at.Sub(t.samples[(t.next-1+trafficKeep)%trafficKeep].at) < trafficEvery {
		return
	}
	t.samples[t.next] = s
	t.next = (t.next + 1) % trafficKeep
	t.n = min(t.n+1, trafficKeep)
}

// gatherTraffic reads the gossip counters from g (trafficCounters), summing over their
// labels. A counter g does not have reads 0; a Gather error leaves what was gathered.
func gatherTraffic(g prometheus.Gatherer, now time.Time) trafficSample {
	s := trafficSample{at: now}
	mfs, _ := g.Gather()
	for _, mf := range mfs {
		dst, ok := trafficCounters[mf.GetName()]
		if !ok {
			continue
		}
		for _, m := range mf.GetMetric() {
			result := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					result = l.GetValue()
				}
			}
			*dst(&s, result) += m.GetCounter().GetValue()
		}
	}
	return s
}

// nonNegative guards the rates against a counter that went back (it never should).
func nonNegative(f float64) float64 { return max(f, 0) }
