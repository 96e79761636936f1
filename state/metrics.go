package state

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Store's Prometheus series. One Metrics per registry; nil-safe to build
// with a nil Registerer (then nothing is exported).
type Metrics struct {
	writes        *prometheus.CounterVec
	writeSeconds  prometheus.Histogram
	writeBytes    prometheus.Gauge
	writtenHomes  prometheus.Gauge
	lastWrite     prometheus.Gauge
	restoreResult *prometheus.GaugeVec
	restoredHomes *prometheus.GaugeVec
	skipped       *prometheus.GaugeVec
}

var restoreResults = []string{"none", "restored", "damaged", "foreign", "unreadable"}

// NewMetrics registers the state series with reg (if not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_state_writes_total",
			Help: "Writes of the home table to --state-dir, by result (ok, error); at most one every 5 s, only when the table changed, and one at the drain.",
		}, []string{"result"}),
		writeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fenec_entry_state_write_seconds",
			Help:    "Time a write of the home table took (stream, fsync, rename).",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		writeBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fenec_entry_state_write_bytes",
			Help: "Size of the last home table file written.",
		}),
		writtenHomes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fenec_entry_state_written_homes",
			Help: "Homes in the last home table file written (at most --homes).",
		}),
		lastWrite: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fenec_entry_state_last_write_timestamp_seconds",
			Help: "When the home table was last written, Unix seconds; 0 if not since the start.",
		}),
		restoreResult: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fenec_entry_state_restore",
			Help: "1 for what the start found in --state-dir: none (no file), restored, damaged or foreign (moved aside, started empty), unreadable.",
		}, []string{"result"}),
		restoredHomes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fenec_entry_state_restored_homes",
			Help: "Homes put back from --state-dir at the start, by source (local: heard by this entry, gossip: told by peers).",
		}, []string{"source"}),
		skipped: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fenec_entry_state_restore_skipped_homes",
			Help: "Homes of the state file not put back at the start, by reason: unknown_region (no longer configured), invalid, not_newer.",
		}, []string{"reason"}),
	}
	for _, r := range []string{"ok", "error"} {
		m.writes.WithLabelValues(r)
	}
	for _, r := range restoreResults {
		m.restoreResult.WithLabelValues(r)
	}
	for _, r := range skipReasons {
		m.skipped.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.writes, m.writeSeconds, m.writeBytes, m.writtenHomes, m.lastWrite,
			m.restoreResult, m.restoredHomes, m.skipped)
	}
	return m
}

func (m *Metrics) wrote(err error, took time.Duration, homes int, size int64, now time.Time) {
	if err != nil {
		m.writes.WithLabelValues("error").Inc()
		return
	}
	m.writes.WithLabelValues("ok").Inc()
	m.writeSeconds.Observe(took.Seconds())
	m.writeBytes.Set(float64(size))
	m.writtenHomes.Set(float64(homes))
	m.lastWrite.Set(float64(now.UnixMilli()) / 1000)
}

func (m *Metrics) restored(r Restored) {
	for _, res := range restoreResults {
		v := 0.0
		if res == r.Result {
			v = 1
		}
		m.restoreResult.WithLabelValues(res).Set(v)
	}
	m.restoredHomes.WithLabelValues("local").Set(float64(r.Local))
	m.restoredHomes.WithLabelValues("gossip").Set(float64(r.Gossip))
	for i, k := range r.Skipped {
		m.skipped.WithLabelValues(skipReasons[i]).Set(float64(k))
	}
}
