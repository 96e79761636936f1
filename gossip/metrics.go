package gossip

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec/fenec-entry/gossip/internal/mux"
)

// metrics are the membership's metrics (spread and the table count their own). None has a
// per-tenant label.
type metrics struct {
	members        *prometheus.GaugeVec   // state
	up             prometheus.GaugeFunc   // serf running and a member
	otherRelay     prometheus.GaugeFunc   // alive members of another relay version
	restarts       prometheus.Counter     // fresh serfs started after serf shut itself down
	streamsRefused *prometheus.CounterVec // reason: sorting, backlog
	bytes          []prometheus.Collector // fenec_entry_gossip_bytes_total, by transport and direction
	keyMismatches  prometheus.Counter     // keyReport's
}

// memberStates are the label values of fenec_entry_gossip_members.
var memberStates = []string{"alive", "leaving", "left", "failed"}

// newMetrics makes the metrics; up is what fenec_entry_gossip_up reads at each scrape,
// otherRelay what fenec_entry_gossip_relay_other_members does, wire what
// fenec_entry_gossip_bytes_total does.
func newMetrics(reg prometheus.Registerer, up func() bool, otherRelay func() int, wire *mux.Bytes, keyMismatches prometheus.Counter) (*metrics, error) {
	m := &metrics{
		keyMismatches: keyMismatches,
		otherRelay: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_entry_gossip_relay_other_members",
			Help: "Alive members that do not speak this entry's relay protocol (tag relay): while any does, the whole fleet sends homes straight, never through relays (a rolling upgrade across a relay change).",
		}, func() float64 { return float64(otherRelay()) }),
		up: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_entry_gossip_up",
			Help: "1 while serf runs and this entry is a member; 0 before it started, after it left, and while it is shut down (a lost node name conflict) and being started again.",
		}, func() float64 {
			if up() {
				return 1
			}
			return 0
		}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_restarts_total", Help: "Fresh serfs started after serf shut itself down (a lost node name conflict).",
		}),
		streamsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_streams_refused_total",
			Help: "Streams to the gossip port closed unread: sorting (too many waiting for their first byte), backlog (too many table or repair requests waiting).",
		}, []string{"reason"}),
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fenec_entry_gossip_members", Help: "Gossip cluster members by state (alive, leaving, left, failed), this entry included.",
		}, []string{"state"}),
	}
	for _, c := range []struct {
		transport, dir string
		n              *atomic.Uint64
	}{
		{"packet", "sent", &wire.PacketSent}, {"packet", "received", &wire.PacketReceived},
		{"stream", "sent", &wire.StreamSent}, {"stream", "received", &wire.StreamReceived},
	} {
		m.bytes = append(m.bytes, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_bytes_total",
			Help: "Bytes through the gossip address, by transport (packet: UDP, everything memberlist, serf and the homes send; " +
				"stream: TCP, push/pull, joins and the table's sync) and direction (sent, received), as sealed; IP, UDP and TCP headers not counted.",
			ConstLabels: prometheus.Labels{"transport": c.transport, "dir": c.dir},
		}, func() float64 { return float64(c.n.Load()) }))
	}
	for _, s := range memberStates {
		m.members.WithLabelValues(s)
	}
	m.streamsRefused.WithLabelValues("sorting")
	m.streamsRefused.WithLabelValues("backlog")
	if reg == nil {
		return m, nil
	}
	for _, c := range append([]prometheus.Collector{m.members, m.up, m.otherRelay, m.restarts, m.streamsRefused, m.keyMismatches}, m.bytes...) {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("gossip: register metrics: %w", err)
		}
	}
	return m, nil
}
