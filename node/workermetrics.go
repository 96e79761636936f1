package node

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/procfs"
	"google.golang.org/protobuf/proto"
)

// With --workers, the master's /metrics is its own registry plus the workers' (the requests,
// attempts, router connections and client-side counters live in the workers), summed where a
// family's name and a metric's labels agree: the entry's totals, as one process would count
// them. A worker that exited leaves its counters and histograms as its last report had them
// (gauges go with it), so that the entry's counters do not go back when a worker is started
// again; what it counted after that report is lost (at most workerReportEvery).

// gatherer is what /metrics serves: the registry alone without workers.
func (n *Node) gatherer() prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		fams, err := n.reg.Gather()
		s := n.workers.Load()
		if s == nil {
			return fams, err
		}
		for _, r := range s.reports(context.Background()) {
			if r != nil {
				fams = mergeFamilies(fams, decodeFamilies(r.Metrics), false)
			}
		}
		s.retiredMu.Lock()
		fams = mergeFamilies(fams, s.retired, false)
		s.retiredMu.Unlock()
		return fams, err
	})
}

// retire keeps the cumulative metrics of a worker's last report.
func (s *workerSet) retire(r *wireReport) {
	if r == nil {
		return
	}
	fams := decodeFamilies(r.Metrics)
	s.retiredMu.Lock()
	s.retired = mergeFamilies(s.retired, fams, true)
	s.retiredMu.Unlock()
}

// decodeFamilies reads families written by workerReport, up to the end or the first it
// cannot read.
func decodeFamilies(b []byte) []*dto.MetricFamily {
	dec := expfmt.NewDecoder(bytes.NewReader(b), expfmt.NewFormat(expfmt.TypeProtoDelim))
	var out []*dto.MetricFamily
	for {
		f := new(dto.MetricFamily)
		if dec.Decode(f) != nil {
			return out
		}
		out = append(out, f)
	}
}

// mergeFamilies adds add's metrics into dst's (dst is changed and returned, sorted by name):
// a metric whose family and labels dst has is summed into it, any other is copied in. With
// cumulative, only counters, histograms and summaries are taken (a retired worker's gauges
// are gone with it).
func mergeFamilies(dst, add []*dto.MetricFamily, cumulative bool) []*dto.MetricFamily {
	byName := make(map[string]*dto.MetricFamily, len(dst))
	for _, f := range dst {
		byName[f.GetName()] = f
	}
	for _, f := range add {
		t := f.GetType()
		if cumulative && t != dto.MetricType_COUNTER && t != dto.MetricType_HISTOGRAM && t != dto.MetricType_SUMMARY {
			continue
		}
		have, ok := byName[f.GetName()]
		if !ok {
			have = &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type, Unit: f.Unit}
			byName[f.GetName()] = have
			dst = append(dst, have)
		}
		if have.GetType() != t {
			continue // not the same metric: left out rather than summed wrong
		}
		for _, m := range f.Metric {
			if i := slices.IndexFunc(have.Metric, func(h *dto.Metric) bool { return sameLabels(h.Label, m.Label) }); i >= 0 {
				addMetric(have.Metric[i], m, t)
			} else {
				have.Metric = append(have.Metric, proto.Clone(m).(*dto.Metric))
			}
		}
	}
	slices.SortFunc(dst, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return dst
}

func sameLabels(a, b []*dto.LabelPair) bool {
	return slices.EqualFunc(a, b, func(x, y *dto.LabelPair) bool { return x.GetName() == y.GetName() && x.GetValue() == y.GetValue() })
}

// addMetric adds m's value into into's, both of type t.
func addMetric(into, m *dto.Metric, t dto.MetricType) {
	switch t {
	case dto.MetricType_COUNTER:
		if into.Counter != nil && m.Counter != nil {
			into.Counter.Value = proto.Float64(into.Counter.GetValue() + m.Counter.GetValue())
		}
	case dto.MetricType_GAUGE:
		if into.Gauge != nil && m.Gauge != nil {
			into.Gauge.Value = proto.Float64(into.Gauge.GetValue() + m.Gauge.GetValue())
		}
	case dto.MetricType_UNTYPED:
		if into.Untyped != nil && m.Untyped != nil {
			into.Untyped.Value = proto.Float64(into.Untyped.GetValue() + m.Untyped.GetValue())
		}
	case dto.MetricType_HISTOGRAM:
		h, a := into.Histogram, m.Histogram
		if h == nil || a == nil || len(h.Bucket) != len(a.Bucket) {
			return
		}
		for i := range h.Bucket {
			if h.Bucket[i].GetUpperBound() != a.Bucket[i].GetUpperBound() {
				return
			}
		}
		for i := range h.Bucket {
			h.Bucket[i].CumulativeCount = proto.Uint64(h.Bucket[i].GetCumulativeCount() + a.Bucket[i].GetCumulativeCount())
		}
		h.SampleCount = proto.Uint64(h.GetSampleCount() + a.GetSampleCount())
		h.SampleSum = proto.Float64(h.GetSampleSum() + a.GetSampleSum())
	case dto.MetricType_SUMMARY:
		s, a := into.Summary, m.Summary
		if s == nil || a == nil {
			return
		}
		s.SampleCount = proto.Uint64(s.GetSampleCount() + a.GetSampleCount())
		s.SampleSum = proto.Float64(s.GetSampleSum() + a.GetSampleSum())
		s.Quantile = nil // quantiles of parts do not add up to the whole's
	}
}

