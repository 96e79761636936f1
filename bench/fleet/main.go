// Command fleet runs a fleet of real fenec-entry processes on this machine's loopback and
// measures their gossip, to hold bench/gossipsim (the same code in one process, on
// gossip/memnet) to what processes do:
//
//  1. stand-in routers for three regions (package standin, in this process);
//  2. -entries processes, each on a loopback address of its own (127.0.X.Y, the default
//     ports), GOMAXPROCS=1, every one joined to the first three and all started within about
//     a second: the time until every entry lists every other alive is the cold start;
//  3. the gossip bytes an idle entry sends, from its own fenec_entry_gossip_bytes_total, and
//     how often an entry changed its serf tags meanwhile (node's latency tag "lat", by the
//     member updates its peers log): each change is an alive broadcast every member
//     retransmits, which gossipsim models with -lat-tag-every;
//  4. -rate new homes a second for -duration, each a request for a new tenant at a random
//     entry (its router answers with the home), then -settle: every entry's
//     fenec_entry_gossip_propagation_seconds{clock="origin"} (exact here, one clock) merged
//     into the (home, entry) pairs' percentiles and the share of pairs gossip carried; the
//     bytes an entry sent and received meanwhile, and its tag changes;
//  5. one entry SIGSTOPped: the time until every other lists it failed.
//
// The entries are a lab build (go build -tags lab, made here unless -bin is given): their
// gossip packets wait a one-way latency drawn from -latency and are lost at -loss, as memnet
// does to gossipsim's, so the two compare at the same settings. It prints one JSON line on
// stdout; progress goes to stderr.
//
//	go run ./bench/fleet -entries 100 -rate 50 -duration 20s
//	go run ./bench/gossipsim -nodes 100 -rate 50 -duration 20s        # the same, simulated
package main

import (
	"context"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/fenec/fenec-entry/bench/internal/promhist"
	"github.com/fenec/fenec-entry/standin"
)

type flags struct {
	bin             string
	entries         int
	rate            float64
	duration        time.Duration
	latency         string
	loss            float64
	seed            uint64
	settle          time.Duration
	idleAfter, idle time.Duration
	failDetect      time.Duration
	logs            string
	formTimeout     time.Duration
	gomaxprocs      int
	maxRequests     int
}

type result struct {
	Entries     int     `json:"entries"`
	Rate        float64 `json:"rate"`
	DurationS   float64 `json:"duration_s"`
	Latency     string  `json:"latency"`
	Loss        float64 `json:"loss"`
	StartSpanS  float64 `json:"start_span_s"`     // first process started to last
	FormedS     float64 `json:"members_formed_s"` // first start to every entry listing every other alive
	IdlePacket  float64 `json:"idle_packet_bytes_per_entry_s"`
	IdleStream  float64 `json:"idle_stream_bytes_per_entry_s"`
	IdleTags    float64 `json:"idle_tag_changes_per_entry_s"`  // serf tag changes (node's "lat": alive broadcasts), from the peers' logs
	LearnTags   float64 `json:"learn_tag_changes_per_entry_s"` // the same while learning: gossipsim -lat-tag-every 1/this
	Homes       int     `json:"homes"`
	Learned     int     `json:"homes_learned"`         // requests answered by a router
	Failed      int     `json:"requests_failed"`       // refused, 5xx, or no answer
	Pairs       uint64  `json:"pairs_by_gossip"`       // (home, entry) pairs in the histograms
	PairsShare  float64 `json:"pairs_by_gossip_share"` // of homes x (entries-1)
	PairP50ms   float64 `json:"pair_p50_ms"`
	PairP99ms   float64 `json:"pair_p99_ms"`
	PacketMean  float64 `json:"packet_sent_bytes_per_entry_s"`
	PacketMax   float64 `json:"packet_sent_bytes_max_entry_s"`
	Busiest     string  `json:"packet_sent_max_entry"` // the entry that sent the most
	RecvMean    float64 `json:"packet_received_bytes_per_entry_s"`
	RecvMax     float64 `json:"packet_received_bytes_max_entry_s"`
	StreamMean  float64 `json:"stream_sent_bytes_per_entry_s"`
	IdleCPU     float64 `json:"idle_cpu_cores"`          // the entries' CPU time a second, all together, idle
	LearnCPU    float64 `json:"learn_cpu_cores"`         // the same while learning: near the host's cores, they wait for CPU
	FailDetectS float64 `json:"fail_detect_s,omitempty"` // SIGSTOP to every other entry listing it failed
}

