package node

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/testutil"
	"github.com/fenec/fenec-entry/proxy"
	"github.com/fenec/fenec-entry/status"
)

// TestMain lets this test binary be a worker process: the master starts its own executable
// with WorkerArg.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == WorkerArg {
		os.Exit(RunWorker(os.Stderr))
	}
	os.Exit(m.Run())
}

// startWorkersNode starts an entry with --workers 2 whose workers' logs go to the test's.
func startWorkersNode(t *testing.T, cfg Config) (*Node, *testutil.LogBuffer) {
	t.Helper()
	cfg.Workers = 2
	log, logs := testLogger(t)
	n, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	n.workerOut = logs
	t.Cleanup(n.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return n, logs
}

// askFresh sends one request on a fresh connection and returns the status and body.
func askFresh(t *testing.T, method, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, _ := http.NewRequest(method, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func workerPids(n *Node) []int {
	var out []int
	for _, p := range n.workers.Load().procs {
		out = append(out, p.pid())
	}
	return out
}

// An entry with workers: each worker serves clients; a home one worker hears reaches the
// master (adopted as this entry's own, on the feed for gossip) and the other worker; a mark
// the master holds reaches the workers; /metrics and /status.json count the workers'
// requests; a drain stops the workers.
func TestWorkersServe(t *testing.T) {
	var euHits, usHits atomic.Int64
	eu := newRouter(t, "eu", func(w http.ResponseWriter, r *http.Request) {
		euHits.Add(1)
		if strings.HasPrefix(r.URL.Path, "/t/acme/") {
			w.Header().Set("Fenec-Home", "us") // eu relays acme to its home
		}
		io.WriteString(w, "eu")
	})
	us := newRouter(t, "us", func(w http.ResponseWriter, _ *http.Request) {
		usHits.Add(1)
		io.WriteString(w, "us")
	})
	n, _ := startWorkersNode(t, testConfig(t, "eu", eu.URL, "us", us.URL))
	base := "http://" + n.ClientAddr().String()
	pids := workerPids(n)
	if len(pids) != 2 || pids[0] == 0 || pids[1] == 0 || pids[0] == os.Getpid() {
		t.Fatalf("worker pids %v", pids)
	}

	// The first request goes to the default region, whose router names acme's home.
	if code, body := askFresh(t, "GET", base+"/t/acme/x"); code != 200 || body != "eu" {
		t.Fatalf("first request: %d %q", code, body)
	}
	testutil.Eventually(t, 5*time.Second, "the master adopts the home a worker heard", func() bool {
		h, src, ok := n.homes.Get("acme")
		return ok && h.Region == "us" && src == homes.SourceLocal
	})
	// Every worker's table has it, though only one asked eu: 64 fresh connections (spread over
	// both workers) all go to us.
	testutil.Eventually(t, 5*time.Second, "every worker's table holds acme", func() bool {
		for _, r := range n.workers.Load().reports(context.Background()) {
			if r == nil || r.Homes != 1 {
				return false
			}
		}
		return true
	})
	for range 64 {
		askFresh(t, "GET", base+"/t/acme/x")
	}
	if got := euHits.Load(); got != 1 {
		t.Errorf("eu asked %d times for acme, want once: a worker did not have the home", got)
	}

	// A mark the master holds (as gossip delivers it) reaches every worker's table; then a
	// plain write for a tenant heard nowhere asks the marked default region last. (Asked
	// before a worker holds the mark, eu would answer and clear it, as it should.)
	n.homes.ApplyMark(homes.Mark{Region: "eu", Observer: "peer", At: time.Now(),
		Version: homes.Version{HLC: uint64(time.Now().UnixNano()) << 16, Origin: "peer"}})
	euID, _ := n.homes.RegionID("eu")
	testutil.Eventually(t, 5*time.Second, "every worker's table holds the mark", func() bool {
		for _, r := range n.workers.Load().reports(context.Background()) {
			if r == nil || r.Failing&(1<<euID) == 0 {
				return false
			}
		}
		return true
	})
	before := usHits.Load()
	for range 16 {
		askFresh(t, "POST", base+"/t/new-tenant/x")
	}
	if got := usHits.Load() - before; got != 16 {
		t.Errorf("us asked %d times of 16 plain writes with eu marked, want every one", got)
	}

	// Both workers served, and /metrics adds their counts up: every request made, once its
	// worker counted it (a worker counts a request as its answer ends, so the last may be
	// counted a moment after the client has it).
	asked := 1 + 64 + 16
	testutil.Eventually(t, 5*time.Second, "/metrics counts every request, from both workers", func() bool {
		_, metrics := get(t, http.DefaultClient, "http://"+n.AdminAddr().String()+"/metrics")
		if scrapeSum(metrics, "fenec_entry_requests_total") != float64(asked) {
			return false
		}
		for _, r := range n.workers.Load().reports(context.Background()) {
			if r == nil || counterSum(decodeFamilies(r.Metrics), "fenec_entry_requests_total") == 0 {
				return false
			}
		}
		return true
	})
	_, js := get(t, http.DefaultClient, "http://"+n.AdminAddr().String()+"/status.json")
	var st status.Status
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatal(err)
	}
	var answered bool
	for _, r := range st.Regions {
		for _, rs := range r.RouterStates {
			answered = answered || rs.LastOutcome == "answer"
		}
	}
	if !answered || !st.Ready {
		t.Errorf("/status.json: ready %v, a router answered %v: %s", st.Ready, answered, js)
	}
	if len(st.Workers) != 2 || st.Workers[0].PID != pids[0] || st.Workers[1].PID != pids[1] ||
		!st.Workers[0].Serving || !st.Workers[1].Serving || st.Workers[0].Homes < 1 || st.Workers[1].Homes < 1 {
		t.Errorf("/status.json workers %+v, want both serving with pids %v, each holding acme at least", st.Workers, pids)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("worker %d still runs after the drain", pid)
		}
	}
	if c, err := net.DialTimeout("tcp", n.ClientAddr().String(), time.Second); err == nil {
		c.Close()
		t.Error("the client port still takes connections after the drain")
	}
}

// A worker that dies is started again; meanwhile the entry is not ready; its counts stay in
// /metrics.
func TestWorkerRestarted(t *testing.T) {
	router := newRouter(t, "eu", nil)
	n, _ := startWorkersNode(t, testConfig(t, "eu", router.URL))
	base := "http://" + n.ClientAddr().String()
	for range 32 {
		if code, _ := askFresh(t, "GET", base+"/t/acme/x"); code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	admin := "http://" + n.AdminAddr().String()
	requests := func() float64 {
		_, m := get(t, http.DefaultClient, admin+"/metrics")
		return scrapeSum(m, "fenec_entry_requests_total")
	}
	testutil.Eventually(t, 5*time.Second, "32 requests counted", func() bool { return requests() == 32 })
	// Each slot's process CPU and memory, read from /proc: the memory of a running Go process
	// is megabytes, and its CPU shows within a few requests (/proc counts in 10 ms ticks).
	asked := 32.0
	testutil.Eventually(t, 10*time.Second, "each worker's CPU and memory in /metrics", func() bool {
		if code, _ := askFresh(t, "GET", base+"/t/acme/x"); code != 200 {
			t.Fatalf("status %d", code)
		}
		asked++
		_, m := get(t, http.DefaultClient, admin+"/metrics")
		for _, w := range []string{"0", "1"} {
			if scrapeLabeled(m, "fenec_entry_worker_cpu_seconds_total", "worker", w) <= 0 ||
				scrapeLabeled(m, "fenec_entry_worker_resident_memory_bytes", "worker", w) < 1<<20 {
				return false
			}
		}
		return true
	})
	testutil.Eventually(t, 5*time.Second, "the requests made meanwhile counted", func() bool { return requests() == asked })
	_, m := get(t, http.DefaultClient, admin+"/metrics")
	cpuBefore := scrapeLabeled(m, "fenec_entry_worker_cpu_seconds_total", "worker", "0")
	// The kill comes after a report that holds them: the master keeps a dead worker's last.
	n.workers.Load().reports(context.Background())
	old := workerPids(n)
	syscall.Kill(old[0], syscall.SIGKILL)
	testutil.Eventually(t, 10*time.Second, "a new worker in the slot, serving", func() bool {
		p := workerPids(n)[0]
		return p != 0 && p != old[0] && n.workers.Load().serving()
	})
	if !n.isReady() {
		t.Error("not ready once every worker serves again")
	}
	for range 8 {
		if code, _ := askFresh(t, "GET", base+"/t/acme/x"); code != 200 {
			t.Fatalf("status %d after the restart", code)
		}
	}
	testutil.Eventually(t, 5*time.Second, "8 more requests counted after the restart (the dead worker's kept)",
		func() bool { return requests() == asked+8 })
	_, after := get(t, http.DefaultClient, admin+"/metrics")
	if got := scrapeLabeled(after, "fenec_entry_worker_cpu_seconds_total", "worker", "0"); got < cpuBefore {
		t.Errorf("worker 0's CPU went back from %v to %v over its restart", cpuBefore, got)
	}
	if got := scrapeLabeled(after, "fenec_entry_worker_resident_memory_bytes", "worker", "0"); got < 1<<20 {
		t.Errorf("worker 0's new process has %v bytes resident, want its memory", got)
	}
	// /status lists the same for each worker.
	if ws := n.Status().Workers; len(ws) != 2 || ws[0].CPUSeconds < cpuBefore || ws[0].ResidentBytes < 1<<20 || ws[1].ResidentBytes < 1<<20 {
		t.Errorf("/status lists workers %+v, want worker 0's CPU at least %v and each one's memory", ws, cpuBefore)
	}
	if got := scrapeSum(after, "fenec_entry_worker_restarts_total"); got != 1 {
		t.Errorf("fenec_entry_worker_restarts_total %v, want 1", got)
	}
	if !strings.Contains(after, `fenec_entry_workers{state="serving"} 2`) || !strings.Contains(after, `fenec_entry_workers{state="down"} 0`) {
		t.Errorf("/metrics does not show two workers serving:\n%s", after)
	}
}

func counterSum(fams []*dto.MetricFamily, name string) float64 {
	var sum float64
	for _, f := range fams {
		if f.GetName() == name {
			for _, m := range f.Metric {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// scrapeLabeled is the sample of name whose one label is label="value" in a text exposition,
// -1 when there is none.
func scrapeLabeled(text, name, label, value string) float64 {
	prefix := name + "{" + label + "=\"" + value + "\"} "
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			var f float64
			if err := json.Unmarshal([]byte(v), &f); err == nil {
				return f
			}
		}
	}
	return -1
}

// scrapeSum adds up every sample of name in a text exposition.
func scrapeSum(text, name string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		var v float64
		if err := json.Unmarshal([]byte(f[len(f)-1]), &v); err == nil {
			sum += v
		}
	}
	return sum
}

// A reload reaches every worker: after it, a tenant heard nowhere goes to the new default
// region, whichever worker serves it.
func TestWorkersFollowReload(t *testing.T) {
	eu, ap := newRouter(t, "eu", nil), newRouter(t, "ap", nil)
	cfg := testConfig(t, "eu", eu.URL)
	fr := &fakeReloader{}
	cfg.Reloader = fr.reload
	n, _ := startWorkersNode(t, cfg)
	base := "http://" + n.ClientAddr().String()
	if code, body := askFresh(t, "GET", base+"/t/acme/x"); code != 200 || body != "hello from eu" {
		t.Fatalf("before: %d %q", code, body)
	}
	next := cfg
	next.Routers = []proxy.Region{regionOf(t, "ap", ap.URL)}
	fr.set(next, nil, nil)
	if _, err := n.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "every worker routes to ap", func() bool {
		for range 32 {
			if _, body := askFresh(t, "GET", base+"/t/other/x"); body != "hello from ap" {
				return false
			}
		}
		return true
	})
}

// --workers auto: a worker per P at start, none on one, and none where the kernel would not
// spread the connections over them (off Linux).
func TestAutoWorkers(t *testing.T) {
	for procs, want := range map[int]int{1: 0, 2: 2, 8: 8, 1000: MaxWorkers} {
		if !reusePortSpreads {
			want = 0
		}
		if got := autoWorkers(procs); got != want {
			t.Errorf("autoWorkers(%d) = %d, want %d", procs, got, want)
		}
	}
}

// Without --reuse-port, a port another socket holds is refused as a one-process entry refuses
// it, though the workers' own sockets share the port among themselves: even a socket that
// would share it (another entry's workers, SO_REUSEPORT).
func TestWorkersPortInUse(t *testing.T) {
	lc := net.ListenConfig{Control: reusePort}
	held, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	router := newRouter(t, "eu", nil)
	cfg := testConfig(t, "eu", router.URL)
	cfg.Listen, cfg.Workers = held.Addr().String(), 2
	log, _ := testLogger(t)
	n, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = n.Start(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "--listen: ") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Start on a held port: %v, want --listen: ... address already in use", err)
	}
}

// A worker that stops answering (SIGSTOP) is counted down within two heartbeats: the entry
// is not ready and /metrics says so; once it answers again, it serves.
func TestWorkerFrozen(t *testing.T) {
	router := newRouter(t, "eu", nil)
	n, _ := startWorkersNode(t, testConfig(t, "eu", router.URL))
	pid := workerPids(n)[0]
	syscall.Kill(pid, syscall.SIGSTOP)
	defer syscall.Kill(pid, syscall.SIGCONT)
	admin := "http://" + n.AdminAddr().String()
	testutil.Eventually(t, 3*(workerReportEvery+workerReportWait), "the frozen worker counted down", func() bool {
		return !n.isReady()
	})
	if resp, _ := get(t, http.DefaultClient, admin+"/readyz"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz %d with a worker frozen, want 503", resp.StatusCode)
	}
	if _, m := get(t, http.DefaultClient, admin+"/metrics"); !strings.Contains(m, `fenec_entry_workers{state="down"} 1`) {
		t.Errorf("/metrics does not count the frozen worker down")
	}
	syscall.Kill(pid, syscall.SIGCONT)
	testutil.Eventually(t, 3*(workerReportEvery+workerReportWait), "the worker serving again", n.isReady)
	if got := workerPids(n)[0]; got != pid {
		t.Errorf("the worker was replaced (%d, was %d): two missed heartbeats are not five", got, pid)
	}
}

// The plain HTTP/1.x server defaults to the one this build has, and lean is refused, naming
// the flag, where h1 is not built (it needs Linux's epoll).
func TestHTTP1ServerOfTheSystem(t *testing.T) {
	if (DefaultHTTP1Server == "lean") != leanBuilt || leanBuilt != (runtime.GOOS == "linux") {
		t.Fatalf("DefaultHTTP1Server %q with h1 built %v on %s", DefaultHTTP1Server, leanBuilt, runtime.GOOS)
	}
	c := testConfig(t, "eu", "http://127.0.0.1:1")
	c.HTTP1Server = "lean"
	err := c.Validate()
	if leanBuilt && err != nil {
		t.Errorf("lean refused where h1 is built: %v", err)
	}
	if !leanBuilt && (err == nil || !strings.Contains(err.Error(), "--http1-server")) {
		t.Errorf("lean where h1 is not built: %v, want an error naming --http1-server", err)
	}
}

// A router no process asked stays never asked when the workers' states are merged (it read
// "20790d 7h ago", the Unix epoch, on the status page); one a worker asked takes the newest.
func TestMergeRouterStatesNeverAsked(t *testing.T) {
	base := []proxy.RouterState{{Region: "eu", Router: "a"}, {Region: "eu", Router: "b"}}
	at := time.Unix(1_800_000_000, 0)
	reports := []*wireReport{
		{Routers: []wireRouterState{{Region: "eu", Router: "a"}, {Region: "eu", Router: "b", LastStatus: 200, LastAt: at.UnixNano()}}},
		{Routers: []wireRouterState{{Region: "eu", Router: "a"}, {Region: "eu", Router: "b", LastStatus: 502, LastAt: at.Add(-time.Second).UnixNano()}}},
	}
	got := mergeRouterStates(base, reports)
	if !got[0].LastAt.IsZero() {
		t.Errorf("a router never asked: LastAt %v, want the zero time", got[0].LastAt)
	}
	if !got[1].LastAt.Equal(at) || got[1].LastStatus != 200 {
		t.Errorf("a router asked: %+v, want the newest attempt's", got[1])
	}
}
