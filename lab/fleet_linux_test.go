//go:build linux

package lab

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/lab/wan"
)

// The fleet: a stand-in per region site (two routers on the site's address), an entry per PoP
// site. Clients run in the PoP sites (Emulator.Do), against their own PoP's entry; the test
// reads the entries' admin listeners (127.0.0.1 in each PoP site) and the stand-ins' admin API
// from inside the sites too, so that no measurement crosses the WAN but the fleet's own.
const (
	entryPort   = 8080
	gossipPort  = 7946
	adminListen = "127.0.0.1:9091"
	// The continents the entries map: EU and AS only. NA (sfo) and OC (syd) are left out, so
	// that a tenant heard nowhere from there goes to the region the entry measured nearest.
	continents = "EU=eu,AS=ap"
	// answerTimeout replaces the entry's 35 s (kept above a held write's 30 s; the lab holds
	// none): a request sent on a pooled connection into a cut region waits this long for an
	// answer head before the entry tries another region.
	answerTimeout = "5s"
)

var (
	routerPorts  = []int{7101, 7102}
	popContinent = map[string]string{"fra": "EU", "sfo": "NA", "nrt": "AS", "syd": "OC"}
	mapped       = map[string]string{"EU": "eu", "AS": "ap"}
)

// size is how much a run does.
type size struct {
	name     string
	unheard  int           // tenants heard nowhere each PoP asks for, one at a time fleet-wide
	heard    int           // requests each PoP makes for tenants already heard
	cut      int           // requests from the cut PoP to tenants of the cut region
	deadline time.Duration // the whole test
}

var (
	short = size{name: "short", unheard: 4, heard: 24, cut: 5, deadline: 150 * time.Second}
	full  = size{name: "full", unheard: 25, heard: 150, cut: 20, deadline: 10 * time.Minute}
)

// needRoot skips the test without root, or fails it when CI is set (as lab/wan's tests do).
func needRoot(t *testing.T) {
	t.Helper()
	missing := wan.Missing()
	if missing == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("the lab's fleet test needs %s, and CI is set: run it as root on Linux", missing)
	}
	t.Skipf("needs %s; run as root (make lab)", missing)
}

// TestFleet runs the whole system across the WAN and prints one table of what it measured.
// FENEC_LAB=full (make lab) runs the full version; the default is the short one, which `go
// test ./lab/...` runs.
func TestFleet(t *testing.T) {
	needRoot(t)
	sz := short
	if os.Getenv("FENEC_LAB") == "full" {
		sz = full
	}
	ctx, cancel := context.WithTimeout(context.Background(), sz.deadline)
	defer cancel()
	began := time.Now()

	bin := buildBinaries(t, ctx)
	built := time.Since(began)

	e, err := wan.Start(ctx, wan.Config{Sites: wan.Sites(), Seed: uint64(time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		st := e.Stats()
		var delivered, lost, overflow uint64
		for _, p := range st.Pairs {
			delivered += p.Delivered
			lost += p.Lost
			overflow += p.Overflow
		}
		t.Logf("emulator: %d packets delivered, %d lost, %d overflowed, %d unroutable", delivered, lost, overflow, st.Unroutable)
		if err := e.Close(); err != nil {
			t.Errorf("emulator close: %v", err)
		}
	})
	f := startFleet(t, ctx, e, bin, sz)
	ready := time.Since(began)

	var r report
	r.size = sz
	f.unheard(t, ctx, &r)
	f.relayShare(t, ctx, &r)
	if r.histP50, r.histP99, r.histCount, err = f.histogram(ctx); err != nil {
		t.Errorf("gossip histogram: %v", err)
	}
	f.freeze(t, ctx, &r, "syd")
	f.cut(t, ctx, &r, "fra", "eu")

	r.built, r.ready, r.total = built, ready, time.Since(began)
	t.Logf("fleet across the WAN (%s run)\n%s", sz.name, r.table())
}

// buildBinaries builds fenec-entry and fenec-standin into a temporary directory.
func buildBinaries(t *testing.T, ctx context.Context) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, "go", "build", "-pgo=off", "-o", dir+string(filepath.Separator),
		"./cmd/fenec-entry", "./cmd/fenec-standin")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// site is a site's HTTP client: its connections are made inside the site.
type site struct {
	name   string
	addr   string
	client *http.Client
}

