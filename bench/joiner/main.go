// Command joiner measures what a join costs: how long an entry joining a peer that holds a
// million homes takes to be ready with them, and what the transfer does to the peer's own
// requests. Real processes on loopback:
//
//  1. a state file of -homes homes is written (package state) and entry A restores it at
//     start (--state-dir), so A holds them before anything joins;
//  2. a closed-loop load (-clients) sends reads through A to stand-in routers, and its
//     latencies are taken for -idle seconds: the idle percentiles;
//  3. entry B starts with --join A and an empty table; the load's latencies from B's start to
//     B's /readyz answering 200 are the transfer's; the time to ready is the result.
//
// It prints one JSON line on stdout; progress goes to stderr.
//
//	go build -o /tmp/fe ./cmd/fenec-entry && go build -o /tmp/joiner ./bench/joiner
//	/tmp/joiner -bin /tmp/fe -homes 1000000                       # everything on both CPUs
//	taskset -c 0 /tmp/joiner -bin /tmp/fe -homes 1000000 -pin     # B on its own CPU
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/standin"
	"github.com/fenec/fenec-entry/state"
)

type result struct {
	Homes         int     `json:"homes"`
	ReadySeconds  float64 `json:"ready_seconds"`   // B's start to its first 200 on /readyz
	HomesAtReady  int     `json:"homes_at_ready"`  // B's table then
	IdleP50us     float64 `json:"idle_p50_us"`     // A's requests before B started
	IdleP99us     float64 `json:"idle_p99_us"`     //
	DuringP50us   float64 `json:"during_p50_us"`   // A's requests while B fetched the table
	DuringP99us   float64 `json:"during_p99_us"`   //
	P99Ratio      float64 `json:"p99_ratio"`       // during / idle; the goal is at most 2
	DuringSamples int     `json:"during_samples"`  //
	StateWriteSec float64 `json:"state_write_sec"` // writing A's state file (setup)
}

func main() {
	bin := flag.String("bin", "", "the fenec-entry binary (go build -o BIN ./cmd/fenec-entry)")
	n := flag.Int("homes", 1_000_000, "homes A holds")
	clients := flag.Int("clients", 4, "closed-loop clients reading through A")
	idle := flag.Duration("idle", 5*time.Second, "how long the idle latencies are taken")
	timeout := flag.Duration("timeout", 60*time.Second, "bound on B's wait for ready")
	flag.StringVar(&logDir, "logs", "", "if set, write the entries' logs (debug level) there as a.log and b.log")
	pin := flag.Bool("pin", false, "run A on CPU 0 and B on CPU 1 (taskset), so that B's applying does not take A's CPU: "+
		"what a joiner on its own machine costs the peer; run this command under taskset -c 0 too")
	flag.Parse()
	pinA, pinB = *pin, *pin
	if *bin == "" {
		fail("-bin: required (go build -o BIN ./cmd/fenec-entry)")
	}
	res, err := run(*bin, *n, *clients, *idle, *timeout)
	if err != nil {
		fail(err.Error())
	}
	json.NewEncoder(os.Stdout).Encode(res)
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "joiner: "+msg)
	os.Exit(1)
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "joiner: "+format+"\n", args...) }

func run(bin string, n, clients int, idle, timeout time.Duration) (result, error) {
	res := result{Homes: n}
	dir, err := os.MkdirTemp("", "joiner-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	sc, err := standin.Start(standin.Config{
		Regions: []standin.Region{{Name: "eu", Addrs: []string{"127.0.0.1:0"}}, {Name: "us", Addrs: []string{"127.0.0.1:0"}}},
		Tenants: map[string]string{"acme": "eu"},
	})
	if err != nil {
		return res, err
	}
	defer sc.Close()
	routers := "eu=" + sc.URLs("eu")[0] + ";us=" + sc.URLs("us")[0]

	// 1. A's state: n homes, written as A would write them.
	stateA := filepath.Join(dir, "a")
	os.Mkdir(stateA, 0o700)
	t0 := time.Now()
	if err := writeState(stateA, "entry-a", n); err != nil {
		return res, err
	}
	res.StateWriteSec = time.Since(t0).Seconds()
	logf("state of %d homes written in %.1fs", n, res.StateWriteSec)

	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	gossipA := freeAddr()
	level := "info"
	if logDir != "" {
		level = "debug"
	}
	common := []string{"--routers", routers, "--homes", fmt.Sprint(n), "--gossip-key", key, "--log-level", level}
	a, err := startOn(cpuIf(pinA, 0), bin, append(common, "--node", "entry-a", "--pop", "ams", "--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0", "--gossip-bind", gossipA, "--gossip-advertise", gossipA,
		"--rpc-addr", freeAddr(), "--state-dir", stateA)...)
	if err != nil {
		return res, err
	}
	defer a.stop()
	defer a.keepLog("a.log") // after stop: the whole log
	aClient, aAdmin, err := a.addrs(30 * time.Second)
	if err != nil {
		return res, err
	}
	if err := waitFor(60*time.Second, func() bool { return homesOf(aAdmin) == n }); err != nil {
		return res, fmt.Errorf("entry A restoring %d homes: %w", n, err)
	}
	logf("A ready with %d homes", homesOf(aAdmin))

	// 2. Load through A; idle latencies.
	ld := startLoad("http://"+aClient, clients)
	defer ld.stop()
	time.Sleep(time.Second) // warm
	ld.mark()
	time.Sleep(idle)
	idleLat := ld.mark()

	// 3. B joins A.
	bStart := time.Now()
	b, err := startOn(cpuIf(pinB, 1), bin, append(common, "--node", "entry-b", "--pop", "fra", "--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0", "--gossip-bind", "127.0.0.1:0", "--gossip-advertise", "",
		"--rpc-addr", freeAddr(), "--join", gossipA)...)
	if err != nil {
		return res, err
	}
	defer b.stop()
	defer b.keepLog("b.log")
	_, bAdmin, err := b.addrs(30 * time.Second)
	if err != nil {
		return res, err
	}
	if err := waitFor(timeout, func() bool { return ready(bAdmin) }); err != nil {
		return res, fmt.Errorf("entry B ready: %w", err)
	}
	res.ReadySeconds = time.Since(bStart).Seconds()
	during := ld.mark()
	res.HomesAtReady = homesOf(bAdmin)
	logf("B ready after %.2fs with %d homes", res.ReadySeconds, res.HomesAtReady)

	res.IdleP50us, res.IdleP99us = pct(idleLat, 50), pct(idleLat, 99)
	res.DuringP50us, res.DuringP99us = pct(during, 50), pct(during, 99)
	res.DuringSamples = len(during)
	if res.IdleP99us > 0 {
		res.P99Ratio = res.DuringP99us / res.IdleP99us
	}
	if errs := ld.errors.Load(); errs > 0 {
		return res, fmt.Errorf("%d requests through A failed", errs)
	}
	return res, nil
}

