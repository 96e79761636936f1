//go:build lab

package mux

import (
	"sync"
	"testing"
	"time"
)

// The lab's network, as bench/fleet sets it: each latency drawn within [min, max], centred;
// no packet earlier than min; the loss about p; bad settings refused.
func TestLabNetwork(t *testing.T) {
	for _, row := range []struct {
		latency, loss string
		ok            bool
	}{
		{"", "", true}, {"10ms,150ms", "0.01", true}, {"0s,0s", "0", true},
		{"10ms", "", false}, {"150ms,10ms", "", false}, {"-1ms,5ms", "", false}, {"x,5ms", "", false},
		{"", "1", false}, {"", "-0.1", false}, {"", "NaN", false}, {"", "lots", false},
	} {
		if _, err := readLab(row.latency, row.loss); (err == nil) != row.ok {
			t.Errorf("readLab(%q, %q): %v, want ok=%v", row.latency, row.loss, err, row.ok)
		}
	}

	n := labNet{min: 20 * time.Millisecond, max: 60 * time.Millisecond, loss: 0.1}
	var sum time.Duration
	const draws = 20000
	for range draws {
		d := n.latency()
		if d < n.min || d > n.max {
			t.Fatalf("latency %v outside [%v, %v]", d, n.min, n.max)
		}
		sum += d
	}
	if mean := sum / draws; mean < 39*time.Millisecond || mean > 41*time.Millisecond {
		t.Errorf("mean latency %v, want about 40ms", mean)
	}

	const sends = 2000
	var mu sync.Mutex
	var early, arrived int
	all := make(chan struct{})
	start := time.Now()
	for range sends {
		at := time.Now()
		n.send([]byte{1}, func([]byte) (time.Time, error) {
			mu.Lock()
			defer mu.Unlock()
			if time.Since(at) < n.min {
				early++
			}
			if arrived++; arrived == sends {
				close(all)
			}
			return time.Now(), nil
		})
	}
	select {
	case <-all:
	case <-time.After(5 * time.Second): // every packet that is not lost is sent by now
	}
	mu.Lock()
	defer mu.Unlock()
	if early > 0 {
		t.Errorf("%d packets sent sooner than %v", early, n.min)
	}
	// Binomial(2000, 0.1): sd 13 packets; 4.5 sd either way.
	if lost := sends - arrived; lost < 140 || lost > 260 {
		t.Errorf("%d of %d lost (in %v), want about 200", lost, sends, time.Since(start))
	}
}