func newSite(e *wan.Emulator, name string) *site {
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := e.Do(name, func() error {
				var err error
				c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
		MaxIdleConnsPerHost: 32,
		DisableCompression:  true,
	}
	return &site{name: name, addr: e.Addr(name).String(), client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// getJSON GETs url from the site and decodes its JSON answer into v.
func (s *site) getJSON(ctx context.Context, url string, v any) error {
	b, code, err := s.get(ctx, url)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d", url, code)
	}
	return json.Unmarshal(b, v)
}

func (s *site) get(ctx context.Context, url string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

// proc is a program the test started in a site, stopped by its cleanup.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// start runs name in site (ip netns exec execs it: the process's PID is the program's), its
// output to a file; t's cleanup stops it by PID (SIGCONT, SIGTERM, then SIGKILL after 5 s)
// and waits for it.
func start(t *testing.T, ctx context.Context, e *wan.Emulator, dir, site string, env []string, name string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(dir, filepath.Base(name)+"-"+site+".log")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := e.Command(ctx, site, name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(cleanEnv(), env...)
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("start %s in %s: %v", name, site, err)
	}
	p := &proc{name: filepath.Base(name) + "@" + site, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-p.done
			}
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s log (tail):\n%s", p.name, b)
		}
	})
	return p
}

// cleanEnv is the environment without FENEC_* variables, which would configure the programs.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FENEC_") {
			env = append(env, kv)
		}
	}
	return env
}

type fleet struct {
	e       *wan.Emulator
	sz      size
	sites   map[string]*site
	entries map[string]*proc
	tenants []string          // in the directory, in order
	home    map[string]string // tenant -> home region
	next    int               // the next tenant never asked for
	heard   []string          // tenants asked for, so heard
}

func routerURL(e *wan.Emulator, region string, port int) string {
	return fmt.Sprintf("http://%s:%d", e.Addr(region), port)
}

func regionAddrs(e *wan.Emulator, region string) string {
	var a []string
	for _, p := range routerPorts {
		a = append(a, fmt.Sprintf("%s:%d", e.Addr(region), p))
	}
	return strings.Join(a, ",")
}

func (f *fleet) entryURL(pop string) string {
	return fmt.Sprintf("http://%s:%d", f.e.Addr(pop), entryPort)
}

