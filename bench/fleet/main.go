// Command fleet runs a fleet of real fenec-entry processes on this machine, each in a site of
// the lab's WAN (lab/wan: a network namespace with one address; every packet between two
// sites waits the pair's one-way delay and is lost at the pair's loss), and measures their
// gossip, to hold bench/gossipsim (the same code in one process, on gossip/memnet) to what
// processes do:
//
//  1. stand-in routers for three regions (one fenec-standin) in a site of their own, linked
//     to every entry without delay or loss (learning is not measured);
//  2. -entries processes, one a site, GOMAXPROCS=1, every one joined to the first three and
//     all started within about a second: the time until every entry lists every other alive
//     is the cold start. Between two entries the delay is drawn once a pair, uniformly from
//     -latency (gossipsim draws it a packet), and -loss is lost each way;
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
// Requests and scrapes are made inside each entry's own site, on its loopback: no
// measurement crosses the WAN but the fleet's gossip. Needs root and Linux (lab/README.md).
// It prints one JSON line on stdout; progress goes to stderr.
//
//	go run ./bench/fleet -entries 100 -rate 10 -duration 30s
//	go run ./bench/gossipsim -nodes 100 -rate 10 -duration 30s        # the same, simulated
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"net"
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
	"github.com/fenec/fenec-entry/lab/wan"
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
	WANCPU      float64 `json:"wan_cpu_cores"`           // this process (the emulator and the clients) while learning
	WANDropped  uint64  `json:"wan_dropped"`             // packets the emulator dropped for a full queue or a failed write: 0, or it did not hold
	FailDetectS float64 `json:"fail_detect_s,omitempty"` // SIGSTOP to every other entry listing it failed
}

