package node

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/proxy"
)

// newRegistry returns the entry's Prometheus registry with the Go and process collectors,
// the proxy's metrics (returned, for proxy.Config.Metrics), the home table's and the node's
// own. No metric has a per-tenant label: regions are at most MaxRegions.
func (n *Node) newRegistry() (*prometheus.Registry, *proxy.Metrics) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&homesCollector{t: n.homes, capacity: n.cfg.Homes},
	)
	pm := proxy.NewMetrics(reg)
	n.adminRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fenec_entry_admin_refused_total",
		Help: "Changes asked of the admin listener (POST /reload) and refused: not from loopback and without --admin-token.",
	})
	reg.MustRegister(n.adminRefused)
	n.upgrades = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fenec_entry_upgrades_total",
		Help: "Upgrades in place (SIGUSR2) of this process and of the processes before it on these sockets, by result: ready (the new process serves and the old one drains; shown by the new one) or failed (the new binary did not start or become ready within 30 s: the old one keeps serving).",
	}, []string{"result"})
	reg.MustRegister(n.upgrades)
	// Both series from the start, and what the processes before this one counted: the process
	// an upgrade started shows it (the old one no longer answers once it drains).
	var ready, failed int
	if n.cfg.Upgrades != nil {
		ready, failed = n.cfg.Upgrades.Inherited()
	}
	n.upgrades.WithLabelValues("ready").Add(float64(ready))
	n.upgrades.WithLabelValues("failed").Add(float64(failed))

	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_entry_build_info",
		Help: "Always 1; the labels say which build runs.",
		ConstLabels: prometheus.Labels{
			"version": n.version(), "goversion": runtime.Version(),
			"pop": n.cfg.Pop, "continent": n.cfg.Continent,
		},
	}, func() float64 { return 1 }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_entry_ready",
		Help: "1 while /readyz answers 200, else 0.",
	}, func() float64 { return b2f(n.isReady()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_entry_draining",
		Help: "1 from the start of a drain (SIGTERM) on, else 0.",
	}, func() float64 { return b2f(n.draining.Load()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_entry_procs",
		Help: "Ps (GOMAXPROCS) the entry runs on now: with GOMAXPROCS unset they follow the load, from 1 up to fenec_entry_procs_max.",
	}, func() float64 { return float64(runtime.GOMAXPROCS(0)) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_entry_procs_max",
		Help: "The most Ps the entry runs on: Go's default at start (the CPUs it may use), or GOMAXPROCS when set.",
	}, func() float64 {
		if n.procs != nil {
			return float64(n.procs.Max())
		}
		return float64(runtime.GOMAXPROCS(0))
	}))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "fenec_entry_procs_changes_total",
		Help: "Changes of the Ps to follow the load (each stops the world briefly); at most one each 200 ms.",
	}, func() float64 {
		if n.procs != nil {
			return float64(n.procs.Changes())
		}
		return 0
	}))
	if n.certs != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_entry_tls_cert_not_after_seconds",
			Help: "Expiry of the --tls-cert certificate in use, Unix seconds.",
		}, func() float64 { return float64(n.certs.NotAfter().Unix()) }))
	}
	return reg, pm
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// homesCollector exports the home table's Stats, read once per scrape, and each region's
// mark. Safe for concurrent scrapes (Table.Stats and Table.Marked are).
type homesCollector struct {
	t        *homes.Table
	capacity int
}

var (
	descHomes = prometheus.NewDesc("fenec_entry_homes",
		"Homes held, by source: local (heard from a router here) or gossip (told by a peer).", []string{"source"}, nil)
	descHomesCapacity = prometheus.NewDesc("fenec_entry_homes_capacity",
		"Most homes held (--homes); beyond it the first heard is forgotten first.", nil, nil)
	descEvicted = prometheus.NewDesc("fenec_entry_homes_evicted_total",
		"Homes forgotten to make room for new ones.", nil, nil)
	descFeedDropped = prometheus.NewDesc("fenec_entry_homes_feed_dropped_total",
		"Home and mark changes not gossiped because the change feed was full.", nil, nil)
	descUnknownRegion = prometheus.NewDesc("fenec_entry_homes_unknown_region_total",
		"Homes or marks, heard or told, naming a region that is not configured (ignored).", nil, nil)
	descRegionRemoved = prometheus.NewDesc("fenec_entry_homes_region_removed_total",
		"Homes forgotten because a reload removed their region.", nil, nil)
	descMarkedRegions = prometheus.NewDesc("fenec_entry_marked_regions",
		"Regions failing: their latest failure is newer than their latest clear.", nil, nil)
	descRegionMarked = prometheus.NewDesc("fenec_entry_region_marked",
		"1 while the region is failing (its latest failure is newer than its latest clear): plain writes ask it last until one of its routers answers.", []string{"region"}, nil)
	descRegionMarkedReads = prometheus.NewDesc("fenec_entry_region_marked_for_reads",
		"1 while the region is failing and its latest failure is younger than --read-backoff: reads and keyed writes ask it last too.", []string{"region"}, nil)
)

func (c *homesCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHomes, descHomesCapacity, descEvicted, descFeedDropped,
		descUnknownRegion, descRegionRemoved, descMarkedRegions, descRegionMarked, descRegionMarkedReads} {
		ch <- d
	}
}

func (c *homesCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.t.Stats()
	ch <- prometheus.MustNewConstMetric(descHomes, prometheus.GaugeValue, float64(st.Local), "local")
	ch <- prometheus.MustNewConstMetric(descHomes, prometheus.GaugeValue, float64(st.Gossip), "gossip")
	ch <- prometheus.MustNewConstMetric(descHomesCapacity, prometheus.GaugeValue, float64(c.capacity))
	ch <- prometheus.MustNewConstMetric(descEvicted, prometheus.CounterValue, float64(st.Evicted))
	ch <- prometheus.MustNewConstMetric(descFeedDropped, prometheus.CounterValue, float64(st.FeedDropped))
	ch <- prometheus.MustNewConstMetric(descUnknownRegion, prometheus.CounterValue, float64(st.UnknownRegion))
	ch <- prometheus.MustNewConstMetric(descRegionRemoved, prometheus.CounterValue, float64(st.RegionRemoved))
	ch <- prometheus.MustNewConstMetric(descMarkedRegions, prometheus.GaugeValue, float64(st.Marked))
	for i, name := range c.t.Regions() {
		if name == "" {
			continue // removed by a reload
		}
		ch <- prometheus.MustNewConstMetric(descRegionMarked, prometheus.GaugeValue, b2f(c.t.Marked(i, homes.Strict)), name)
		ch <- prometheus.MustNewConstMetric(descRegionMarkedReads, prometheus.GaugeValue, b2f(c.t.Marked(i, homes.Lenient)), name)
	}
}
