package spread

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fenec/fenec-entry/gossip/internal/wire"
)

func TestDirectDedup(t *testing.T) {
	d := newDirectDedup()
	if d.has([]byte("a")) {
		t.Fatal("empty dedup has a")
	}
	d.add([]byte("a"))
	if !d.has([]byte("a")) || d.has([]byte("b")) {
		t.Fatal("has after add")
	}
	for i := range directDedupSize {
		d.add([]byte{byte(i), byte(i >> 8), 'x'})
	}
	if d.has([]byte("a")) || len(d.seen) != directDedupSize {
		t.Fatalf("not forgotten after %d more: %d remembered", directDedupSize, len(d.seen))
	}
}

func TestDirectSenderCopies(t *testing.T) {
	m, _ := newMetrics(nil)
	codec := wire.NewCodec(keysOf(clusterKey), "lbl")
	peers := []memberlist.Address{{Addr: "10.0.0.2:7946", Name: "b"}, {Addr: "10.0.0.3:7946", Name: "c"}}
	sent := map[string]int{}
	var pkts [][]byte
	d := &directSender{codec: codec, peers: func() []memberlist.Address { return peers }, copies: 3,
		every: 50 * time.Millisecond, m: m,
		write: func(pkt []byte, to memberlist.Address) error { sent[to.Name]++; pkts = append(pkts, pkt); return nil }}
	t0 := time.Unix(1_800_000_000, 0)
	if err := d.send(t0, []byte("\x01\x01apayload"), nil); err != nil {
		t.Fatal(err)
	}
	if sent["b"] != 1 || sent["c"] != 1 || len(d.queue) != 1 {
		t.Fatalf("first copy: %v, queue %d", sent, len(d.queue))
	}
	d.sendCopies(t0.Add(49 * time.Millisecond))
	if sent["b"] != 1 {
		t.Fatalf("copy sent early: %v", sent)
	}
	d.sendCopies(t0.Add(50 * time.Millisecond))
	d.sendCopies(t0.Add(99 * time.Millisecond))
	if sent["b"] != 2 || sent["c"] != 2 {
		t.Fatalf("second copy: %v", sent)
	}
	d.sendCopies(t0.Add(100 * time.Millisecond))
	if sent["b"] != 3 || sent["c"] != 3 || len(d.queue) != 0 {
		t.Fatalf("third copy: %v, queue %d", sent, len(d.queue))
	}
	for _, p := range pkts[1:] {
		if !bytes.Equal(p, pkts[0]) {
			t.Fatal("copies differ: the receiver could not drop them as duplicates")
		}
	}
	if got := promtest.ToFloat64(m.directPackets); got != 6 {
		t.Fatalf("direct packets %v, want 6", got)
	}
	// One copy: nothing queued.
	d.copies = 1
	_ = d.send(t0, []byte("\x01\x01bpayload"), nil)
	if len(d.queue) != 0 {
		t.Fatal("copies queued with DirectCopies 1")
	}
}

// TestDirectWriteFailureCounted pins that a packet the transport refuses is counted as
// dropped, not as sent.
func TestDirectWriteFailureCounted(t *testing.T) {
	m, _ := newMetrics(nil)
	peers := []memberlist.Address{{Addr: "10.0.0.2:7946", Name: "b"}, {Addr: "10.0.0.3:7946", Name: "c"}}
	d := &directSender{codec: wire.NewCodec(keysOf(clusterKey), "lbl"), peers: func() []memberlist.Address { return peers },
		copies: 1, m: m, write: func(_ []byte, to memberlist.Address) error {
			if to.Name == "c" {
				return errors.New("sendto: no buffer space")
			}
			return nil
		}}
	if err := d.send(time.Now(), []byte("\x01\x01apayload"), nil); err != nil {
		t.Fatal(err)
	}
	if sent, dropped := promtest.ToFloat64(m.directPackets), promtest.ToFloat64(m.eventsDropped.WithLabelValues("direct_write")); sent != 1 || dropped != 1 {
		t.Errorf("sent %v, dropped %v; want 1 and 1", sent, dropped)
	}
}

// TestDirectCopiesDroppedCounted pins that copies the full copy queue drops are counted.
func TestDirectCopiesDroppedCounted(t *testing.T) {
	m, _ := newMetrics(nil)
	peers := []memberlist.Address{{Addr: "10.0.0.2:7946", Name: "b"}, {Addr: "10.0.0.3:7946", Name: "c"}}
	d := &directSender{codec: wire.NewCodec(keysOf(clusterKey), "lbl"), peers: func() []memberlist.Address { return peers },
		copies: 3, every: time.Second, m: m, write: func([]byte, memberlist.Address) error { return nil }}
	now := time.Now()
	for range maxDirectQueue + 1 {
		if err := d.send(now, []byte("\x01\x01apayload"), nil); err != nil {
			t.Fatal(err)
		}
	}
	// One batch lost its 2 remaining copies to each of the 2 peers.
	if got := promtest.ToFloat64(m.eventsDropped.WithLabelValues("copies_queue_full")); got != 4 {
		t.Errorf("copies dropped %v, want 4", got)
	}
	if len(d.queue) != maxDirectQueue {
		t.Errorf("queue %d, want the bound %d", len(d.queue), maxDirectQueue)
	}
}