func main() {
	var f flags
	flag.StringVar(&f.bin, "bin", "", "a lab build of fenec-entry (go build -tags lab); empty: built here")
	flag.IntVar(&f.entries, "entries", 100, "entries, one process each")
	flag.Float64Var(&f.rate, "rate", 50, "new homes a second, fleet-wide, each learned at a random entry")
	flag.DurationVar(&f.duration, "duration", 20*time.Second, "how long homes are learned")
	flag.StringVar(&f.latency, "latency", "10ms,150ms", "one-way latency of a gossip packet, min,max (uniform; memnet's and gossipsim's default); empty: none")
	flag.Float64Var(&f.loss, "loss", 0.01, "gossip packet loss (gossipsim's default)")
	flag.Uint64Var(&f.seed, "seed", 1, "seed of the learning entries")
	flag.DurationVar(&f.settle, "settle", 10*time.Second, "after learning, how long gossip may take before the histograms are read")
	flag.DurationVar(&f.idleAfter, "idle-after", 30*time.Second, "after forming, wait this long before the idle window (the joins' broadcasts die down)")
	flag.DurationVar(&f.idle, "idle", 20*time.Second, "idle window: membership traffic alone (0: skip)")
	flag.DurationVar(&f.failDetect, "fail-detect", 30*time.Second, "SIGSTOP one entry and wait up to this long for every other to list it failed (0: skip)")
	flag.StringVar(&f.logs, "logs", "", "keep the entries' logs in this directory (else a temporary one, removed)")
	flag.DurationVar(&f.formTimeout, "form-timeout", 120*time.Second, "bound on the cold start")
	flag.IntVar(&f.gomaxprocs, "gomaxprocs", 1, "GOMAXPROCS of each entry")
	flag.IntVar(&f.maxRequests, "max-requests", 64, "bound on learning requests in flight")
	flag.Parse()
	if err := check(f); err != nil {
		fmt.Fprintln(os.Stderr, "fleet: "+err.Error())
		os.Exit(2)
	}
	res, err := run(f)
	if res != nil {
		json.NewEncoder(os.Stdout).Encode(res)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet: "+err.Error())
		os.Exit(1)
	}
}

func check(f flags) error {
	switch {
	case f.entries < 2 || f.entries > 250*250:
		return fmt.Errorf("-entries %d: want 2 to %d", f.entries, 250*250)
	case f.rate <= 0:
		return fmt.Errorf("-rate %v: want more than 0", f.rate)
	case f.duration <= 0:
		return fmt.Errorf("-duration %v: want more than 0", f.duration)
	case f.loss < 0 || f.loss >= 1:
		return fmt.Errorf("-loss %v: want a probability in [0, 1)", f.loss)
	case f.gomaxprocs < 1:
		return fmt.Errorf("-gomaxprocs %d: want at least 1", f.gomaxprocs)
	case f.maxRequests < 1:
		return fmt.Errorf("-max-requests %d: want at least 1", f.maxRequests)
	}
	if f.latency != "" {
		lo, hi, ok := strings.Cut(f.latency, ",")
		a, err1 := time.ParseDuration(lo)
		b, err2 := time.ParseDuration(hi)
		if !ok || err1 != nil || err2 != nil || a < 0 || b < a {
			return fmt.Errorf("-latency %q: want min,max durations, 0 <= min <= max", f.latency)
		}
	}
	return nil
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "fleet: "+format+"\n", args...) }

// entry is one fenec-entry process.
type entry struct {
	name, ip string
	cmd      *exec.Cmd
	log      *os.File
}

func (e *entry) admin() string  { return e.ip + ":9091" }
func (e *entry) client() string { return e.ip + ":8080" }
func (e *entry) gossip() string { return e.ip + ":7946" }

// ipOf is entry i's loopback address: 127.0.1.1, 127.0.1.2, ... 127.0.1.250, 127.0.2.1, ...
func ipOf(i int) string { return fmt.Sprintf("127.0.%d.%d", 1+i/250, 1+i%250) }

