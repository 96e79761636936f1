package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/gossip/simcluster"
)

// falseResult is the JSON line of a -false-failure run: nothing is killed, so every suspicion
// and every failure counted is of a live entry. Counts are summed over the entries that
// logged or saw them.
type falseResult struct {
	Mode      string  `json:"mode"`
	Nodes     int     `json:"nodes"`
	DurationS float64 `json:"duration_s"`
	LatencyMS [2]int  `json:"latency_ms"`
	Loss      float64 `json:"loss"`
	Seed      int64   `json:"seed"`
	Rate      float64 `json:"rate"`
	Homes     int     `json:"homes"`

	ProbeMS    float64 `json:"probe_interval_ms"`
	ProbeTmoMS float64 `json:"probe_timeout_ms"`
	SuspMult   int     `json:"suspicion_mult"`

	ProbesEst    int      `json:"probes_est"`        // nodes x duration / ProbeInterval
	UDPTimeouts  int      `json:"udp_ping_timeouts"` // direct ping unanswered within ProbeTimeout
	TCPRescues   int      `json:"tcp_rescues"`       // answered only over the TCP fallback
	Suspicions   int      `json:"suspicions"`        // no ack at all: the prober suspects the entry
	Refutations  int      `json:"refutations"`       // a suspected entry refuted it
	RefutedDead  int      `json:"refuted_dead"`      // a failed entry refuted it
	FailedMarks  int      `json:"failed_marks"`      // a suspicion timed out: memberlist marked it dead
	MemberFailed int      `json:"member_failed"`     // serf member-failed events, over observers
	PolledFailed int      `json:"polled_failed"`     // (observer, member) pairs turning failed in Members()
	PolledOther  int      `json:"polled_not_alive"`  // ... turning leaving or left
	FailedNames  int      `json:"failed_members"`    // distinct live entries ever listed failed
	NetLost      uint64   `json:"packets_lost"`      // memnet packets dropped by -loss
	NetSent      uint64   `json:"packets_sent"`      // memnet packets sent
	CPUCores     float64  `json:"cpu_cores"`
	Notable      []string `json:"notable"` // the first suspicions, refutations and failures
}

// memberLog counts memberlist's and serf's lines about member health. Every entry logs to it
// (at debug: memberlist's lines are debug lines of gossip, see gossip/serflog.go). Safe for
// concurrent use.
type memberLog struct {
	start time.Time

	mu      sync.Mutex // guards the following
	res     *falseResult
	failed  map[string]bool // members named in a failure
	notable []string
}

// memberPatterns map a line's message prefix to the counter it raises; notable lines are kept
// (the first maxNotable) with their time and entry.
var memberPatterns = []struct {
	prefix  string
	count   func(*falseResult) *int
	notable bool
}{
	{"memberlist: Failed UDP ping: ", func(r *falseResult) *int { return &r.UDPTimeouts }, false},
	{"memberlist: Was able to connect to ", func(r *falseResult) *int { return &r.TCPRescues }, false},
	{"memberlist: Suspect ", func(r *falseResult) *int { return &r.Suspicions }, true},
	{"memberlist: Refuting a suspect message", func(r *falseResult) *int { return &r.Refutations }, true},
	{"memberlist: Refuting a dead message", func(r *falseResult) *int { return &r.RefutedDead }, true},
	{"memberlist: Marking ", func(r *falseResult) *int { return &r.FailedMarks }, true},
	{"gossip: member member-failed", func(r *falseResult) *int { return &r.MemberFailed }, true},
}

const maxNotable = 40

func (w *memberLog) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte("memberlist: ")) && !bytes.Contains(p, []byte("member-failed")) {
		return len(p), nil
	}
	var l struct {
		Node    string `json:"node"`
		Member  string `json:"member"`
		Message string `json:"message"`
	}
	if json.Unmarshal(p, &l) != nil {
		return len(p), nil
	}
	for _, pat := range memberPatterns {
		if !strings.HasPrefix(l.Message, pat.prefix) {
			continue
		}
		w.mu.Lock()
		*pat.count(w.res)++
		if l.Member != "" {
			w.failed[l.Member] = true
		}
		if pat.notable && len(w.notable) < maxNotable {
			w.notable = append(w.notable, fmt.Sprintf("%.1fs %s: %s %s",
				time.Since(w.start).Seconds(), l.Node, l.Message, l.Member))
		}
		w.mu.Unlock()
		break
	}
	return len(p), nil
}