// startFleet starts the stand-ins and the entries and waits until every entry lists every
// other alive and has measured every region.
func startFleet(t *testing.T, ctx context.Context, e *wan.Emulator, bin string, sz size) *fleet {
	f := &fleet{e: e, sz: sz, sites: map[string]*site{}, entries: map[string]*proc{}, home: map[string]string{}}
	for _, s := range wan.Sites() {
		f.sites[s] = newSite(e, s)
	}
	t.Cleanup(func() { // after the processes stop (cleanups run last first), before the emulator closes
		for _, s := range f.sites {
			s.client.CloseIdleConnections()
		}
	})
	dir := t.TempDir()
	n := 4*sz.unheard + 8
	var lines []string
	for i := range n {
		name := fmt.Sprintf("lab%04d", i)
		home := wan.Regions[i%len(wan.Regions)]
		f.tenants = append(f.tenants, name)
		f.home[name] = home
		lines = append(lines, name+"="+home)
	}
	tenantsFile := filepath.Join(dir, "tenants")
	if err := os.WriteFile(tenantsFile, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	token := randomB64(t, 24)
	key := randomB64(t, 32)

	for _, region := range wan.Regions {
		args := []string{"--region", region + "=" + regionAddrs(e, region)}
		for _, other := range wan.Regions {
			if other != region {
				args = append(args, "--remote-region", other+"="+regionAddrs(e, other))
			}
		}
		args = append(args, "--tenants", "@"+tenantsFile, "--items", "1", "--log-level", "warn")
		start(t, ctx, e, dir, region, []string{"FENEC_STANDIN_ENTRY_TOKEN=" + token}, filepath.Join(bin, "fenec-standin"), args...)
	}
	for _, region := range wan.Regions {
		s := f.sites[region]
		waitFor(t, ctx, 20*time.Second, "stand-in "+region+" serving", func() bool {
			_, code, err := s.get(ctx, routerURL(e, region, routerPorts[len(routerPorts)-1])+"/_standin/health")
			return err == nil && code == 200
		})
	}

	var routers []string
	for _, region := range wan.Regions {
		var urls []string
		for _, p := range routerPorts {
			urls = append(urls, routerURL(e, region, p))
		}
		routers = append(routers, region+"="+strings.Join(urls, ","))
	}
	for _, pop := range wan.PoPs {
		var join []string
		for _, other := range wan.PoPs {
			if other != pop {
				join = append(join, fmt.Sprintf("%s:%d", e.Addr(other), gossipPort))
			}
		}
		addr := e.Addr(pop).String()
		f.entries[pop] = start(t, ctx, e, dir, pop,
			[]string{"FENEC_ENTRY_GOSSIP_KEY=" + key, "FENEC_ENTRY_ENTRY_TOKEN=" + token},
			filepath.Join(bin, "fenec-entry"), "serve",
			"--listen", fmt.Sprintf("%s:%d", addr, entryPort),
			"--admin-listen", adminListen,
			"--routers", strings.Join(routers, ";"),
			"--gossip-bind", fmt.Sprintf("%s:%d", addr, gossipPort),
			"--join", strings.Join(join, ","),
			"--node", pop, "--pop", pop,
			"--continent", popContinent[pop], "--continents", continents,
			"--answer-timeout", answerTimeout,
			"--drain", "1s", "--log-level", "warn")
	}
	for _, pop := range wan.PoPs {
		waitFor(t, ctx, 45*time.Second, pop+": every member alive, every region measured", func() bool {
			st, err := f.status(ctx, pop)
			if err != nil {
				return false
			}
			alive := 0
			for _, m := range st.Members {
				if m.State == "alive" {
					alive++
				}
			}
			for _, r := range st.Regions {
				if !r.Measured {
					return false
				}
			}
			return alive == len(wan.PoPs)
		})
	}
	return f
}

func randomB64(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// waitFor polls cond every 20 ms until it holds, failing t after d (or the test's deadline).
func waitFor(t *testing.T, ctx context.Context, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	deadline := t0.Add(d)
	for {
		if cond() {
			return time.Since(t0)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waited %v for %s", time.Since(t0).Round(time.Millisecond), what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// entryStatus is the part of /status.json the lab reads.
type entryStatus struct {
	Closest string `json:"closest_region"`
	Regions []struct {
		Name      string  `json:"name"`
		LatencyMS float64 `json:"latency_ms"`
		Measured  bool    `json:"latency_measured"`
		Marked    bool    `json:"marked"`
		ForReads  bool    `json:"marked_for_reads"`
		Unreach   bool    `json:"unreachable_from_here"`
	} `json:"regions"`
	Homes struct {
		Held   int    `json:"held"`
		Digest string `json:"digest"`
	} `json:"homes"`
	Members []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"members"`
}

func (f *fleet) status(ctx context.Context, pop string) (entryStatus, error) {
	var st entryStatus
	err := f.sites[pop].getJSON(ctx, "http://"+adminListen+"/status.json", &st)
	return st, err
}

func (st entryStatus) member(name string) string {
	for _, m := range st.Members {
		if m.Name == name {
			return m.State
		}
	}
	return ""
}

func (st entryStatus) region(name string) (marked bool, latency float64) {
	for _, r := range st.Regions {
		if r.Name == name {
			return r.Marked || r.ForReads, r.LatencyMS
		}
	}
	return false, 0
}

// unreachable reports whether the entry shows region unreachable from here.
func (st entryStatus) unreachable(name string) bool {
	for _, r := range st.Regions {
		if r.Name == name {
			return r.Unreach
		}
	}
	return false
}

// ask sends GET /t/<tenant>/items/1 to pop's entry from a client in pop.
func (f *fleet) ask(ctx context.Context, pop, tenant string) (int, time.Duration, error) {
	t0 := time.Now()
	_, code, err := f.sites[pop].get(ctx, f.entryURL(pop)+"/t/"+tenant+"/items/1")
	return code, time.Since(t0), err
}

// seen is the part of a stand-in's /_standin/seen record the lab reads.
type seen struct {
	Seq     uint64    `json:"seq"`
	Region  string    `json:"region"`
	Tenant  string    `json:"tenant"`
	From    string    `json:"from"`
	Relayed bool      `json:"relayed"`
	Status  int       `json:"status"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
}

// seenSince returns each region's records after since[region] (all three stand-ins).
func (f *fleet) seenSince(ctx context.Context, since map[string]uint64) (map[string][]seen, error) {
	out := map[string][]seen{}
	for _, region := range wan.Regions {
		var recs []seen
		url := fmt.Sprintf("%s/_standin/seen?since=%d", routerURL(f.e, region, routerPorts[0]), since[region])
		if err := f.sites[region].getJSON(ctx, url, &recs); err != nil {
			return nil, err
		}
		out[region] = recs
	}
	return out, nil
}

// watermark returns each stand-in's newest seq.
func (f *fleet) watermark(t *testing.T, ctx context.Context) map[string]uint64 {
	all, err := f.seenSince(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := map[string]uint64{}
	for region, recs := range all {
		for _, r := range recs {
			w[region] = max(w[region], r.Seq)
		}
	}
	return w
}

// nearest is the region with the shortest round trip from pop by the matrix.
func nearest(pop string) string {
	best, bestRTT := "", time.Duration(math.MaxInt64)
	for _, r := range wan.Regions {
		if d, _ := wan.RTT(pop, r); d < bestRTT {
			best, bestRTT = r, d
		}
	}
	return best
}

// unheard asks each PoP in turn for a tenant heard nowhere, one request in the fleet at a
// time; it records the region the entry asked first (the stand-ins' records: the earliest
// request from outside for the tenant) and how long the home took to reach every other entry
// (their /status.json homes.held, polled every 10 ms from the moment the client had its
// answer, which is when the origin learned the home).
func (f *fleet) unheard(t *testing.T, ctx context.Context, r *report) {
	since := f.watermark(t, ctx)
	asked := map[string][]string{} // pop -> tenants
	for range f.sz.unheard {
		for _, pop := range wan.PoPs {
			tenant := f.tenants[f.next]
			f.next++
			others := slices.DeleteFunc(slices.Clone(wan.PoPs), func(p string) bool { return p == pop })
			before := map[string]int{}
			for _, o := range others {
				st, err := f.status(ctx, o)
				if err != nil {
					t.Fatal(err)
				}
				before[o] = st.Homes.Held
			}
			code, took, err := f.ask(ctx, pop, tenant)
			answered := time.Now()
			if err != nil || code != 200 {
				t.Fatalf("%s: GET for %s (home %s): %d %v", pop, tenant, f.home[tenant], code, err)
			}
			r.unheardLatency = append(r.unheardLatency, took)
			asked[pop] = append(asked[pop], tenant)
			f.heard = append(f.heard, tenant)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var slowest time.Duration
			for _, o := range others {
				wg.Go(func() {
					for time.Since(answered) < 10*time.Second && ctx.Err() == nil {
						st, err := f.status(ctx, o)
						if err == nil && st.Homes.Held > before[o] {
							d := time.Since(answered)
							mu.Lock()
							slowest = max(slowest, d)
							r.toEach = append(r.toEach, d)
							mu.Unlock()
							return
						}
						time.Sleep(10 * time.Millisecond)
					}
					mu.Lock()
					r.gossipMissed++
					mu.Unlock()
				})
			}
			wg.Wait()
			r.toEvery = append(r.toEvery, slowest)
		}
	}
	recs := f.settled(t, ctx, since)
	first := map[string]seen{}
	for _, rs := range recs {
		for _, s := range rs {
			if s.From != "" {
				continue
			}
			if old, ok := first[s.Tenant]; !ok || s.Start.Before(old.Start) {
				first[s.Tenant] = s
			}
		}
	}
	for _, pop := range wan.PoPs {
		row := firstRow{pop: pop, continent: popContinent[pop], nearest: nearest(pop), got: map[string]int{}}
		row.expected = row.nearest
		if m, ok := mapped[row.continent]; ok {
			row.rule, row.expected = "continent map", m
		} else {
			row.rule = "latency"
		}
		st, err := f.status(ctx, pop)
		if err != nil {
			t.Fatal(err)
		}
		row.closest = st.Closest
		for _, tenant := range asked[pop] {
			s, ok := first[tenant]
			if !ok {
				row.got["none"]++
				continue
			}
			row.got[s.Region]++
			row.total++
			if s.Region == row.nearest {
				row.hits++
			}
		}
		r.first = append(r.first, row)
		if row.rule == "latency" && row.hits != row.total {
			t.Errorf("%s (unmapped %s): first region asked %v, want %s every time", pop, row.continent, row.got, row.nearest)
		}
	}
	if r.gossipMissed > 0 {
		t.Errorf("%d homes did not reach an entry within 10 s", r.gossipMissed)
	}
}

// settled returns the stand-ins' records after since, once every one of them is complete.
func (f *fleet) settled(t *testing.T, ctx context.Context, since map[string]uint64) map[string][]seen {
	var recs map[string][]seen
	waitFor(t, ctx, 10*time.Second, "the stand-ins' records complete", func() bool {
		var err error
		recs, err = f.seenSince(ctx, since)
		if err != nil {
			return false
		}
		for _, rs := range recs {
			for _, s := range rs {
				if s.End.IsZero() {
					return false
				}
			}
		}
		return true
	})
	return recs
}

// relayShare waits until every entry holds the same homes, then has each PoP ask for tenants
// already heard, all PoPs at once, and counts the requests from entries that a router relayed
// to another region.
func (f *fleet) relayShare(t *testing.T, ctx context.Context, r *report) {
	waitFor(t, ctx, 15*time.Second, "every entry's home table the same", func() bool {
		digests := map[string]bool{}
		for _, pop := range wan.PoPs {
			st, err := f.status(ctx, pop)
			if err != nil || st.Homes.Held < len(f.heard) {
				return false
			}
			digests[st.Homes.Digest] = true
		}
		return len(digests) == 1
	})
	since := f.watermark(t, ctx)
	heard := map[string]bool{}
	for _, tn := range f.heard {
		heard[tn] = true
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for pi, pop := range wan.PoPs {
		wg.Go(func() {
			for i := range f.sz.heard {
				tenant := f.heard[(pi*7+i)%len(f.heard)]
				code, took, err := f.ask(ctx, pop, tenant)
				mu.Lock()
				r.heardAsked++
				if err != nil || code != 200 {
					r.heardFailed++
				} else {
					r.heardLatency = append(r.heardLatency, took)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, rs := range f.settled(t, ctx, since) {
		for _, s := range rs {
			if s.From != "" || !heard[s.Tenant] {
				continue
			}
			r.heardSeen++
			if s.Relayed {
				r.heardRelayed++
			}
		}
	}
	if r.heardFailed > 0 {
		t.Errorf("%d of %d requests for heard tenants failed", r.heardFailed, r.heardAsked)
	}
}

// freeze stops pop's entry (SIGSTOP) and times how long each other entry takes to list it
// failed in /status.json, then resumes it and times its return to alive everywhere.
func (f *fleet) freeze(t *testing.T, ctx context.Context, r *report, pop string) {
	p := f.entries[pop]
	r.frozen = pop
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	defer resume()
	r.detect = map[string]time.Duration{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, o := range wan.PoPs {
		if o == pop {
			continue
		}
		wg.Go(func() {
			for time.Since(stopped) < 30*time.Second && ctx.Err() == nil {
				if st, err := f.status(ctx, o); err == nil && st.member(pop) == "failed" {
					mu.Lock()
					r.detect[o] = time.Since(stopped)
					mu.Unlock()
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if len(r.detect) != len(wan.PoPs)-1 {
		t.Errorf("frozen %s listed failed by %d of %d entries within 30 s", pop, len(r.detect), len(wan.PoPs)-1)
	}
	resume()
	cont := time.Now()
	for _, o := range wan.PoPs {
		waitFor(t, ctx, 30*time.Second, pop+" alive again at "+o, func() bool {
			st, err := f.status(ctx, o)
			if err != nil {
				return false
			}
			for _, q := range wan.PoPs {
				if st.member(q) != "alive" {
					return false
				}
			}
			return true
		})
	}
	r.rejoin = time.Since(cont)
}

// paidAt is how long a request through the cut takes when it paid a failed attempt into it
// (a dial timeout of 3 s at least, or the answer timeout): one answered through another
// region's router takes a few round trips, well under it.
const paidAt = 2500 * time.Millisecond

// cut drops every packet between pop and region, asks pop for tenants homed in region (heard
// ones, then ones heard nowhere), watches pop's /status.json mark the region and show it
// unreachable from here, has the other PoPs ask for the region's tenants meanwhile (they must
// still ask it first), then mends the link and times until pop asks the region first again.
func (f *fleet) cut(t *testing.T, ctx context.Context, r *report, pop, region string) {
	r.cutPop, r.cutRegion = pop, region
	setLoss := func(p float64) {
		for _, dir := range [][2]string{{pop, region}, {region, pop}} {
			if err := f.e.SetLoss(dir[0], dir[1], p); err != nil {
				t.Error(err)
			}
		}
	}
	setLoss(1)
	mended := false
	defer func() {
		if !mended {
			setLoss(wan.DefaultLoss)
		}
	}()
	cutAt := time.Now()
	markedAt := make(chan time.Duration, 1)
	watch, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		for watch.Err() == nil {
			if st, err := f.status(watch, pop); err == nil {
				if m, _ := st.region(region); m {
					markedAt <- time.Since(cutAt)
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var tenants []string
	for _, tn := range f.heard {
		if f.home[tn] == region {
			tenants = append(tenants, tn)
		}
	}
	for i := range f.sz.cut {
		tenant := tenants[i%len(tenants)]
		if i%2 == 1 && f.next < len(f.tenants) { // every other one heard nowhere (any home)
			tenant = f.tenants[f.next]
			f.next++
		}
		code, took, err := f.ask(ctx, pop, tenant)
		st, serr := f.status(ctx, pop)
		if serr == nil && st.unreachable(region) {
			r.cutUnreachAfter++
		}
		if took >= paidAt {
			r.cutPaid++
		}
		if testing.Verbose() {
			t.Logf("cut: %s asked for %s (home %s): %d %v in %v; %s unreachable from %s after it: %v",
				pop, tenant, f.home[tenant], code, err, took.Round(time.Millisecond), region, pop, st.unreachable(region))
		}
		r.cutAsked++
		if err == nil && code == 200 {
			r.cutAnswered++
			r.cutLatency = append(r.cutLatency, took)
		}
	}
	select {
	case d := <-markedAt:
		r.cutMarked = d
	case <-time.After(10 * time.Second):
		t.Errorf("%s never showed %s marked in /status.json", pop, region)
	}

	// The other PoPs reach the region: they go on asking it first for its tenants.
	since := f.watermark(t, ctx)
	for _, o := range wan.PoPs {
		if o == pop {
			continue
		}
		if st, err := f.status(ctx, o); err == nil && st.unreachable(region) {
			r.cutUnreachAt = append(r.cutUnreachAt, o)
		}
		for k := range 3 {
			if code, _, err := f.ask(ctx, o, tenants[k%len(tenants)]); err != nil || code != 200 {
				t.Errorf("%s, not cut, asked for %s: %d %v", o, tenants[k%len(tenants)], code, err)
			}
		}
	}
	for at, rs := range f.settled(t, ctx, since) {
		for _, s := range rs {
			if s.From != "" || f.home[s.Tenant] != region {
				continue // a relayed request, or another region's tenant
			}
			if at == region {
				r.othersFirst++
			} else {
				r.othersElsewhere++
			}
		}
	}

	// The heal: the region is asked first again once pop's own probe (at least every
	// --read-backoff) or request reaches it.
	setLoss(wan.DefaultLoss)
	mended = true
	healAt := time.Now()
	r.healed = waitFor(t, ctx, 30*time.Second, pop+" reaching "+region+" again", func() bool {
		st, err := f.status(ctx, pop)
		return err == nil && !st.unreachable(region)
	})
	since = f.watermark(t, ctx)
	if code, _, err := f.ask(ctx, pop, tenants[0]); err != nil || code != 200 {
		t.Errorf("%s after the heal, asked for %s: %d %v", pop, tenants[0], code, err)
	}
	for at, rs := range f.settled(t, ctx, since) {
		for _, s := range rs {
			if s.From == "" && s.Tenant == tenants[0] {
				r.healFirst = at
			}
		}
	}
	r.healFirstAfter = time.Since(healAt)

	if r.cutAnswered != r.cutAsked {
		t.Errorf("%s cut from %s: %d of %d requests answered", pop, region, r.cutAnswered, r.cutAsked)
	}
	if r.cutPaid > 1 {
		t.Errorf("%s cut from %s: %d requests paid a failed attempt into the cut (took %v or more), want at most the first",
			pop, region, r.cutPaid, paidAt)
	}
	if r.othersElsewhere > 0 || len(r.cutUnreachAt) > 0 {
		t.Errorf("the PoPs not cut asked another region first %d times for %s's tenants (%d first at %s); unreachable at %v",
			r.othersElsewhere, region, r.othersFirst, region, r.cutUnreachAt)
	}
	if r.healFirst != region {
		t.Errorf("after the heal %s asked %q first for %s, want %s", pop, r.healFirst, tenants[0], region)
	}
}

// firstRow is one PoP's first regions for tenants heard nowhere.
type firstRow struct {
	pop, continent, rule string
	nearest, expected    string
	closest              string // the entry's closest_region after the run
	got                  map[string]int
	hits, total          int
}

type report struct {
	size                        size
	built, ready, total         time.Duration
	first                       []firstRow
	unheardLatency              []time.Duration
	toEach, toEvery             []time.Duration
	gossipMissed                int
	heardAsked, heardFailed     int
	heardSeen, heardRelayed     int
	heardLatency                []time.Duration
	frozen                      string
	detect                      map[string]time.Duration
	rejoin                      time.Duration
	cutPop, cutRegion           string
	cutAsked, cutAnswered       int
	cutLatency                  []time.Duration
	cutMarked                   time.Duration
	cutUnreachAt                []string // other PoPs showing the region unreachable from them
	cutUnreachAfter, cutPaid    int
	othersFirst                 int // the other PoPs' requests for the region's tenants asked there first
	othersElsewhere             int // ... asked elsewhere first
	healed, healFirstAfter      time.Duration
	healFirst                   string // the region the cut PoP asked first after the heal
	histP99, histP50, histCount float64
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 0, 64) + " ms" }

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s" }

// floor is the longest one-way delay between two PoPs of the matrix, and the pair.
func floor() (time.Duration, string) {
	var worst time.Duration
	var pair string
	for i, a := range wan.PoPs {
		for _, b := range wan.PoPs[i+1:] {
			if d, _ := wan.RTT(a, b); d/2 > worst {
				worst, pair = d/2, a+"-"+b
			}
		}
	}
	return worst, pair
}

func (r *report) table() string {
	var b strings.Builder
	row := func(what, result, goal string) { fmt.Fprintf(&b, "| %s | %s | %s |\n", what, result, goal) }
	b.WriteString("| measure | result | goal / floor |\n|---|---|---|\n")
	for _, f := range r.first {
		var got []string
		for _, reg := range slices.Sorted(mapsKeys(f.got)) {
			got = append(got, fmt.Sprintf("%s %d", reg, f.got[reg]))
		}
		rtt, _ := wan.RTT(f.pop, f.nearest)
		goal := fmt.Sprintf("nearest %s (%.1f ms)", f.nearest, float64(rtt)/1e6)
		if f.rule == "continent map" {
			goal += fmt.Sprintf("; mapped %s=%s", f.continent, f.expected)
		}
		row(fmt.Sprintf("first region asked, tenant heard nowhere: %s (%s, %s)", f.pop, f.continent, map[bool]string{true: "mapped", false: "unmapped"}[f.rule == "continent map"]),
			fmt.Sprintf("nearest %d/%d (%s); closest_region %s", f.hits, f.total, strings.Join(got, ", "), f.closest), goal)
	}
	fl, pair := floor()
	row(fmt.Sprintf("gossip of a home to every entry (/status.json polled every 10 ms), %d homes", len(r.toEvery)),
		fmt.Sprintf("p50 %s, p99 %s, max %s", ms(pct(r.toEvery, .5)), ms(pct(r.toEvery, .99)), ms(pct(r.toEvery, 1))),
		fmt.Sprintf("floor %s (%s one way)", ms(fl), pair))
	row(fmt.Sprintf("gossip of a home to one entry (same polls), %d arrivals", len(r.toEach)),
		fmt.Sprintf("p50 %s, p99 %s", ms(pct(r.toEach, .5)), ms(pct(r.toEach, .99))), "")
	if r.histCount > 0 {
		row(fmt.Sprintf("fenec_entry_gossip_propagation_seconds{clock=origin}, 4 entries merged, %.0f homes", r.histCount),
			fmt.Sprintf("p50 %s, p99 %s (interpolated in buckets)", ms(time.Duration(r.histP50*1e9)), ms(time.Duration(r.histP99*1e9))), "")
	}
	var det []string
	var worst time.Duration
	for _, pop := range wan.PoPs {
		if d, ok := r.detect[pop]; ok {
			det = append(det, pop+" "+secs(d))
			worst = max(worst, d)
		}
	}
	row(fmt.Sprintf("failure detection: %s frozen (SIGSTOP) until listed failed", r.frozen),
		fmt.Sprintf("every other by %s (%s); alive everywhere %s after SIGCONT", secs(worst), strings.Join(det, ", "), secs(r.rejoin)),
		"10 s (docs/REFERENCE.md)")
	share := 0.0
	if r.heardSeen > 0 {
		share = 100 * float64(r.heardRelayed) / float64(r.heardSeen)
	}
	row("relay share, tenants already heard (all PoPs at once)",
		fmt.Sprintf("%d/%d relayed (%.1f %%); %d of %d answered, p50 %s", r.heardRelayed, r.heardSeen, share, r.heardAsked-r.heardFailed, r.heardAsked, ms(pct(r.heardLatency, .5))),
		"0 %")
	row(fmt.Sprintf("%s cut from %s (loss 1 both ways): requests answered", r.cutPop, r.cutRegion),
		fmt.Sprintf("%d/%d, p50 %s, max %s", r.cutAnswered, r.cutAsked, ms(pct(r.cutLatency, .5)), ms(pct(r.cutLatency, 1))),
		"all, through the other regions")
	row(fmt.Sprintf("%s cut from %s: requests that paid a failed attempt into the cut (%s or more)", r.cutPop, r.cutRegion, secs(paidAt)),
		fmt.Sprintf("%d of %d; %s unreachable from %s after %d of them; marked in the fleet after %s",
			r.cutPaid, r.cutAsked, r.cutRegion, r.cutPop, r.cutUnreachAfter, secs(r.cutMarked)), "at most 1")
	row(fmt.Sprintf("the other PoPs during the cut: their requests for %s's tenants", r.cutRegion),
		fmt.Sprintf("%d of %d asked %s first; %s unreachable at %s", r.othersFirst, r.othersFirst+r.othersElsewhere, r.cutRegion, r.cutRegion, orNone(r.cutUnreachAt)),
		"all asked "+r.cutRegion+" first")
	row(fmt.Sprintf("%s after the heal: %s asked first again", r.cutPop, r.cutRegion),
		fmt.Sprintf("reached after %s (its probe); the next request asked %s first (%s after the heal)", secs(r.healed), orNone([]string{r.healFirst}), secs(r.healFirstAfter)),
		"within --read-backoff (10 s) and one probe")
	fmt.Fprintf(&b, "\n%s run: binaries built in %s, fleet ready at %s, all done at %s.\n", r.size.name, secs(r.built), secs(r.ready), secs(r.total))
	return b.String()
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func mapsKeys(m map[string]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// histogram merges the entries' fenec_entry_gossip_propagation_seconds{clock="origin"} and
// returns its p50, p99 (linear within a bucket) and count.
func (f *fleet) histogram(ctx context.Context) (p50, p99, count float64, err error) {
	cum := map[float64]float64{}
	for _, pop := range wan.PoPs {
		b, code, gerr := f.sites[pop].get(ctx, "http://"+adminListen+"/metrics")
		if gerr != nil || code != 200 {
			return 0, 0, 0, errors.Join(gerr, fmt.Errorf("metrics of %s: %d", pop, code))
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "fenec_entry_gossip_propagation_seconds_bucket{") || !strings.Contains(line, `clock="origin"`) {
				continue
			}
			_, rest, _ := strings.Cut(line, `le="`)
			leText, rest, _ := strings.Cut(rest, `"`)
			le, _ := strconv.ParseFloat(leText, 64)
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				continue
			}
			v, _ := strconv.ParseFloat(fields[len(fields)-1], 64)
			cum[le] += v
		}
	}
	les := slices.Sorted(func(yield func(float64) bool) {
		for k := range cum {
			if !yield(k) {
				return
			}
		}
	})
	if len(les) == 0 {
		return 0, 0, 0, errors.New("no fenec_entry_gossip_propagation_seconds")
	}
	count = cum[les[len(les)-1]]
	q := func(p float64) float64 {
		want := p * count
		prevLE, prevCum := 0.0, 0.0
		for _, le := range les {
			if cum[le] >= want {
				if math.IsInf(le, 1) {
					return prevLE
				}
				if cum[le] == prevCum {
					return le
				}
				return prevLE + (le-prevLE)*(want-prevCum)/(cum[le]-prevCum)
			}
			prevLE, prevCum = le, cum[le]
		}
		return prevLE
	}
	return q(.5), q(.99), count, nil
}
