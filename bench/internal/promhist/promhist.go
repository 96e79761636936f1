// Package promhist reads one series of a Prometheus histogram from many places (a registry
// in this process, or /metrics scraped from a fleet of processes), adds them up, takes the
// difference of two readings and its quantiles: how bench/fleet and bench/gossipsim compare
// the same metric, fenec_entry_gossip_propagation_seconds, from real processes and from the
// simulation.
package promhist

import (
	"fmt"
	"io"
	"math"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Hist is one histogram series: cumulative counts at each upper bound (+Inf last).
type Hist struct {
	Bounds []float64
	Cum    []uint64
}

// Count is the number of observations.
func (h Hist) Count() uint64 {
	if len(h.Cum) == 0 {
		return 0
	}
	return h.Cum[len(h.Cum)-1]
}

// Add is h plus o; an empty h takes o's bounds. Bounds must match otherwise.
func (h Hist) Add(o Hist) (Hist, error) {
	if len(h.Bounds) == 0 {
		return Hist{Bounds: o.Bounds, Cum: append([]uint64(nil), o.Cum...)}, nil
	}
	if len(o.Bounds) == 0 {
		return h, nil
	}
	if len(o.Bounds) != len(h.Bounds) {
		return h, fmt.Errorf("promhist: %d buckets against %d", len(o.Bounds), len(h.Bounds))
	}
	out := Hist{Bounds: h.Bounds, Cum: make([]uint64, len(h.Cum))}
	for i := range h.Cum {
		if h.Bounds[i] != o.Bounds[i] {
			return h, fmt.Errorf("promhist: bucket %d bounds %v and %v", i, h.Bounds[i], o.Bounds[i])
		}
		out.Cum[i] = h.Cum[i] + o.Cum[i]
	}
	return out, nil
}

// Sub is h minus an earlier reading of the same series (empty: nothing before).
func (h Hist) Sub(before Hist) Hist {
	out := Hist{Bounds: h.Bounds, Cum: append([]uint64(nil), h.Cum...)}
	if len(before.Cum) != len(h.Cum) {
		return out
	}
	for i := range out.Cum {
		out.Cum[i] -= min(out.Cum[i], before.Cum[i])
	}
	return out
}

// Quantile is the q-quantile, interpolated linearly within its bucket as PromQL's
// histogram_quantile does (the lowest bucket from 0); NaN with no observations, and the
// highest finite bound when it falls in +Inf.
func (h Hist) Quantile(q float64) float64 {
	n := h.Count()
	if n == 0 {
		return math.NaN()
	}
	rank := q * float64(n)
	lo, below := 0.0, uint64(0)
	for i, c := range h.Cum {
		if float64(c) >= rank {
			if math.IsInf(h.Bounds[i], 1) {
				return lo
			}
			in := c - below
			if in == 0 {
				return h.Bounds[i]
			}
			return lo + (h.Bounds[i]-lo)*(rank-float64(below))/float64(in)
		}
		lo, below = h.Bounds[i], c
	}
	return lo
}

// FromFamilies is the series of the histogram called name whose labels include every pair
// of labels (name, value, ...), summed over the matching series; empty if none.
func FromFamilies(mfs []*dto.MetricFamily, name string, labels ...string) (Hist, error) {
	var out Hist
	for _, mf := range mfs {
		if mf.GetName() != name || mf.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for k := 0; k+1 < len(labels); k += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[k] && lp.GetValue() == labels[k+1] {
						found = true
						break
					}
				}
				if !found {
					continue series
				}
			}
			var h Hist
			for _, b := range m.GetHistogram().GetBucket() {
				h.Bounds = append(h.Bounds, b.GetUpperBound())
				h.Cum = append(h.Cum, b.GetCumulativeCount())
			}
			if k := len(h.Bounds); k == 0 || !math.IsInf(h.Bounds[k-1], 1) { // the text parser adds +Inf, Gather does not
				h.Bounds = append(h.Bounds, math.Inf(1))
				h.Cum = append(h.Cum, m.GetHistogram().GetSampleCount())
			}
			var err error
			if out, err = out.Add(h); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// Parse reads the Prometheus text format (what /metrics answers) into families.
func Parse(r io.Reader) ([]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := make([]*dto.MetricFamily, 0, len(byName))
	for _, mf := range byName {
		out = append(out, mf)
	}
	return out, nil
}
