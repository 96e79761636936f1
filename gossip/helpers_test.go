package gossip

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/fenec/fenec-entry/gossip/internal/gossiptest"
)

// testRegions are the regions of the tests' tables, the ones gossiptest.Homes picks from.
var testRegions = gossiptest.Regions

var clusterKey, strangerKey = gossiptest.ClusterKey, gossiptest.StrangerKey

// keysOf is Keys holding k alone (nil: insecure).
var keysOf = gossiptest.Keys

// series is the series of the metric family name in n's registry whose labels are the pairs
// given (key, value, key, value ..., in the order of the keys); a family or series that is not
// there fails the test.
func (n *testNode) series(t *testing.T, name string, labels ...string) *dto.Metric {
	t.Helper()
	for _, f := range n.families(t) {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel())*2 != len(labels) {
				continue
			}
			for i, l := range m.GetLabel() {
				if l.GetName() != labels[2*i] || l.GetValue() != labels[2*i+1] {
					continue series
				}
			}
			return m
		}
		t.Fatalf("%s: no series %s%v", n.name, name, labels)
	}
	t.Fatalf("%s: no metric %s registered", n.name, name)
	return nil
}

// metric is the value of a counter or gauge series (see series).
func (n *testNode) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	m := n.series(t, name, labels...)
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}

// seriesCount is how many series the metric family name has in n's registry.
func (n *testNode) seriesCount(t *testing.T, name string) int {
	t.Helper()
	for _, f := range n.families(t) {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	t.Fatalf("%s: no metric %s registered", n.name, name)
	return 0
}

func (n *testNode) families(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	fs, err := n.g.cfg.Registerer.(prometheus.Gatherer).Gather()
	if err != nil {
		t.Fatalf("%s: gather: %v", n.name, err)
	}
	return fs
}