func run(f flags) (*result, error) {
	res := &result{Entries: f.entries, Rate: f.rate, DurationS: f.duration.Seconds(), Latency: f.latency, Loss: f.loss}
	dir := f.logs
	if dir == "" {
		d, err := os.MkdirTemp("", "fleet-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	bin, err := binary(f.bin, dir)
	if err != nil {
		return nil, err
	}

	homes := int(math.Ceil(f.rate * f.duration.Seconds()))
	res.Homes = homes
	regions := []string{"eu", "us", "ap"}
	tenants := make(map[string]string, homes)
	for k := range homes {
		tenants[tenantName(k)] = regions[k%len(regions)]
	}
	var srs []standin.Region
	for _, r := range regions {
		srs = append(srs, standin.Region{Name: r, Addrs: []string{"127.0.0.1:0"}})
	}
	sc, err := standin.Start(standin.Config{Regions: srs, Tenants: tenants, Items: 1})
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	var spec []string
	for _, r := range regions {
		spec = append(spec, r+"="+sc.URLs(r)[0])
	}

	// 2. Every process, then the cold start.
	key := base64.StdEncoding.EncodeToString([]byte("fleet-gossip-key-0123456789abcde"))
	es := make([]*entry, f.entries)
	for i := range es {
		es[i] = &entry{name: fmt.Sprintf("entry-%03d", i), ip: ipOf(i)}
	}
	join := []string{es[0].gossip()}
	for _, e := range es[1:min(3, len(es))] {
		join = append(join, e.gossip())
	}
	defer stopAll(es)
	begin := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(es))
	for i, e := range es { // at once: one by one, 100 processes took 2 s to start
		wg.Go(func() { errs[i] = e.start(bin, dir, f, strings.Join(spec, ";"), strings.Join(join, ","), key, i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	res.StartSpanS = round(time.Since(begin).Seconds(), 2)
	logf("%d entries started in %.2fs", len(es), res.StartSpanS)
	last := time.Now()
	if err := waitFor(f.formTimeout, func() bool {
		if time.Since(last) > 5*time.Second { // a slow start says who is missing
			last = time.Now()
			logf("after %.0fs: %s", time.Since(begin).Seconds(), aliveCounts(es))
		}
		return allAlive(es, len(es))
	}); err != nil {
		return res, fmt.Errorf("cold start: %w (%s)", err, aliveCounts(es))
	}
	polled := time.Since(begin)
	formed, err := formedAt(es)
	if err != nil {
		return res, err
	}
	res.FormedS = round(formed.Sub(begin).Seconds(), 2)
	logf("every entry lists every other alive %.2fs after the first start, by their logs (seen by polling at %.2fs)",
		res.FormedS, polled.Seconds())

	// 3. Idle.
	if f.idle > 0 {
		time.Sleep(f.idleAfter) // the joins' broadcasts die down: not waiting for anything
		b0, err := bytesOf(es)
		if err != nil {
			return res, err
		}
		c0, i0 := cpuOf(es), time.Now()
		time.Sleep(f.idle) // measuring idle traffic, not waiting for anything
		res.IdleCPU = round((cpuOf(es)-c0)/f.idle.Seconds(), 2)
		b1, err := bytesOf(es)
		if err != nil {
			return res, err
		}
		res.IdlePacket, _, _ = rates(b0, b1, "packet", "sent", f.idle)
		res.IdleStream, _, _ = rates(b0, b1, "stream", "sent", f.idle)
		if res.IdleTags, err = tagChanges(es, i0, time.Now()); err != nil {
			return res, err
		}
		logf("idle: %.0f B/s packets, %.0f B/s streams an entry; %.4f tag changes a second an entry",
			res.IdlePacket, res.IdleStream, res.IdleTags)
	}

	// 4. Homes.
	h0, err := histOf(es)
	if err != nil {
		return res, err
	}
	b0, err := bytesOf(es)
	if err != nil {
		return res, err
	}
	logf("learning %d homes over %v at %.0f/s", homes, f.duration, f.rate)
	t0, c0 := time.Now(), cpuOf(es)
	learned, failed := learn(es, homes, f)
	window := time.Since(t0)
	if res.LearnTags, err = tagChanges(es, t0, t0.Add(window)); err != nil {
		return res, err
	}
	res.LearnCPU = round((cpuOf(es)-c0)/window.Seconds(), 2)
	b1, err := bytesOf(es)
	if err != nil {
		return res, err
	}
	res.Learned, res.Failed = learned, failed
	var busiest int
	res.PacketMean, res.PacketMax, busiest = rates(b0, b1, "packet", "sent", window)
	res.Busiest = es[busiest].name
	res.RecvMean, res.RecvMax, _ = rates(b0, b1, "packet", "received", window)
	res.StreamMean, _, _ = rates(b0, b1, "stream", "sent", window)
	time.Sleep(f.settle) // gossip's stragglers: the histograms are read after
	h1, err := histOf(es)
	if err != nil {
		return res, err
	}
	pairs := h1.Sub(h0)
	res.Pairs = pairs.Count()
	res.PairsShare = round(float64(res.Pairs)/float64(learned*(len(es)-1)), 4)
	res.PairP50ms = round(1000*pairs.Quantile(0.50), 1)
	res.PairP99ms = round(1000*pairs.Quantile(0.99), 1)
	logf("the entries used %.2f CPUs idle, %.2f while learning; %.4f tag changes a second an entry while learning",
		res.IdleCPU, res.LearnCPU, res.LearnTags)
	logf("%d homes learned (%d requests failed); pairs by gossip %.2f%%, p50 %.0f ms, p99 %.0f ms; %.0f B/s an entry sent (most %.0f, %s)",
		learned, failed, 100*res.PairsShare, res.PairP50ms, res.PairP99ms, res.PacketMean, res.PacketMax, res.Busiest)

	// 5. Failure detection.
	if f.failDetect > 0 {
		v := es[len(es)-1]
		if err := v.cmd.Process.Signal(sigStop); err != nil {
			return res, err
		}
		t := time.Now()
		err := waitFor(f.failDetect, func() bool { return allSeeFailed(es[:len(es)-1]) })
		v.cmd.Process.Signal(sigCont)
		if err != nil {
			return res, fmt.Errorf("%s stopped: not listed failed by every peer: %w", v.name, err)
		}
		res.FailDetectS = round(time.Since(t).Seconds(), 2)
		logf("%s stopped: every peer lists it failed after %.2fs", v.name, res.FailDetectS)
	}
	return res, nil
}

// binary is bin, or a lab build of ./cmd/fenec-entry made in dir; either way a lab build.
func binary(bin, dir string) (string, error) {
	if bin == "" {
		bin = filepath.Join(dir, "fenec-entry")
		logf("building %s (go build -tags lab)", bin)
		out, err := exec.Command("go", "build", "-tags", "lab", "-o", bin, "github.com/fenec/fenec-entry/cmd/fenec-entry").CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("-bin %s: %w", bin, err)
	}
	for _, s := range bi.Settings {
		if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), "lab") {
			return bin, nil
		}
	}
	return "", fmt.Errorf("-bin %s: not a lab build (go build -tags lab): its gossip would not take -latency and -loss", bin)
}

func (e *entry) start(bin, dir string, f flags, routers, join, key string, i int) error {
	log, err := os.Create(filepath.Join(dir, e.name+".log"))
	if err != nil {
		return err
	}
	e.log = log
	args := []string{"serve", "--node", e.name, "--pop", fmt.Sprintf("p%03d", i), "--routers", routers,
		"--listen", e.client(), "--admin-listen", e.admin(), "--gossip-bind", e.gossip(), "--rpc-addr", e.ip + ":7373",
		"--gossip-key", key, "--log-level", "info"} // info: each member event, for formedAt
	if i > 0 {
		args = append(args, "--join", join)
	}
	e.cmd = exec.Command(bin, args...)
	e.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), fmt.Sprintf("GOMAXPROCS=%d", f.gomaxprocs),
		"FENEC_LAB_LATENCY=" + f.latency, fmt.Sprintf("FENEC_LAB_LOSS=%g", f.loss)}
	e.cmd.Stdout, e.cmd.Stderr = log, log
	return e.cmd.Start()
}

func stopAll(es []*entry) {
	for _, e := range es {
		if e.cmd != nil && e.cmd.Process != nil {
			e.cmd.Process.Signal(sigCont)
			e.cmd.Process.Kill()
		}
	}
	for _, e := range es {
		if e.cmd != nil && e.cmd.Process != nil {
			e.cmd.Wait()
			e.log.Close()
		}
	}
}

// learn teaches the fleet homes new homes at rate, each by a request for a new tenant at a
// random entry: its router answers with the tenant's home, which the entry learns and
// gossips. It returns the requests a router answered and those that failed.
func learn(es []*entry, homes int, f flags) (learned, failed int) {
	rng := rand.New(rand.NewPCG(f.seed, 0x666c656574))
	tr := &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var ok, bad atomic.Int64
	var wg sync.WaitGroup
	slots := make(chan struct{}, f.maxRequests)
	t0 := time.Now()
	for k := range homes {
		time.Sleep(time.Until(t0.Add(time.Duration(float64(k) / f.rate * float64(time.Second)))))
		e := es[rng.IntN(len(es))]
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			resp, err := c.Get("http://" + e.client() + "/t/" + tenantName(k) + "/items/1")
			if err != nil {
				bad.Add(1)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				bad.Add(1)
				return
			}
			ok.Add(1)
		})
	}
	wg.Wait()
	return int(ok.Load()), int(bad.Load())
}

