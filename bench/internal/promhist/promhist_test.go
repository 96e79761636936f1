package promhist

import (
	"bytes"
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// The same observations read from a registry and from its /metrics text give the same
// histogram; two processes' add up; a later reading minus an earlier one is what came
// between; quantiles interpolate within a bucket like histogram_quantile.
func TestHistogramAcrossProcesses(t *testing.T) {
	regs := [2]*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	var hs [2]*prometheus.HistogramVec
	for i, reg := range regs {
		hs[i] = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "x_seconds", Buckets: []float64{.1, .2, .5, 1}}, []string{"clock"})
		reg.MustRegister(hs[i])
	}
	hs[0].WithLabelValues("origin").Observe(0.05)
	before, _ := regs[0].Gather()
	for range 10 {
		hs[0].WithLabelValues("origin").Observe(0.15) // 10 in (0.1, 0.2]
		hs[1].WithLabelValues("origin").Observe(0.3)  // 10 in (0.2, 0.5]
		hs[1].WithLabelValues("local").Observe(5)     // another series: not counted
	}
	var sum Hist
	for _, reg := range regs {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var text bytes.Buffer
		for _, mf := range mfs {
			if _, err := expfmt.MetricFamilyToText(&text, mf); err != nil {
				t.Fatal(err)
			}
		}
		parsed, err := Parse(&text)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := FromFamilies(mfs, "x_seconds", "clock", "origin")
		b, _ := FromFamilies(parsed, "x_seconds", "clock", "origin")
		if a.Count() != b.Count() || len(a.Cum) != 5 {
			t.Fatalf("registry %v, text %v", a, b)
		}
		if sum, err = sum.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	b0, _ := FromFamilies(before, "x_seconds", "clock", "origin")
	d := sum.Sub(b0)
	for _, row := range []struct {
		name      string
		got, want float64
	}{
		{"count", float64(d.Count()), 20},
		{"p25: half-way through (0.1, 0.2]", d.Quantile(0.25), 0.15},
		{"p50: the top of (0.1, 0.2]", d.Quantile(0.5), 0.2},
		{"p75: half-way through (0.2, 0.5]", d.Quantile(0.75), 0.35},
		{"p100", d.Quantile(1), 0.5},
	} {
		if math.Abs(row.got-row.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", row.name, row.got, row.want)
		}
	}
	if !math.IsNaN((Hist{}).Quantile(0.5)) {
		t.Error("an empty histogram has a quantile")
	}
	if _, err := sum.Add(Hist{Bounds: []float64{1, math.Inf(1)}, Cum: []uint64{1, 1}}); err == nil {
		t.Error("histograms of other buckets were added")
	}
}
