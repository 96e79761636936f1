package simcluster

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metric returns the sum of the series of the counter or gauge called name in reg whose
// labels include every pair of labels (name, value, name, value, ...); 0 if none. It reads
// the gossip and sync metrics by their exported names (fenec_entry_gossip_*, _snapshot_*,
// _sync_*, _repair_*), as an operator's dashboard would.
func Metric(reg prometheus.Gatherer, name string, labels ...string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
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
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum
}

// Metric is Metric of the entry's registry.
func (e *Entry) Metric(name string, labels ...string) float64 {
	return Metric(e.Registry, name, labels...)
}
