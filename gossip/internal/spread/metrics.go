package spread

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the spreading metrics. None has a per-tenant label.
type metrics struct {
	eventsSent      prometheus.Counter     //
	eventsReceived  prometheus.Counter     // from peers, before decoding
	eventsDropped   *prometheus.CounterVec // reason: recv_queue_full, send, direct_write, copies_queue_full
	eventsInvalid   prometheus.Counter     // undecodable or too large
	eventsOther     prometheus.Counter     // user events of another name: ignored
	itemsInvalid    *prometheus.CounterVec // kind: home, mark
	batchHomes      prometheus.Histogram
	batchBytes      prometheus.Histogram
	queueDepth      prometheus.Gauge
	flushInterval   prometheus.Gauge
	relaysOn        prometheus.Gauge // relayRule's decision
	directEstimate  prometheus.Gauge // relayRule's estimate, bytes a second
	flushesDeferred prometheus.Counter
	pendingDropped  prometheus.Counter
	homesApplied    prometheus.Counter
	marksApplied    prometheus.Counter
	propagation     *prometheus.HistogramVec // clock: origin, local
	directBatches   prometheus.Counter
	directPackets   prometheus.Counter
	budgetDeferred  prometheus.Counter     // flushes of homes held back by the direct send budget
	ownRelayed      prometheus.Counter     // flushes sent through relays for want of the origin's own budget
	relayed         prometheus.Counter     // batches this relay passed on to its group
	relayBatches    prometheus.Counter     // batches of many origins' homes this relay sent its group
	relayFallbacks  prometheus.Counter     // batches a relay never acked, sent to the rest of its group
	ackedPending    prometheus.Gauge       // acked packets waiting for acks
	ackedResent     prometheus.Counter     // acked packets sent again (packets x receivers)
	ackedGivenUp    *prometheus.CounterVec // reason: tries, queue_full (packets x receivers)
	acksSent        *prometheus.CounterVec // result: sent, queue_full, unknown_sender, write_failed (nonces)
	acksReceived    *prometheus.CounterVec // result: matched, late (nonces)
	directReceived  *prometheus.CounterVec // result: new, duplicate, invalid
}