// writeState writes a state file of n homes for node into dir.
func writeState(dir, node string, n int) error {
	t, err := homes.New(homes.Config{Regions: []string{"eu", "us"}, Origin: node, Capacity: n})
	if err != nil {
		return err
	}
	for i := range n {
		t.Learn(fmt.Sprintf("tenant-%012d", i), i%2)
	}
	s, err := state.Open(state.Config{Dir: dir, Table: t, Node: node, Logger: zerolog.Nop()})
	if err != nil {
		return err
	}
	_, err = s.Flush()
	return err
}

var pinA, pinB bool // set from -pin

var logDir string // set from -logs

// keepLog writes p's stderr to logDir/name when -logs is set.
func (p *proc) keepLog(name string) {
	if logDir == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := os.WriteFile(filepath.Join(logDir, name), []byte(strings.Join(p.lines, "\n")+"\n"), 0o644); err != nil {
		logf("%s: %v", name, err)
	}
}

type proc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
}

// startOn starts bin serve args, on CPU cpu (taskset) when cpu >= 0.
func startOn(cpu int, bin string, args ...string) (*proc, error) {
	argv := append([]string{bin, "serve"}, args...)
	if cpu >= 0 {
		argv = append([]string{"taskset", "-c", fmt.Sprint(cpu)}, argv...)
	}
	p := &proc{cmd: exec.Command(argv[0], argv[1:]...)}
	// A pprof build (go build -tags pprof) listens on 127.0.0.1:6060 unless told: each entry
	// gets a port of its own, or B's listen fails (silently) while A holds the default.
	pprof := freeAddr()
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "FENEC_ENTRY_PPROF_ADDR=" + pprof}
	name := "entry"
	if i := slices.Index(args, "--node"); i >= 0 && i+1 < len(args) {
		name = args[i+1]
	}
	logf("%s: pprof, if built with it, at http://%s/debug/pprof/", name, pprof)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		b := make([]byte, 64<<10)
		var rest string
		for {
			k, err := stderr.Read(b)
			rest += string(b[:k])
			for {
				i := strings.IndexByte(rest, '\n')
				if i < 0 {
					break
				}
				p.mu.Lock()
				p.lines = append(p.lines, rest[:i])
				p.mu.Unlock()
				rest = rest[i+1:]
			}
			if err != nil {
				return
			}
		}
	}()
	return p, nil
}

func (p *proc) stop() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// addrs waits for the start line and returns the client and admin addresses.
func (p *proc) addrs(within time.Duration) (client, admin string, err error) {
	err = waitFor(within, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, l := range p.lines {
			var raw map[string]any
			if json.Unmarshal([]byte(l), &raw) == nil && raw["message"] == "entry started" {
				client, _ = raw["listen"].(string)
				admin, _ = raw["admin_listen"].(string)
				return true
			}
		}
		return false
	})
	if err != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		return "", "", fmt.Errorf("no start line: %w; stderr: %s", err, strings.Join(p.lines, "\n"))
	}
	return client, admin, nil
}

func cpuIf(pin bool, cpu int) int {
	if pin {
		return cpu
	}
	return -1
}

func waitFor(within time.Duration, ok func() bool) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if ok() {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not within %v", within)
}

var client = &http.Client{Timeout: 5 * time.Second}

func ready(admin string) bool {
	resp, err := client.Get("http://" + admin + "/readyz")
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == 200
}

func homesOf(admin string) int {
	resp, err := client.Get("http://" + admin + "/status.json")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var st struct {
		Homes struct {
			Held int `json:"held"`
		} `json:"homes"`
	}
	if json.NewDecoder(resp.Body).Decode(&st) != nil {
		return -1
	}
	return st.Homes.Held
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err.Error())
	}
	defer ln.Close()
	return ln.Addr().String()
}

// load is closed-loop reads through an entry; mark returns the latencies since the last mark.
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	lat    []float64 // µs
	errors atomic.Int64
}

func startLoad(base string, clients int) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel}
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for w := range clients {
		l.wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/t/tenant-%012d/items/1", base, (w*7919+i)%1000), nil)
				t0 := time.Now()
				resp, err := c.Do(req)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					l.errors.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.Header.Get("Fenec-Shard") != "1" {
					l.errors.Add(1)
					continue
				}
				d := float64(time.Since(t0).Microseconds())
				l.mu.Lock()
				l.lat = append(l.lat, d)
				l.mu.Unlock()
			}
		})
	}
	return l
}

func (l *load) mark() []float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lat
	l.lat = nil
	return out
}

func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
}

func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p/100))]
}
