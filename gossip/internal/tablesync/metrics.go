package tablesync

import "github.com/prometheus/client_golang/prometheus"

// syncMetrics are the snapshot and repair metrics. No label has a per-tenant or per-peer value.
type syncMetrics struct {
	served     *prometheus.CounterVec // by endpoint and result (ok, error, or the refusal's code)
	noncesFull prometheus.Counter
	fetches    *prometheus.CounterVec // by result: ok, partial, error
	applied    *prometheus.CounterVec // by via (snapshot, repair) and type (home, mark)
	invalid    *prometheus.CounterVec // by via and type
	rounds     *prometheus.CounterVec // repair rounds by result: pulled, in_sync, no_peer, error, bootstrapping, peer_bootstrapping
	buckets    prometheus.Counter     // repair buckets found differing and pulled
	deferred   prometheus.Counter     // differing buckets left to a later round (maxPullBuckets)
}

// Label values.
const (
	viaSnapshot = "snapshot"
	viaRepair   = "repair"
	typeHome    = "home"
	typeMark    = "mark"
)

func newSyncMetrics(reg prometheus.Registerer) (*syncMetrics, error) {
	m := &syncMetrics{
		served: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_snapshot_requests_total",
			Help: "Requests from peers for this entry's table or a repair pull, on the gossip port, by endpoint and result (ok, error, or why refused).",
		}, []string{"endpoint", "result"}),
		noncesFull: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_snapshot_nonces_full_total",
			Help: "Challenges refused because 1024 nonces were outstanding.",
		}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_snapshot_fetches_total",
			Help: "Snapshots fetched from a peer, by result (ok; partial: the peer was fetching its own from empty, a whole one was looked for elsewhere; error).",
		}, []string{"result"}),
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_sync_applied_total",
			Help: "Homes and marks from a snapshot or a repair pull that changed the table, by via and type.",
		}, []string{"via", "type"}),
		invalid: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_sync_invalid_total",
			Help: "Homes and marks from a snapshot or a repair pull refused by validation, by via and type.",
		}, []string{"via", "type"}),
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_repair_rounds_total",
			Help: "Anti-entropy rounds by result (pulled, in_sync, no_peer, error; bootstrapping: skipped while this entry fetches its table; peer_bootstrapping: the peer was fetching its table and refused).",
		}, []string{"result"}),
		buckets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_repair_buckets_differing_total",
			Help: "Digest buckets found differing from a peer's and pulled (of 256 per round; at most 64 a round).",
		}),
		deferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_repair_buckets_deferred_total",
			Help: "Differing digest buckets left to a later round: one round pulls at most 64 of 256.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.served, m.noncesFull, m.fetches, m.applied, m.invalid, m.rounds, m.buckets, m.deferred} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