// newMetrics makes the metrics and registers them with reg (nil: none).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		eventsSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_events_sent_total", Help: "Gossip events (batches of homes and marks) handed to serf.",
		}),
		eventsReceived: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_events_received_total", Help: "Gossip events received from peers.",
		}),
		eventsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_events_dropped_total",
			Help: "Gossip events and direct packets dropped: recv_queue_full (the apply worker fell behind), send (serf refused an event), direct_write (the transport refused a direct packet), copies_queue_full (copies of a direct packet never sent: the copy queue was full).",
		}, []string{"reason"}),
		eventsInvalid: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_events_invalid_total", Help: "Gossip events received that could not be decoded (dropped whole).",
		}),
		eventsOther: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_events_other_total",
			Help: "Serf user events received under another name than fenec-homes (a later release's, or an operator's serf event): ignored.",
		}),
		itemsInvalid: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_items_invalid_total", Help: "Homes and marks received that failed validation (dropped), by kind.",
		}, []string{"kind"}),
		batchHomes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fenec_entry_gossip_batch_homes", Help: "Homes per gossip event sent.",
			Buckets: []float64{0, 1, 2, 4, 8, 16, 24, 32, 48, 64, 96},
		}),
		batchBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fenec_entry_gossip_batch_bytes", Help: "Bytes per gossip event sent (name and payload).",
			Buckets: []float64{64, 128, 256, 384, 512, 640, 768, 896, 1024, 1280},
		}),
		queueDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fenec_entry_gossip_serf_event_queue", Help: "serf's user event queue depth (events still being retransmitted).",
		}),
		flushInterval: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fenec_entry_gossip_flush_interval_seconds", Help: "Current batching interval (widened under backpressure).",
		}),
		relaysOn: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fenec_entry_gossip_relays_on", Help: "1 while this entry's homes go through relays: the fleet's new homes, sent straight, would cost each entry more than 20 KB/s (straight again below 10).",
		}),
		directEstimate: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fenec_entry_gossip_direct_cost_bytes_per_second", Help: "What sending the fleet's new homes straight to every member costs each entry, bytes a second, averaged over 10 s: the relay rule's estimate.",
		}),
		flushesDeferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_flushes_deferred_total", Help: "Flushes put off because backpressure widened the interval.",
		}),
		pendingDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_pending_dropped_total", Help: "Homes and marks dropped unsent because the pending batch was full (repair carries them).",
		}),
		homesApplied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_homes_applied_total", Help: "Homes from gossip events that changed the table.",
		}),
		marksApplied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_marks_applied_total", Help: "Marks and clears from gossip events that changed the table.",
		}),
		propagation: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fenec_entry_gossip_propagation_seconds",
			Help: "Time from a home's learning at its origin to its applying here, for homes sent by their origin, by two clocks: " +
				"origin (the origin's stamp to the time here: exact when the clocks agree, off by their skew when not) and " +
				"local (no two clocks compared: the wait at the origin by its own clock, plus half the round trip serf's " +
				"network coordinates estimate, plus the wait here by this entry's clock).",
			Buckets: []float64{.025, .05, .1, .2, .3, .5, .75, 1, 1.5, 2, 3, 5, 10},
		}, []string{"clock"}),
		directBatches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_direct_batches_sent_total", Help: "Batches of homes sent straight to every member (each DirectCopies times).",
		}),
		directPackets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_direct_packets_sent_total", Help: "Direct packets sent (batches x members x copies).",
		}),
		relayed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_relayed_batches_total", Help: "Batches of homes this entry, a relay for their origin, passed on to its group (for origins whose homes go through relays).",
		}),
		relayBatches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_relay_batches_sent_total", Help: "Batches of many origins' homes this relay sent to its group (acked).",
		}),
		relayFallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_relay_fallbacks_total", Help: "Batches a relay never acked, sent by their origin straight to the rest of the relay's group.",
		}),
		ackedPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fenec_entry_gossip_acked_pending", Help: "Relay-mode packets waiting for their receivers' acks (at most 1024; beyond, the oldest is given up on).",
		}),
		ackedResent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_acked_resent_total", Help: "Relay-mode packets sent again to a receiver whose ack had not come (packets x receivers).",
		}),
		ackedGivenUp: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_acked_given_up_total",
			Help: "Relay-mode packets given up on for a receiver (packets x receivers; repair carries them): tries (no ack after 5 sends), queue_full (more than 1024 packets waiting for acks).",
		}, []string{"reason"}),
		acksSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_acks_sent_total",
			Help: "Acks of relay-mode packets (one per packet taken): sent, queue_full (the ack queue was full), unknown_sender (not a member now), write_failed.",
		}, []string{"result"}),
		acksReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_acks_received_total",
			Help: "Acks received for relay-mode packets: matched (a receiver took the packet), late (the packet was acked or given up on already, or the acker was not its receiver).",
		}, []string{"result"}),
		ownRelayed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_relayed_over_budget_total",
			Help: "Flushes of homes this entry sent through relays while the fleet's homes go straight, because sending them straight would have cost this entry more than its own budget (1.5 x DirectLimit a second, 10 s of it saved up).",
		}),
		budgetDeferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_direct_budget_deferred_total",
			Help: "Flushes that sent fewer batches of homes than they could because of the direct send budget (DirectBudget bytes a second to each member): pending homes wait, the oldest beyond MaxPending are dropped (counted) and left to repair.",
		}),
		directReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_direct_packets_received_total",
			Help: "Direct packets received from peers: new (queued to apply), duplicate (a copy already applied), invalid (failed to open or decode).",
		}, []string{"result"}),
	}
	for _, r := range []string{"new", "duplicate", "invalid"} {
		m.directReceived.WithLabelValues(r)
	}
	m.propagation.WithLabelValues("origin")
	m.propagation.WithLabelValues("local")
	m.eventsDropped.WithLabelValues("recv_queue_full")
	m.eventsDropped.WithLabelValues("send")
	m.eventsDropped.WithLabelValues("direct_write")
	m.eventsDropped.WithLabelValues("copies_queue_full")
	for _, r := range []string{"tries", "queue_full"} {
		m.ackedGivenUp.WithLabelValues(r)
	}
	for _, r := range []string{"sent", "queue_full", "unknown_sender", "write_failed"} {
		m.acksSent.WithLabelValues(r)
	}
	for _, r := range []string{"matched", "late"} {
		m.acksReceived.WithLabelValues(r)
	}
	m.itemsInvalid.WithLabelValues("home")
	m.itemsInvalid.WithLabelValues("mark")
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.eventsSent, m.eventsReceived, m.eventsDropped,
		m.eventsInvalid, m.eventsOther, m.itemsInvalid, m.batchHomes, m.batchBytes, m.queueDepth, m.flushInterval, m.relaysOn, m.directEstimate,
		m.flushesDeferred, m.pendingDropped, m.homesApplied, m.marksApplied, m.propagation,
		m.directBatches, m.directPackets, m.budgetDeferred, m.ownRelayed, m.relayed, m.relayBatches, m.directReceived,
		m.relayFallbacks, m.ackedPending, m.ackedResent, m.ackedGivenUp, m.acksSent, m.acksReceived} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("gossip: register metrics: %w", err)
		}
	}
	return m, nil
}
