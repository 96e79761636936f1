package gossip

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the membership's metrics (spread and the table count their own). None has a
// per-tenant label.
type metrics struct {
	members        *prometheus.GaugeVec   // state
	up             prometheus.GaugeFunc   // serf running and a member
	restarts       prometheus.Counter     // fresh serfs started after serf shut itself down
	streamsRefused *prometheus.CounterVec // reason: sorting, backlog
}

// memberStates are the label values of fenec_entry_gossip_members.
var memberStates = []string{"alive", "leaving", "left", "failed"}

// newMetrics makes the metrics; up is what fenec_entry_gossip_up reads at each scrape.
func newMetrics(reg prometheus.Registerer, up func() bool) (*metrics, error) {
	m := &metrics{
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
	for _, s := range memberStates {
		m.members.WithLabelValues(s)
	}
	m.streamsRefused.WithLabelValues("sorting")
	m.streamsRefused.WithLabelValues("backlog")
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.members, m.up, m.restarts, m.streamsRefused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("gossip: register metrics: %w", err)
		}
	}
	return m, nil
}
