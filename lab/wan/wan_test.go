package wan

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"
)

func TestMatrixComplete(t *testing.T) {
	sites := Sites()
	for _, a := range sites {
		for _, b := range sites {
			if a == b {
				continue
			}
			rtt, ok := RTT(a, b)
			if !ok {
				t.Fatalf("no round trip %s-%s", a, b)
			}
			if back, _ := RTT(b, a); back != rtt {
				t.Errorf("%s-%s: %v one way, %v the other", a, b, rtt, back)
			}
			if rtt < 10*time.Millisecond || rtt > 400*time.Millisecond {
				t.Errorf("%s-%s: %v is no inter-region round trip", a, b, rtt)
			}
			if l := MatrixLink(a, b); l.Delay != rtt/2 || l.Loss != DefaultLoss {
				t.Errorf("%s->%s: link %+v", a, b, l)
			}
		}
	}
	if n := len(sites) * (len(sites) - 1) / 2; len(rttMillis) != n {
		t.Errorf("matrix has %d pairs, want %d (one per pair of sites)", len(rttMillis), n)
	}
}

func TestConfigCheck(t *testing.T) {
	for _, c := range []Config{
		{},
		{Sites: []string{"eu", "eu"}},
		{Sites: []string{"EU"}},
		{Sites: []string{"toolongname"}},
		{Sites: []string{"eu", "x"}}, // no such pair in the matrix: MatrixLink panics
		{Sites: []string{"a", "b"}, QueueLen: -1, Link: func(string, string) Link { return Link{} }},
		{Sites: []string{"a", "b"}, Link: func(string, string) Link { return Link{Loss: 2} }},
	} {
		func() {
			defer func() { _ = recover() }()
			if err := c.check(); err == nil {
				t.Errorf("config %+v: no error", c)
			}
		}()
	}
	c := Config{Sites: Sites()}
	if err := c.check(); err != nil || c.QueueLen != DefaultQueueLen {
		t.Fatalf("matrix config: %v, queue %d", err, c.QueueLen)
	}
}

func TestSiteAddr(t *testing.T) {
	if a := siteAddr(0).String(); a != "198.18.0.1" {
		t.Errorf("site 0: %s", a)
	}
	if a := siteAddr(249).String(); a != "198.18.0.250" {
		t.Errorf("site 249: %s", a)
	}
}

func TestIPv4Dst(t *testing.T) {
	p := make([]byte, 28)
	p[0] = 0x45
	copy(p[16:], []byte{198, 18, 0, 3})
	if a, ok := ipv4Dst(p); !ok || a.String() != "198.18.0.3" {
		t.Errorf("got %v %v", a, ok)
	}
	p[0] = 0x60
	if _, ok := ipv4Dst(p); ok {
		t.Error("IPv6 taken for IPv4")
	}
	if _, ok := ipv4Dst(p[:10]); ok {
		t.Error("short packet taken")
	}
}

// A line keeps the order of its packets, delivers none before its delay, and counts what it
// drops when its queue is full.
func TestLineOrderDelayAndBound(t *testing.T) {
	const delay = 20 * time.Millisecond
	l := newLine("a", "b", Link{Delay: delay}, 8, 1, 0)
	var mu sync.Mutex
	var got []byte
	var late []time.Duration
	start := time.Now()
	for i := range 10 { // 8 fit, 2 overflow
		l.offer([]byte{byte(i)}, start)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.run(ctx, func(b []byte) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, b[0])
			late = append(late, time.Since(start))
			return nil
		})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for l.delivered.Load() < 8 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	s := l.stats()
	if s.Delivered != 8 || s.Overflow != 2 || s.Lost != 0 {
		t.Fatalf("stats %+v, want 8 delivered and 2 overflow", s)
	}
	for i, b := range got {
		if int(b) != i {
			t.Fatalf("order %v", got)
		}
		if late[i] < delay {
			t.Fatalf("packet %d delivered after %v, before the delay %v", i, late[i], delay)
		}
	}
}

// The loss is seeded and near its probability.
func TestLineLoss(t *testing.T) {
	const n, p = 20000, 0.1
	count := func(seed uint64) uint64 {
		l := newLine("a", "b", Link{Loss: p}, n, seed, 3)
		for range n {
			l.offer(nil, time.Time{})
		}
		return l.lost.Load()
	}
	lost := count(7)
	if lost != count(7) {
		t.Fatal("same seed, different losses")
	}
	mean, sd := n*p, math.Sqrt(n*p*(1-p))
	if math.Abs(float64(lost)-mean) > 5*sd {
		t.Fatalf("lost %d of %d, want about %.0f", lost, n, mean)
	}
}
