package main

// evKind is what an event does when its time comes.
type evKind uint8

const (
	evLearn      evKind = iota + 1 // home id is learned at node
	evTick                         // node's publisher flush tick
	evCopy                         // copy entry id is due
	evDirect                       // direct batch id arrives at node from from
	evGossip                       // node's memberlist gossip round
	evGossipPkt                    // gossip packet id arrives at node
	evProbe                        // node probes its next peer
	evPing                         // probe id's ping arrives at its target
	evAck                          // probe id's ack arrives at its prober
	evProbeCheck                   // probe id's ack is due: indirect probes if it did not come
	evPingReq                      // an indirect ping request for probe id arrives at node
	evIPing                        // the indirect ping arrives at the target
	evIAck                         // its ack arrives at the relaying peer
	evAckFwd                       // the forwarded ack arrives at the prober
	evRepair                       // node starts a repair round
	evRepairStep                   // repair round id takes its next step
	evMark                         // mark id is observed at node
	evChurn                        // a membership message starts at node
	evToRelay                      // batch id arrives at relay node (relay strategy, hop 1)
	evRelayFlush                   // relay node sends what it aggregated
	evRelayData                    // relay packet id arrives at node from relay from
	evHeartbeat                    // relay node sends its heartbeat for seq id (attempt from)
	evHB                           // relay from's heartbeat (last seq id) arrives at node
	evNack                         // NACK id from from arrives at relay node
	evNackCheck                    // node checks whether relay from's missing packets came
	evBatchAck                     // from's ack of batch id arrives at its sender node
	evAckCheck                     // ack wait id is due: send again to those that did not ack
	evPushPull                     // node starts a push/pull with a random peer
)

// event is one timed happening. at is nanoseconds of simulated time; seq breaks ties in the
// order events were scheduled, so that a run is a pure function of its seed.
type event struct {
	at   int64
	seq  uint64
	kind evKind
	node int32
	from int32
	id   int32
}

// eventQueue is a 4-ary min-heap of events by (at, seq). Not safe for concurrent use; the
// zero value is empty.
type eventQueue struct {
	h   []event
	seq uint64
}

func (q *eventQueue) len() int { return len(q.h) }

func less(a, b *event) bool { return a.at < b.at || (a.at == b.at && a.seq < b.seq) }

// push schedules e (its seq is assigned here).
func (q *eventQueue) push(e event) {
	e.seq = q.seq
	q.seq++
	q.h = append(q.h, e)
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !less(&q.h[i], &q.h[p]) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

// pop removes and returns the earliest event; the queue must not be empty.
func (q *eventQueue) pop() event {
	top := q.h[0]
	last := len(q.h) - 1
	q.h[0] = q.h[last]
	q.h = q.h[:last]
	i, n := 0, last
	for {
		m := i
		for c := 4*i + 1; c <= 4*i+4 && c < n; c++ {
			if less(&q.h[c], &q.h[m]) {
				m = c
			}
		}
		if m == i {
			break
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
	return top
}
