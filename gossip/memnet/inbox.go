package memnet

import (
	"container/heap"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/fenec/fenec-entry/internal/clock"
)

// enqueue holds p until at, for the scheduler to deliver. It drops p if the
// transport is closed or QueueLen packets are already waiting.
func (t *Transport) enqueue(p *memberlist.Packet, at time.Time) {
	c := &t.net.counters
	t.mu.Lock()
	switch {
	case t.closed:
		c.droppedDown.Add(1)
	case len(t.pending) >= QueueLen:
		c.droppedQueueFull.Add(1)
	default:
		heap.Push(&t.pending, pending{at: at, p: p})
		if t.pending[0].p == p { // new earliest: the scheduler must re-arm
			select {
			case t.wake <- struct{}{}:
			default:
			}
		}
	}
	t.mu.Unlock()
}

// deliver puts p in the inbox now, or drops it if the transport is closed
// or killed or the inbox is full. It never blocks.
func (t *Transport) deliver(p *memberlist.Packet) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deliverLocked(p, clock.System.Now())
}

func (t *Transport) deliverLocked(p *memberlist.Packet, now time.Time) {
	c := &t.net.counters
	if t.closed || t.killed.Load() {
		c.droppedDown.Add(1)
		return
	}
	p.Timestamp = now
	select {
	case t.packetCh <- p:
		c.delivered.Add(1)
		c.deliveredBytes.Add(uint64(len(p.Buf)))
	default:
		c.droppedQueueFull.Add(1)
	}
}

// schedule delivers pending packets when their time comes, until Shutdown.
// It is the transport's only goroutine.
func (t *Transport) schedule() {
	defer close(t.stopped)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		t.mu.Lock()
		now := clock.System.Now()
		for len(t.pending) > 0 && !t.pending[0].at.After(now) {
			p := heap.Pop(&t.pending).(pending)
			t.deliverLocked(p.p, now)
		}
		wait := time.Hour
		if len(t.pending) > 0 {
			wait = t.pending[0].at.Sub(now)
		}
		t.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-t.wake:
		case <-t.done:
			return
		}
	}
}

type pending struct {
	at time.Time
	p  *memberlist.Packet
}

// pendingHeap is a min-heap of packets by delivery time.
type pendingHeap []pending

func (h pendingHeap) Len() int           { return len(h) }
func (h pendingHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h pendingHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap) Push(x any)        { *h = append(*h, x.(pending)) }
func (h *pendingHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = pending{}
	*h = old[:len(old)-1]
	return x
}