func tenantName(k int) string { return fmt.Sprintf("fleet-%06d", k) }

var httpc = &http.Client{Timeout: 5 * time.Second}

// scrape reads an entry's /metrics.
func scrape(e *entry) ([]*dto.MetricFamily, error) {
	resp, err := httpc.Get("http://" + e.admin() + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s /metrics: %s", e.name, resp.Status)
	}
	return promhist.Parse(resp.Body)
}

// gauge is the sum of name's series whose labels include every (name, value) pair given.
func gauge(mfs []*dto.MetricFamily, name string, labels ...string) float64 {
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for k := 0; k+1 < len(labels); k += 2 {
				if !slices.ContainsFunc(m.GetLabel(), func(lp *dto.LabelPair) bool {
					return lp.GetName() == labels[k] && lp.GetValue() == labels[k+1]
				}) {
					continue series
				}
			}
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}

// alive is how many members e lists alive, itself included; -1 if it does not answer.
func alive(e *entry) int {
	mfs, err := scrape(e)
	if err != nil {
		return -1
	}
	return int(gauge(mfs, "fenec_entry_gossip_members", "state", "alive"))
}

// allAlive polls every entry, a few at a time: one by one, a sweep of 100 took seconds.
func allAlive(es []*entry, n int) bool {
	var missing atomic.Int64
	var wg sync.WaitGroup
	slots := make(chan struct{}, 8)
	for _, e := range es {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if alive(e) != n {
				missing.Add(1)
			}
		})
	}
	wg.Wait()
	return missing.Load() == 0
}