// workerProcs reports each worker slot's CPU time and resident memory, read by the master from
// /proc: process_cpu_seconds_total and process_resident_memory_bytes are the master's own, and
// summed the workers' Go runtime figures would mean nothing. A slot's CPU counter keeps the
// CPU of the processes that exited in it, so it never goes back; its memory is the process
// running now, 0 while none does.
type workerProcs struct {
	n        *Node
	cpu, rss *prometheus.Desc
}

func (c workerProcs) Describe(ch chan<- *prometheus.Desc) { ch <- c.cpu; ch <- c.rss }

func (c workerProcs) Collect(ch chan<- prometheus.Metric) {
	s := c.n.workers.Load()
	if s == nil {
		return
	}
	for _, p := range s.procs {
		cpu, rss := p.usage()
		slot := strconv.Itoa(p.idx)
		ch <- prometheus.MustNewConstMetric(c.cpu, prometheus.CounterValue, cpu.Seconds(), slot)
		ch <- prometheus.MustNewConstMetric(c.rss, prometheus.GaugeValue, float64(rss), slot)
	}
}

// usage reads the slot's process from /proc (outside p.mu: a scrape does not hold up the
// slot's writer) and returns the slot's CPU time and the process's resident memory. A
// reading that fails (the process exiting) leaves the last one.
func (p *workerProc) usage() (time.Duration, int64) {
	p.mu.Lock()
	cmd, reaping := p.cmd, p.reaping
	p.mu.Unlock()
	var cpu time.Duration
	var rss int64
	read := false
	if cmd != nil && !reaping && cmd.Process != nil {
		if pr, err := procfs.NewProc(cmd.Process.Pid); err == nil {
			if st, err := pr.Stat(); err == nil {
				cpu = time.Duration(st.CPUTime() * float64(time.Second))
				rss, read = int64(st.ResidentMemory()), true
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if read && p.cmd == cmd && !p.reaping { // still the same process, not yet waited for
		p.lastCPU, p.lastRSS = max(p.lastCPU, cpu), rss
	}
	return p.exitedCPU + p.lastCPU, p.lastRSS
}

// registerWorkerMetrics registers the master's metrics of its workers.
func (n *Node) registerWorkerMetrics(reg *prometheus.Registry) {
	reg.MustRegister(workerProcs{n: n,
		cpu: prometheus.NewDesc("fenec_entry_worker_cpu_seconds_total",
			"CPU time (user and system) of the worker processes (--workers) by slot, the exited ones' included; process_cpu_seconds_total is the master's.",
			[]string{"worker"}, nil),
		rss: prometheus.NewDesc("fenec_entry_worker_resident_memory_bytes",
			"Resident memory of the worker process running in each slot (--workers), 0 while none runs; process_resident_memory_bytes is the master's.",
			[]string{"worker"}, nil),
	})
	count := func(serving bool) float64 {
		s := n.workers.Load()
		if s == nil {
			return 0
		}
		c := 0
		for _, p := range s.procs {
			if p.serving.Load() == serving {
				c++
			}
		}
		return float64(c)
	}
	for _, st := range []struct {
		state   string
		serving bool
	}{{"serving", true}, {"down", false}} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "fenec_entry_workers",
			Help:        "Worker processes (--workers) by state: serving, or down (starting, or started again after an exit).",
			ConstLabels: prometheus.Labels{"state": st.state},
		}, func() float64 { return count(st.serving) }))
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "fenec_entry_worker_restarts_total",
		Help: "Worker processes started again after one exited or was stopped (100 ms after, doubling to 5 s while they keep exiting).",
	}, func() float64 {
		if s := n.workers.Load(); s != nil {
			return float64(s.restarts.Load())
		}
		return 0
	}))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "fenec_entry_worker_table_resyncs_total",
		Help: "Times a worker was sent the whole home table again because more than 65536 changes waited for it.",
	}, func() float64 {
		if s := n.workers.Load(); s != nil {
			return float64(s.resyncs.Load())
		}
		return 0
	}))
}
