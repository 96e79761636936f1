package node

import (
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
	"github.com/fenec/fenec-entry/proxy"
)

func TestLatencyTag(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	tag := encodeLatency([]proxy.RegionLatency{
		{Region: "eu", Estimate: ms(0.34), Measured: true},
		{Region: "us", Measured: false},
		{Region: "ap", Estimate: ms(212.6), Measured: true},
	})
	if tag != "eu:0.3,ap:213" {
		t.Errorf("tag %q, want eu:0.3,ap:213 (unmeasured left out)", tag)
	}
	if got := parseLatency(tag); !maps.Equal(got, map[string]float64{"eu": 0.3, "ap": 213}) {
		t.Errorf("parse %v", got)
	}
	if got := parseLatency("eu:1,bad,us:-3,ap:x,:4,sa:NaN,oc:+Inf,af:7"); !maps.Equal(got, map[string]float64{"eu": 1, "af": 7}) {
		t.Errorf("a peer's bad entries are not left out: %v", got)
	}
	var many []proxy.RegionLatency
	for i := range 64 {
		many = append(many, proxy.RegionLatency{Region: "region-" + strings.Repeat("x", i%7), Estimate: ms(123), Measured: true})
	}
	if tag := encodeLatency(many); len(tag) > maxLatencyTag {
		t.Errorf("tag of %d bytes, at most %d", len(tag), maxLatencyTag)
	}
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"", "eu:3", true},
		{"eu:3", "eu:3.5", false},    // under 5 ms
		{"eu:1", "eu:4", false},      // 75 %, but under 5 ms: noise near a region
		{"eu:100", "eu:120", false},  // under 25 %
		{"eu:100", "eu:140", true},   // both
		{"eu:3", "eu:3,us:90", true}, // a region appeared
		{"eu:3,us:90", "eu:3", true}, // one went
		{"eu:3,us:90", "eu:3,ap:90", true},
	} {
		if got := significant(tt.a, tt.b); got != tt.want {
			t.Errorf("significant(%q, %q) = %v", tt.a, tt.b, got)
		}
	}
	// The fleet's changes stay within latencyTagRate a second whatever its size.
	for _, n := range []int{1, 3, 6, 100, 1000, 5000} {
		every := latencyTagInterval(n)
		if every < latencyTagEvery {
			t.Errorf("%d members: every %v, under %v", n, every, latencyTagEvery)
		}
		if rate := float64(n) / every.Seconds(); rate > latencyTagRate+1e-9 {
			t.Errorf("%d members: %.2f changes a second fleet-wide, over %v", n, rate, latencyTagRate)
		}
	}
	if got := latencyTagInterval(1000); got != 5000*time.Second {
		t.Errorf("1,000 members: every %v, want 5000s", got)
	}
}

// The status shows this entry's latency to each region it reached, and the closest region.
func TestStatusLatency(t *testing.T) {
	eu, us := newRouter(t, "eu", nil), newRouter(t, "us", nil)
	n, _ := startNode(t, testConfig(t, "eu", eu.URL, "us", us.URL))
	client := &http.Client{Timeout: 5 * time.Second}
	get(t, client, "http://"+n.ClientAddr().String()+"/t/acme/x") // eu, the first region
	st := n.Status()
	if !st.Regions[0].Measured {
		t.Errorf("eu answered and is not measured: %+v", st.Regions[0])
	}
	if st.Closest != "eu" {
		t.Errorf("closest %q, want the default eu (loopback: no region is clearly closer)", st.Closest)
	}
	// The probe at start measures us, which no request reached.
	testutil.Eventually(t, 5*time.Second, "us measured by the probe", func() bool { return n.Status().Regions[1].Measured })
}

// A region this entry cannot reach is probed at least every --read-backoff: the round is the
// latency round, or the read backoff when shorter, above a floor.
func TestProbeEvery(t *testing.T) {
	for backoff, want := range map[time.Duration]time.Duration{
		10 * time.Second:              latencyTick,
		time.Second:                   time.Second,
		time.Millisecond:              proxy.MinProbeEvery,
		latencyTick:                   latencyTick,
		latencyTick - time.Nanosecond: latencyTick - time.Nanosecond,
	} {
		if got := probeEvery(backoff); got != want {
			t.Errorf("probeEvery(%v) = %v, want %v", backoff, got, want)
		}
	}
}