// formedAt is when the last entry came to list every other alive, from the member events
// each logs (their own clocks, this machine's): what polling sees only a sweep late.
func formedAt(es []*entry) (time.Time, error) {
	var last time.Time
	for _, e := range es {
		b, err := os.ReadFile(e.log.Name())
		if err != nil {
			return last, err
		}
		alive := map[string]bool{}
		var full time.Time
		for _, line := range strings.Split(string(b), "\n") {
			var ev struct {
				Message, Event, Member string
				Time                   time.Time
			}
			if json.Unmarshal([]byte(line), &ev) != nil || !strings.HasPrefix(ev.Message, "gossip: member ") || ev.Member == e.name {
				continue
			}
			switch ev.Event {
			case "member-join", "member-update":
				alive[ev.Member] = true
			case "member-leave", "member-failed", "member-reap":
				delete(alive, ev.Member)
				full = time.Time{}
			}
			if len(alive) == len(es)-1 && full.IsZero() {
				full = ev.Time
			}
		}
		if full.IsZero() {
			return last, fmt.Errorf("%s: its log does not list every other entry alive (%d of %d)", e.name, len(alive), len(es)-1)
		}
		if full.After(last) {
			last = full
		}
	}
	return last, nil
}

// tagChanges is how many times a second an entry changed its tags between from and to, by
// the member updates its peers logged (serf's member-update: tags changed): each change is
// logged once by every other entry.
func tagChanges(es []*entry, from, to time.Time) (float64, error) {
	var updates int
	for _, e := range es {
		b, err := os.ReadFile(e.log.Name())
		if err != nil {
			return 0, err
		}
		updates += countUpdates(b, e.name, from, to)
	}
	if len(es) < 2 || !to.After(from) {
		return 0, nil
	}
	return round(float64(updates)/float64(len(es)-1)/float64(len(es))/to.Sub(from).Seconds(), 4), nil
}