func main() {
	var f flags
	flag.StringVar(&f.bin, "bin", "", "a directory holding fenec-entry and fenec-standin; empty: built here")
	flag.IntVar(&f.entries, "entries", 100, "entries, one process and one site each")
	flag.Float64Var(&f.rate, "rate", 50, "new homes a second, fleet-wide, each learned at a random entry")
	flag.DurationVar(&f.duration, "duration", 20*time.Second, "how long homes are learned")
	flag.StringVar(&f.latency, "latency", "10ms,150ms", "one-way latency between two entries, min,max (uniform, drawn once a pair; gossipsim's default)")
	flag.Float64Var(&f.loss, "loss", 0.01, "packet loss between two entries, each way (gossipsim's default)")
	flag.Uint64Var(&f.seed, "seed", 1, "seed of the pairs' latencies and losses and of the learning entries")
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

// maxEntries is what the WAN's addresses and names hold, less the routers' site.
const maxEntries = 249

func check(f flags) error {
	switch {
	case f.entries < 2 || f.entries > maxEntries:
		return fmt.Errorf("-entries %d: want 2 to %d", f.entries, maxEntries)
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
	if _, _, err := latencies(f.latency); err != nil {
		return err
	}
	return nil
}

// latencies parses -latency.
func latencies(s string) (lo, hi time.Duration, err error) {
	a, b, ok := strings.Cut(s, ",")
	lo, err1 := time.ParseDuration(a)
	hi, err2 := time.ParseDuration(b)
	if !ok || err1 != nil || err2 != nil || lo < 0 || hi < lo {
		return 0, 0, fmt.Errorf("-latency %q: want min,max durations, 0 <= min <= max", s)
	}
	return lo, hi, nil
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "fleet: "+format+"\n", args...) }

// routerSite is the stand-in routers' site; the entries' are named by entryName.
const routerSite = "rt"

func entryName(i int) string { return fmt.Sprintf("e%03d", i) }

// links is the WAN of f: routers to entries at no cost; between two entries a delay drawn
// once for the pair (the same both ways) and f.loss each way.
func links(f flags) func(from, to string) wan.Link {
	lo, hi, _ := latencies(f.latency)
	return func(from, to string) wan.Link {
		if from == routerSite || to == routerSite {
			return wan.Link{}
		}
		h := fnv.New64a()
		h.Write([]byte(min(from, to) + "-" + max(from, to)))
		rng := rand.New(rand.NewPCG(f.seed, h.Sum64()))
		return wan.Link{Delay: lo + time.Duration(rng.Int64N(int64(hi-lo)+1)), Loss: f.loss}
	}
}

// entry is one fenec-entry process in its site.
type entry struct {
	name string
	addr string // its site's address: gossip's
	cmd  *exec.Cmd
	log  *os.File
	http *http.Client // makes its connections inside the entry's site
}

// Inside an entry's site, on its loopback: the client listener and the admin listener.
const (
	clientAddr = "127.0.0.1:8080"
	adminAddr  = "127.0.0.1:9091"
)

func (e *entry) gossip() string { return e.addr + ":7946" }

// siteClient is an HTTP client whose connections are made inside site.
func siteClient(emu *wan.Emulator, site string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: nil, MaxIdleConnsPerHost: 4, IdleConnTimeout: 10 * time.Second,
		DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			err = emu.Do(site, func() error {
				c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		}}}
}

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
	bin, err := binaries(f.bin, dir)
	if err != nil {
		return nil, err
	}
	if stale, _ := wan.RemoveStale(); len(stale) > 0 {
		logf("removed %d namespaces of runs that are gone", len(stale))
	}
	sites := []string{routerSite}
	for i := range f.entries {
		sites = append(sites, entryName(i))
	}
	t := time.Now()
	// A pair carries a few packets a second; 64 in flight is ample and keeps ~10,000 lines small.
	emu, err := wan.Start(context.Background(), wan.Config{Sites: sites, Link: links(f), Seed: f.seed, QueueLen: 64})
	if err != nil {
		return nil, err
	}
	defer emu.Close()
	logf("%d sites up in %.1fs", len(sites), time.Since(t).Seconds())

	homes := int(math.Ceil(f.rate * f.duration.Seconds()))
	res.Homes = homes
	regions := []string{"eu", "us", "ap"}
	tenants := make(map[string]string, homes)
	for k := range homes {
		tenants[tenantName(k)] = regions[k%len(regions)]
	}
	rt, err := startRouters(emu, bin, dir, regions, tenants)
	if rt != nil {
		defer func() { rt.Process.Kill(); rt.Wait() }()
	}
	if err != nil {
		return nil, err
	}
	var spec []string
	for i, r := range regions {
		spec = append(spec, fmt.Sprintf("%s=http://%s:%d", r, emu.Addr(routerSite), routerPort+i))
	}

	// 2. Every process, then the cold start.
	key := base64.StdEncoding.EncodeToString([]byte("fleet-gossip-key-0123456789abcde"))
	es := make([]*entry, f.entries)
	for i := range es {
		name := entryName(i)
		es[i] = &entry{name: name, addr: emu.Addr(name).String(), http: siteClient(emu, name)}
	}
	var join []string
	for _, e := range es[:min(3, len(es))] {
		join = append(join, e.gossip())
	}
	defer stopAll(es)
	begin := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(es))
	for i, e := range es { // at once: one by one, 100 processes took 2 s to start
		wg.Go(func() {
			errs[i] = e.start(emu, filepath.Join(bin, "fenec-entry"), dir, f, strings.Join(spec, ";"), strings.Join(join, ","), key, i)
		})
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
	t0, c0, w0 := time.Now(), cpuOf(es), cpuOfPID(os.Getpid())
	learned, failed := learn(es, homes, f)
	window := time.Since(t0)
	if res.LearnTags, err = tagChanges(es, t0, t0.Add(window)); err != nil {
		return res, err
	}
	res.LearnCPU = round((cpuOf(es)-c0)/window.Seconds(), 2)
	res.WANCPU = round((cpuOfPID(os.Getpid())-w0)/window.Seconds(), 2)
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
	for _, p := range emu.Stats().Pairs {
		res.WANDropped += p.Overflow + p.Failed
	}
	logf("the entries used %.2f CPUs idle, %.2f while learning (this process %.2f); %.4f tag changes a second an entry while learning",
		res.IdleCPU, res.LearnCPU, res.WANCPU, res.LearnTags)
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

// binaries is bin, or dir with fenec-entry and fenec-standin built into it.
func binaries(bin, dir string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	logf("building fenec-entry and fenec-standin in %s", dir)
	out, err := exec.Command("go", "build", "-o", dir, "github.com/fenec/fenec-entry/cmd/fenec-entry",
		"github.com/fenec/fenec-entry/cmd/fenec-standin").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return dir, nil
}

// routerPort is the first region's router port in the routers' site; the others follow.
const routerPort = 7101

// startRouters runs one fenec-standin with a router for each region in the routers' site
// (their relays to each other stay in the site), and waits until they answer. The caller
// stops the process it returns.
func startRouters(emu *wan.Emulator, bin, dir string, regions []string, tenants map[string]string) (*exec.Cmd, error) {
	var dirLines []string
	for t, r := range tenants {
		dirLines = append(dirLines, t+"="+r)
	}
	file := filepath.Join(dir, "tenants")
	if err := os.WriteFile(file, []byte(strings.Join(dirLines, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	args := []string{"--tenants", "@" + file, "--items", "1", "--log-level", "warn"}
	for i, r := range regions {
		args = append(args, "--region", fmt.Sprintf("%s=%s:%d", r, emu.Addr(routerSite), routerPort+i))
	}
	log, err := os.Create(filepath.Join(dir, "standin.log"))
	if err != nil {
		return nil, err
	}
	cmd := emu.Command(context.Background(), routerSite, filepath.Join(bin, "fenec-standin"), args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	c := siteClient(emu, routerSite)
	return cmd, waitFor(10*time.Second, func() bool {
		for i := range regions {
			resp, err := c.Get(fmt.Sprintf("http://%s:%d/_standin/health", emu.Addr(routerSite), routerPort+i))
			if err != nil {
				return false
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return false
			}
		}
		return true
	})
}

// start runs the entry in its site (ip netns exec execs it: the process's PID is the entry's).
func (e *entry) start(emu *wan.Emulator, bin, dir string, f flags, routers, join, key string, i int) error {
	log, err := os.Create(filepath.Join(dir, e.name+".log"))
	if err != nil {
		return err
	}
	e.log = log
	args := []string{"serve", "--node", e.name, "--pop", fmt.Sprintf("p%03d", i), "--routers", routers,
		"--listen", clientAddr, "--admin-listen", adminAddr, "--gossip-bind", e.gossip(), "--rpc-addr", "127.0.0.1:7373",
		"--gossip-key", key, "--log-level", "info"} // info: each member event, for formedAt
	if i > 0 {
		args = append(args, "--join", join)
	}
	e.cmd = emu.Command(context.Background(), e.name, bin, args...)
	e.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), fmt.Sprintf("GOMAXPROCS=%d", f.gomaxprocs)}
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
			resp, err := e.http.Get("http://" + clientAddr + "/t/" + tenantName(k) + "/items/1")
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

// scrape reads an entry's /metrics.
func scrape(e *entry) ([]*dto.MetricFamily, error) {
	resp, err := e.http.Get("http://" + adminAddr + "/metrics")
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

// memberEvent is a member event an entry logged (gossip: member ...).
type memberEvent struct {
	Message, Event, Member string
	Time                   time.Time
}

// memberEvents are the member events of others in one entry's log (self: its name).
func memberEvents(log []byte, self string) []memberEvent {
	var out []memberEvent
	for _, line := range strings.Split(string(log), "\n") {
		var ev memberEvent
		if json.Unmarshal([]byte(line), &ev) == nil && strings.HasPrefix(ev.Message, "gossip: member ") && ev.Member != self {
			out = append(out, ev)
		}
	}
	return out
}

// eventsOf is each entry's memberEvents.
func eventsOf(es []*entry) ([][]memberEvent, error) {
	out := make([][]memberEvent, len(es))
	for i, e := range es {
		b, err := os.ReadFile(e.log.Name())
		if err != nil {
			return nil, err
		}
		out[i] = memberEvents(b, e.name)
	}
	return out, nil
}

// formedAt is when the last entry came to list every other alive, from the member events
// each logs (their own clocks, this machine's): what polling sees only a sweep late.
func formedAt(es []*entry) (time.Time, error) {
	evs, err := eventsOf(es)
	if err != nil {
		return time.Time{}, err
	}
	var last time.Time
	for i, e := range es {
		alive := map[string]bool{}
		var full time.Time
		for _, ev := range evs[i] {
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
	evs, err := eventsOf(es)
	if err != nil || len(es) < 2 || !to.After(from) {
		return 0, err
	}
	updates := 0
	for _, e := range evs {
		updates += countUpdates(e, from, to)
	}
	return round(float64(updates)/float64(len(es)-1)/float64(len(es))/to.Sub(from).Seconds(), 4), nil
}

// countUpdates is the member updates among evs logged in [from, to).
func countUpdates(evs []memberEvent, from, to time.Time) int {
	n := 0
	for _, ev := range evs {
		if ev.Event == "member-update" && !ev.Time.Before(from) && ev.Time.Before(to) {
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

// cpuOf is the CPU seconds the entries' processes have used.
func cpuOf(es []*entry) float64 {
	var sum float64
	for _, e := range es {
		sum += cpuOfPID(e.cmd.Process.Pid)
	}
	return sum
}

// cpuOfPID is the CPU seconds process pid has used (Linux's /proc; 0 if unreadable).
func cpuOfPID(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// After the command's name, in parentheses: state is field 3, utime and stime 14 and 15.
	i := strings.LastIndexByte(string(b), ')')
	fs := strings.Fields(string(b[i+1:]))
	if len(fs) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(fs[11], 64)
	st, _ := strconv.ParseFloat(fs[12], 64)
	return (u + st) / 100 // USER_HZ, 100 on every Linux this runs on
}
