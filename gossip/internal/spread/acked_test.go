package spread

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/memberlist"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fenec/fenec-entry/gossip/internal/wire"
	"github.com/fenec/fenec-entry/internal/testutil"
)

// link records what an ackedSender writes.
type link struct {
	mu   sync.Mutex
	sent map[string]int // receiver name -> packets
	last []byte
}

func (w *link) write(pkt []byte, to memberlist.Address) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent[to.Name]++
	w.last = pkt
	return nil
}

func (w *link) count(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sent[name]
}

func newTestAcked(t *testing.T, timeout time.Duration) (*ackedSender, *link, *metrics) {
	t.Helper()
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &link{sent: map[string]int{}}
	s := newAckedSender(wire.NewCodec(keysOf(clusterKey), "lbl"), w.write, m, timeout, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, w, m
}

func addrs(names ...string) []memberlist.Address {
	out := make([]memberlist.Address, len(names))
	for i, n := range names {
		out[i] = memberlist.Address{Addr: "10.0.0.1:7946", Name: n}
	}
	return out
}

// A packet goes once to each receiver; the ones that ack get nothing more, the one that does
// not gets it again every timeout, ackTries times in all, and is then given up on and handed
// to giveUp; acks for unknown packets or from strangers are counted late.
func TestAckedSenderSendsAgainOnlyWhereNoAckCame(t *testing.T) {
	s, w, m := newTestAcked(t, 30*time.Millisecond)
	var mu sync.Mutex
	var gaveUp []string
	giveUp := func(payload []byte, missing []memberlist.Address) {
		mu.Lock()
		defer mu.Unlock()
		if !bytes.Equal(payload, []byte("\x01\x01apayload")) {
			t.Errorf("giveUp got payload %q", payload)
		}
		for _, a := range missing {
			gaveUp = append(gaveUp, a.Name)
		}
	}
	if err := s.send(time.Now(), wire.KindAcked, []byte("\x01\x01apayload"), addrs("b", "c", "d"), giveUp); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	n := wire.NonceOf(w.last)
	w.mu.Unlock()
	s.ack("b", n)
	s.ack("c", n)
	s.ack("c", n)                // a duplicate ack
	s.ack("stranger", n)         // not a receiver
	s.ack("b", wire.Nonce{1, 2}) // no such packet
	testutil.Eventually(t, 5*time.Second, "d given up on", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(gaveUp) > 0
	})
	if got := w.count("d"); got != ackTries {
		t.Errorf("d, which never acked, got %d sends, want %d", got, ackTries)
	}
	if w.count("b") != 1 || w.count("c") != 1 {
		t.Errorf("b and c, which acked, got %d and %d sends, want 1 each", w.count("b"), w.count("c"))
	}
	mu.Lock()
	if len(gaveUp) != 1 || gaveUp[0] != "d" {
		t.Errorf("given up on %v, want [d]", gaveUp)
	}
	mu.Unlock()
	if got := promtest.ToFloat64(m.ackedResent); got != ackTries-1 {
		t.Errorf("resent %v, want %d", got, ackTries-1)
	}
	if got := promtest.ToFloat64(m.ackedGivenUp.WithLabelValues("tries")); got != 1 {
		t.Errorf("given up %v, want 1", got)
	}
	if got := promtest.ToFloat64(m.acksReceived.WithLabelValues("late")); got != 2 {
		t.Errorf("late acks %v, want 2 (a stranger's, an unknown packet's)", got)
	}
	if s.pendingCount() != 0 {
		t.Errorf("%d packets still pending", s.pendingCount())
	}
}

// A packet acked by every receiver is forgotten at once and never sent again.
func TestAckedSenderForgetsWhatIsAcked(t *testing.T) {
	s, w, m := newTestAcked(t, 20*time.Millisecond)
	if err := s.send(time.Now(), wire.KindRelay, []byte("\x01\x01apayload"), addrs("b", "c"), nil); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	n := wire.NonceOf(w.last)
	w.mu.Unlock()
	s.ack("b", n)
	s.ack("c", n)
	if s.pendingCount() != 0 {
		t.Fatalf("%d packets pending after every ack", s.pendingCount())
	}
	time.Sleep(100 * time.Millisecond) // five timeouts: a resend would have happened
	if w.count("b") != 1 || w.count("c") != 1 || promtest.ToFloat64(m.ackedResent) != 0 {
		t.Errorf("sends %d and %d, resent %v: an acked packet went again", w.count("b"), w.count("c"),
			promtest.ToFloat64(m.ackedResent))
	}
}

// The packets waiting for acks are bounded: beyond maxAckedPending the oldest is given up on,
// counted per receiver.
func TestAckedSenderIsBounded(t *testing.T) {
	s, _, m := newTestAcked(t, time.Hour)
	for range maxAckedPending + 10 {
		if err := s.send(time.Now(), wire.KindAcked, []byte("\x01\x01apayload"), addrs("b", "c"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.pendingCount(); got != maxAckedPending {
		t.Errorf("%d pending, want the bound %d", got, maxAckedPending)
	}
	if got := promtest.ToFloat64(m.ackedGivenUp.WithLabelValues("queue_full")); got != 20 {
		t.Errorf("given up %v (packets x receivers), want 20", got)
	}
	if got := promtest.ToFloat64(m.ackedPending); got != maxAckedPending {
		t.Errorf("pending gauge %v, want %d", got, maxAckedPending)
	}
}

// What is due is by the injected clock, not the timer's: while the clock stands still no
// packet is sent again however long the timer runs, and once the clock passes the timeout the
// unacked receiver gets it again.
func TestAckedSenderResendsByItsClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := newMetrics(nil)
		if err != nil {
			t.Fatal(err)
		}
		clock := testutil.NewClock(time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC))
		w := &link{sent: map[string]int{}}
		const timeout = 400 * time.Millisecond
		s := newAckedSender(wire.NewCodec(keysOf(clusterKey), "lbl"), w.write, m, timeout, clock.Now)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); s.run(ctx) }()
		defer func() { cancel(); <-done }()
		if err := s.send(clock.Now(), wire.KindAcked, []byte("\x01\x01apayload"), addrs("b"), nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * timeout) // the timer's time: the clock stands still
		synctest.Wait()
		if got := w.count("b"); got != 1 {
			t.Fatalf("b got %d sends while the clock stood still, want 1", got)
		}
		clock.Advance(timeout)
		time.Sleep(timeout)
		synctest.Wait()
		if got := w.count("b"); got != 2 {
			t.Fatalf("b got %d sends once the clock passed the timeout, want 2", got)
		}
	})
}
