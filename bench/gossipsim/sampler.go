package main

import (
	"time"

	"github.com/fenec/fenec-entry/gossip/simcluster"
)

// sampler records the largest serf event queue and flush interval any entry reports (the
// gauges fenec_entry_gossip_serf_event_queue and _flush_interval_seconds, which each
// publisher sets every flush tick), every 250 ms, of every entry's current incarnation.
type sampler struct {
	entries            func() []*simcluster.Entry // Cluster.Entries
	maxQueue, maxFlush float64
	done, stopped      chan struct{}
}

func newSampler(entries func() []*simcluster.Entry) *sampler {
	return &sampler{entries: entries, done: make(chan struct{}), stopped: make(chan struct{})}
}

func (s *sampler) run() {
	defer close(s.stopped)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		for _, e := range s.entries() {
			s.maxQueue = max(s.maxQueue, e.Metric("fenec_entry_gossip_serf_event_queue"))
			s.maxFlush = max(s.maxFlush, e.Metric("fenec_entry_gossip_flush_interval_seconds"))
		}
	}
}

// stop ends run; the maxima are then safe to read.
func (s *sampler) stop() {
	close(s.done)
	<-s.stopped
}