// countUpdates is the member updates of others in one entry's log (self: its name) logged
// in [from, to).
func countUpdates(log []byte, self string, from, to time.Time) int {
	n := 0
	for _, line := range strings.Split(string(log), "\n") {
		if !strings.Contains(line, `"member-update"`) {
			continue
		}
		var ev struct {
			Event, Member string
			Time          time.Time
		}
		if json.Unmarshal([]byte(line), &ev) != nil || ev.Event != "member-update" || ev.Member == self {
			continue
		}
		if !ev.Time.Before(from) && ev.Time.Before(to) {
			n++
		}
	}
	return n
}

func aliveCounts(es []*entry) string {
	var out []string
	for _, e := range es {
		if a := alive(e); a == -1 {
			// Not answering: say why (an address in use, a bad flag), from its scrape and the
			// last line it wrote, rather than a count of -1.
			_, err := scrape(e)
			out = append(out, fmt.Sprintf("%s does not answer (%v; its last line: %s)", e.name, err, lastLine(e)))
		} else if a != len(es) {
			out = append(out, fmt.Sprintf("%s lists %d alive", e.name, a))
		}
		if len(out) == 5 {
			break
		}
	}
	return strings.Join(out, ", ")
}

// lastLine is the last line e wrote to its log, or what stopped it being read.
func lastLine(e *entry) string {
	b, err := os.ReadFile(e.log.Name())
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if last := lines[len(lines)-1]; last != "" {
		return last
	}
	return "(none)"
}

func allSeeFailed(es []*entry) bool {
	for _, e := range es {
		mfs, err := scrape(e)
		if err != nil || gauge(mfs, "fenec_entry_gossip_members", "state", "failed") < 1 {
			return false
		}
	}
	return true
}

// counters is each entry's fenec_entry_gossip_bytes_total, by "transport/dir".
type counters []map[string]float64

func bytesOf(es []*entry) (counters, error) {
	out := make(counters, len(es))
	for i, e := range es {
		mfs, err := scrape(e)
		if err != nil {
			return nil, err
		}
		out[i] = map[string]float64{}
		for _, tr := range []string{"packet", "stream"} {
			for _, dir := range []string{"sent", "received"} {
				out[i][tr+"/"+dir] = gauge(mfs, "fenec_entry_gossip_bytes_total", "transport", tr, "dir", dir)
			}
		}
	}
	return out, nil
}

// rates are the mean and the most of an entry's bytes a second of transport/dir between two
// readings, and the index of the entry with the most.
func rates(b0, b1 counters, transport, dir string, d time.Duration) (mean, most float64, at int) {
	k := transport + "/" + dir
	for i := range b1 {
		r := (b1[i][k] - b0[i][k]) / d.Seconds()
		mean += r / float64(len(b1))
		if r > most {
			most, at = r, i
		}
	}
	return round(mean, 0), round(most, 0), at
}

// histOf is the fleet's propagation histogram, clock="origin", summed over every entry.
func histOf(es []*entry) (promhist.Hist, error) {
	var sum promhist.Hist
	for _, e := range es {
		mfs, err := scrape(e)
		if err != nil {
			return sum, err
		}
		h, err := promhist.FromFamilies(mfs, "fenec_entry_gossip_propagation_seconds", "clock", "origin")
		if err != nil {
			return sum, err
		}
		if sum, err = sum.Add(h); err != nil {
			return sum, err
		}
	}
	return sum, nil
}

func waitFor(within time.Duration, ok func() bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		if ok() {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("not within " + within.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func round(x float64, digits int) float64 {
	if math.IsNaN(x) {
		return -1
	}
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// cpuOf is the CPU seconds the entries' processes have used (Linux's /proc; 0 elsewhere).
func cpuOf(es []*entry) float64 {
	var ticks float64
	for _, e := range es {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", e.cmd.Process.Pid))
		if err != nil {
			continue
		}
		// After the command's name, in parentheses: state is field 3, utime and stime 14 and 15.
		i := strings.LastIndexByte(string(b), ')')
		fs := strings.Fields(string(b[i+1:]))
		if len(fs) < 13 {
			continue
		}
		u, _ := strconv.ParseFloat(fs[11], 64)
		st, _ := strconv.ParseFloat(fs[12], 64)
		ticks += u + st
	}
	return ticks / 100 // USER_HZ, 100 on every Linux this runs on
}
