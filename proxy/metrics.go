package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec/fenec-entry/door"
)

// Metrics are the request path's Prometheus metrics. No metric has a
// per-tenant label. Build with NewMetrics and pass in Config.Metrics; a
// region's children are resolved once, by the first routing that configures
// it, so a request does no label lookups.
type Metrics struct {
	Requests         *prometheus.CounterVec   // by outcome
	HomeLookups      *prometheus.CounterVec   // by result: local, gossip, miss
	Relays           prometheus.Counter       // answers whose Fenec-Home named another region than the one asked
	Attempts         *prometheus.CounterVec   // by region and class (an attempt's outcome)
	UpstreamSeconds  *prometheus.HistogramVec // time to an answer head, by region
	UnknownHome      prometheus.Counter       // Fenec-Home naming a region not configured
	BodiesStreamed   prometheus.Counter       // request bodies longer than --body-buffer, streamed to one router
	BodiesSqueezed   prometheus.Counter       // bodies short enough to keep, streamed because MaxBufferedBytes was spent
	reg              prometheus.Registerer
	IdleConnsDropped prometheus.Counter     // connections closed because the idle pool of their router was full
	Probes           prometheus.Counter     // Probe's connects (latency) and requests (reach)
	Refused          *prometheus.CounterVec // requests the door refused, by reason (door.Reason's label)
	UnderscoreDrops  prometheus.Counter     // client headers whose name holds "_", left out of the router's request
}

// NewMetrics creates the metrics and registers them with reg (if non-nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_requests_total", Help: "Client requests by outcome.",
		}, []string{"outcome"}),
		HomeLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_home_lookups_total", Help: "Home table lookups by result (local, gossip, miss).",
		}, []string{"result"}),
		Relays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_relays_total", Help: "Answers relayed by a router of another region than the tenant's home.",
		}),
		Attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_attempts_total", Help: "Attempts at routers by region and outcome class.",
		}, []string{"region", "class"}),
		UpstreamSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fenec_entry_upstream_seconds",
			Help:    "Time from sending a request to a router to its answer head, by region.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 35},
		}, []string{"region"}),
		UnknownHome: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_unknown_home_total", Help: "Fenec-Home answers naming a region that is not configured (ignored).",
		}),
		BodiesStreamed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_bodies_streamed_total", Help: "Request bodies longer than --body-buffer, streamed to one router.",
		}),
		BodiesSqueezed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_bodies_squeezed_total",
			Help: "Request bodies within --body-buffer streamed to one router because the memory budget for kept bodies was spent.",
		}),
		IdleConnsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_idle_conns_dropped_total", Help: "Router connections closed because their idle pool was full.",
		}),
		Probes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_latency_probes_total",
			Help: "Probes, failed ones too: TCP connects to a router of a region no request reached within 30 s (latency), and HEAD requests to a router of a region this entry cannot reach.",
		}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_refused_total",
			Help: "Requests refused at the door before any router was asked, by reason (a malformed head or body, a method not served, a limit).",
		}, []string{"reason"}),
		UnderscoreDrops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_underscore_headers_dropped_total",
			Help: "Client request headers whose name holds an underscore, left out of the request to the router (as nginx does).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.Requests, m.HomeLookups, m.Relays, m.Attempts, m.UpstreamSeconds,
			m.UnknownHome, m.BodiesStreamed, m.BodiesSqueezed, m.IdleConnsDropped, m.Probes,
			m.Refused, m.UnderscoreDrops)
	}
	m.reg = reg
	return m
}

// gauges exports the handler's own counters, read at scrape time so that a request updates
// a plain atomic and nothing more: requests in flight and body bytes held.
func (m *Metrics) gauges(h *Handler) {
	if m == nil || m.reg == nil {
		return
	}
	m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_entry_body_buffer_bytes",
		Help: "Request body bytes held in memory for retries (bounded by the body budget).",
	}, func() float64 { return float64(h.budget.used.Load()) }))
	m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_entry_inflight_requests",
		Help: "Requests in flight (bounded by --max-inflight).",
	}, func() float64 { return float64(h.inflight.Load()) }))
	m.reg.Register(reachCollector{h})
}

// Request outcomes, the label values of fenec_entry_requests_total.
const (
	resAnswer            = "answer"
	resMayHaveRun        = codeMayHaveRun
	resNoRegionReachable = codeNoRegionReachable
	resBadPath           = codeBadPath
	resLengthRequired    = codeLengthRequired
	resOverloaded        = codeOverloaded
	resPreflight         = "preflight"
	resHealth            = "health"
	resCanceled          = "canceled"
	resAborted           = "aborted"
	resServerOptions     = "server_options" // OPTIONS *, answered by the entry
)

var resultNames = []string{resAnswer, resMayHaveRun, resNoRegionReachable, resBadPath, resLengthRequired,
	resOverloaded, resPreflight, resHealth, resCanceled, resAborted, resServerOptions,
	door.CodeBadRequest, door.CodeNotImplemented, door.CodeMethodNotAllowed, door.CodeURITooLong, door.CodeHeadersTooLarge}

// boundMetrics holds the children resolved once, so that a request does no label lookup;
// the per-region ones live in each regionState.
type boundMetrics struct {
	requests map[string]prometheus.Counter
	lookup   [3]prometheus.Counter // local, gossip, miss
	refused  map[door.Reason]prometheus.Counter
	m        *Metrics
}

func bindMetrics(m *Metrics) *boundMetrics {
	if m == nil {
		m = NewMetrics(nil)
	}
	b := &boundMetrics{m: m, requests: map[string]prometheus.Counter{}}
	for _, r := range resultNames {
		b.requests[r] = m.Requests.WithLabelValues(r)
	}
	for i, name := range []string{"local", "gossip", "miss"} {
		b.lookup[i] = m.HomeLookups.WithLabelValues(name)
	}
	b.refused = map[door.Reason]prometheus.Counter{}
	for _, r := range door.Reasons() {
		b.refused[r] = m.Refused.WithLabelValues(r.Label())
	}
	return b
}

// attemptsFor returns region's attempt counters, by outcome.
func (b *boundMetrics) attemptsFor(region string) []prometheus.Counter {
	row := make([]prometheus.Counter, len(outcomeNames))
	for o, name := range outcomeNames {
		row[o] = b.m.Attempts.WithLabelValues(region, name)
	}
	return row
}