// runFalseFailure forms the cluster, then for f.falseFailure learns f.rate homes a second at
// random entries (load, not measured) and counts how often a live entry is suspected or
// listed failed: from memberlist's and serf's log lines, and by polling every entry's member
// list.
func runFalseFailure(f flags) (*falseResult, error) {
	res := &falseResult{
		Mode: "false-failure", Nodes: f.nodes, DurationS: f.falseFailure.Seconds(),
		LatencyMS: [2]int{int(f.minLat / time.Millisecond), int(f.maxLat / time.Millisecond)},
		Loss:      f.loss, Seed: f.seed, Rate: f.rate,
	}
	ml := &memberLog{res: res, failed: make(map[string]bool)}
	opts := simOptions(f)
	opts.Logger = zerolog.New(ml) // every level: memberlist's lines arrive at debug
	c, err := formCluster(opts)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	logf("%d entries formed; watching for %v", f.nodes, f.falseFailure)

	// Count from here: what happened while the cluster formed is not a false failure.
	ml.mu.Lock()
	*res = falseResult{Mode: res.Mode, Nodes: res.Nodes, DurationS: res.DurationS, LatencyMS: res.LatencyMS,
		Loss: res.Loss, Seed: res.Seed, Rate: res.Rate}
	ml.notable, ml.failed = nil, make(map[string]bool)
	ml.start = time.Now()
	ml.mu.Unlock()

	es := c.Entries()
	nw := c.Network()
	st0, cpu0, t0 := nw.Stats(), cpuTime(), time.Now()
	end := t0.Add(f.falseFailure)
	learned := make(chan int, 1)
	go func() { learned <- learnUntil(es, f.rate, f.seed, t0, end) }()

	var polledFailed, polledOther int
	state := make(map[[2]string]string) // (observer, member) -> state last seen
	failedSeen := make(map[string]bool)
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	nextLog := t0.Add(time.Minute)
	for now := time.Now(); now.Before(end); now = <-poll.C {
		for _, e := range es {
			for _, m := range e.Gossip.Members() {
				key := [2]string{e.Name, m.Name}
				if state[key] == m.State {
					continue
				}
				state[key] = m.State
				switch m.State {
				case "alive":
				case "failed":
					polledFailed++
					failedSeen[m.Name] = true
				default:
					polledOther++
				}
			}
		}
		if now.After(nextLog) {
			ml.mu.Lock()
			logf("%v: %d suspicions, %d failed marks, %d member-failed, %d polled failed",
				now.Sub(t0).Round(time.Second), res.Suspicions, res.FailedMarks, res.MemberFailed, polledFailed)
			ml.mu.Unlock()
			nextLog = nextLog.Add(time.Minute)
		}
	}
	k := <-learned
	wall, cpu1, st1 := time.Since(t0), cpuTime(), nw.Stats()

	ml.mu.Lock()
	defer ml.mu.Unlock()
	for n := range ml.failed {
		failedSeen[n] = true
	}
	res.PolledFailed, res.PolledOther = polledFailed, polledOther
	res.FailedNames = len(failedSeen)
	res.Homes = k
	res.NetSent, res.NetLost = st1.Sent-st0.Sent, st1.DroppedLoss-st0.DroppedLoss
	res.CPUCores = round((cpu1-cpu0).Seconds()/wall.Seconds(), 2)
	res.ProbeMS, res.ProbeTmoMS, res.SuspMult = probeSettings(f)
	res.ProbesEst = int(float64(f.nodes) * wall.Seconds() / (res.ProbeMS / 1e3))
	res.Notable = append([]string{}, ml.notable...)
	return res, nil
}

// learnUntil has a random entry learn a new home rate times a second, evenly paced, from t0
// until end, and returns how many it learned. rate 0 learns none.
func learnUntil(es []*simcluster.Entry, rate float64, seed int64, t0, end time.Time) int {
	if rate <= 0 {
		return 0
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x66616c73))
	names := tenantNames(rng, int(rate*end.Sub(t0).Seconds())+1)
	regions := simcluster.DefaultRegions
	k := 0
	for ; k < len(names); k++ {
		at := t0.Add(time.Duration(float64(k) / rate * float64(time.Second)))
		if !at.Before(end) {
			break
		}
		time.Sleep(time.Until(at)) // pacing the learnings
		es[rng.IntN(len(es))].Table.LearnName(names[k], regions[rng.IntN(len(regions))])
	}
	return k
}
