//go:build linux

package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proxies: fenec-entry beside nginx (and the upstream alone), all proxying one request to the
// same upstream, in interleaved rounds: latency at one connection, requests/s at 32, and in
// -mode protocols every protocol a client speaks and the memory of held connections.
// bench/README.md says what each row measures.

type proxiesOpts struct {
	mode, pin, targets, rows, entryBin, abBin, out            string
	rounds, secs, slices, warmup, conns, idleWait             int
	idleConns, streams, settle, h2Clients, h2Streams, resumes int
	check, keep                                               bool
}

// The measurements of -rows, in the order a round makes them.
var allRows = []string{"plain", "https", "h2", "h2c", "handshakes", "resumption", "idle", "streams"}

const (
	idleMax      = 15 // % of a CPU other processes may use before a run counts as disturbed
	stealMax     = 10 // % steal above which a run is named in a warning
	holdParallel = 64 // connections connhold opens at once; also the memory rows' warm-up
)

type proxies struct {
	*run
	setup
	o                      proxiesOpts
	clientCPUs, serverCPUs string
	nClient, workers       int // CPUs given to the clients alone (0: unpinned); nginx's workers
	rows                   []string
	targets                []*target
	standinPort            int
	bin                    map[string]string
	nofile, needFDs        int
	sources                int
	results                []result
	flags                  *flag.FlagSet
}

// target is one target and its processes: the plain one (HTTP/1.1; h2c on the same port for
// the entry, on a second for nginx) and the TLS one.
type target struct {
	name                     string
	plain, tls               *proc
	plainURL, h2cURL, tlsURL string
	tlsAddr, tlsInfo         string
	tlsBytes                 int
	broken                   map[string]string // protocol: why its check failed
}

// result is one measurement of one target in one round: a line of the raw file.
type result struct {
	Kind        string   `json:"kind"`
	Round       int      `json:"round"`
	Target      string   `json:"target"`
	Measurement string   `json:"measurement"`
	P50         int      `json:"p50_us,omitempty"`
	P99         int      `json:"p99_us,omitempty"`
	PerS        float64  `json:"per_s,omitempty"`
	Requests    int64    `json:"requests"`
	Errors      int64    `json:"errors"`
	CPUus       float64  `json:"cpu_us_per_request,omitempty"` // the target's
	CPUvsUp     float64  `json:"cpu_vs_upstream,omitempty"`
	Busy        []int    `json:"cpu_busy_pct,omitempty"`
	Other       int      `json:"other_load_pct"`
	Steal       int      `json:"steal_pct"`
	Resumed     int      `json:"resumed,omitempty"`
	Conns       int      `json:"conns,omitempty"`
	RSSBefore   int64    `json:"rss_before_kb,omitempty"`
	RSSAfter    int64    `json:"rss_after_kb,omitempty"`
	KBPerConn   float64  `json:"kb_per_conn,omitempty"`
	GorPerConn  *float64 `json:"goroutines_per_conn,omitempty"`
	Closed      int      `json:"closed_during_hold,omitempty"`
	srvBusy     int
}

func proxiesMain(args []string) error {
	var o proxiesOpts
	fs := flag.NewFlagSet("proxies", flag.ExitOnError)
	fs.StringVar(&o.mode, "mode", "requests", "requests: latency at one connection and requests/s of plain HTTP/1.1 (the floor); protocols: every -rows measurement, one table of ratios")
	fs.StringVar(&o.rows, "rows", strings.Join(allRows, ","), "-mode protocols: the measurements, a comma list from "+strings.Join(allRows, ","))
	fs.StringVar(&o.targets, "targets", "", "comma list from direct,nginx,fenec-entry (default: all; -mode protocols: nginx,fenec-entry)")
	fs.IntVar(&o.rounds, "rounds", 5, "interleaved rounds")
	fs.IntVar(&o.secs, "seconds", 5, "seconds of each measurement")
	fs.IntVar(&o.slices, "latency-slices", 0, "the latency run of each round in N slices, the targets taking turns (default: -seconds, one-second slices)")
	fs.IntVar(&o.warmup, "warmup", 3, "seconds of warm-up load per target before the rounds (0: none)")
	fs.IntVar(&o.conns, "conns", 32, "connections of the throughput run")
	fs.StringVar(&o.pin, "pin", "split", "split: the clients on the first half of the CPUs, upstream and targets on the other; none: nothing pinned")
	fs.IntVar(&o.idleWait, "idle-wait", 30, "before each round, wait up to S seconds for other processes to use less than 15% of a CPU")
	fs.StringVar(&o.entryBin, "entry-bin", "", "a fenec-entry binary to measure instead of building ./cmd/fenec-entry")
	fs.StringVar(&o.abBin, "ab-bin", "", "a second fenec-entry binary, target fenec-entry-b, in the same rounds")
	fs.StringVar(&o.out, "out", "", "the raw file, JSON lines (default bench/out/proxies-<UTC time>.jsonl); the report goes beside it as .md")
	fs.BoolVar(&o.check, "check", false, "-mode requests: exit 1 when fenec-entry misses the floor")
	fs.BoolVar(&o.keep, "keep", false, "keep the temp dir (configs, logs)")
	fs.IntVar(&o.idleConns, "idle-conns", 10000, "idle keep-alive connections held (row idle)")
	fs.IntVar(&o.streams, "streams", 2000, "event streams held (row streams)")
	fs.IntVar(&o.settle, "settle", 5, "seconds from the last connection open to the second memory reading (at most 60)")
	fs.IntVar(&o.h2Clients, "h2-clients", 8, "h2load's connections (-c)")
	fs.IntVar(&o.h2Streams, "h2-streams", 16, "h2load's streams at once on each (-m)")
	fs.IntVar(&o.resumes, "resumes", 30, "reconnects offering the last session saved")
	fs.Parse(args)
	o.slices = cmp.Or(o.slices, o.secs)
	switch {
	case o.mode != "requests" && o.mode != "protocols":
		return fmt.Errorf("-mode: want requests or protocols, got %q", o.mode)
	case o.rounds < 1 || o.secs < 1 || o.warmup < 0 || o.conns < 2 || o.idleWait < 0:
		return errors.New("-rounds, -seconds: want 1 or more; -warmup, -idle-wait 0 or more; -conns 2 or more")
	case o.slices < 1 || o.secs%o.slices != 0:
		return fmt.Errorf("-latency-slices: want a divisor of -seconds (%d), got %d", o.secs, o.slices)
	case o.pin != "split" && o.pin != "none" || o.pin == "split" && numCPU() < 2:
		return fmt.Errorf("-pin: want split (2 CPUs or more) or none, got %q", o.pin)
	case o.settle < 0 || o.settle > 60: // the entry closes a client connection idle for 120 s
		return fmt.Errorf("-settle: want 0..60, got %d", o.settle)
	case o.check && o.mode != "requests":
		return errors.New("-check: the floor is -mode requests'")
	}
	p := &proxies{o: o, bin: map[string]string{}, rows: []string{"plain"}, flags: fs}
	allowed := []string{"direct", "nginx", "fenec-entry"}
	if o.mode == "protocols" {
		p.rows, allowed = strings.Split(o.rows, ","), allowed[1:]
		for _, r := range p.rows {
			if !slices.Contains(allRows, r) {
				return fmt.Errorf("-rows: want a comma list from %s, got %q", strings.Join(allRows, ","), r)
			}
		}
	}
	if p.o.targets == "" {
		p.o.targets = strings.Join(allowed, ",")
	}
	for _, name := range strings.Split(p.o.targets, ",") {
		if !slices.Contains(allowed, name) {
			return fmt.Errorf("-targets: want a comma list from %s, got %q", strings.Join(allowed, ","), name)
		}
		p.targets = append(p.targets, &target{name: name, broken: map[string]string{}})
	}
	if o.abBin != "" {
		if p.find("fenec-entry") == nil {
			return errors.New("-ab-bin: needs fenec-entry among -targets")
		}
		p.targets = append(p.targets, &target{name: "fenec-entry-b", broken: map[string]string{}})
	}
	n := numCPU()
	p.workers = n
	if o.pin == "split" {
		p.nClient, p.workers = n/2, n-n/2
		p.clientCPUs, p.serverCPUs = cpuRange(0, n/2), cpuRange(n/2, n)
	}
	var err error
	if p.run, err = newRun("proxies", o.keep); err != nil {
		return err
	}
	defer p.close()
	return p.main()
}

func cpuRange(from, to int) string {
	if to-from == 1 {
		return strconv.Itoa(from)
	}
	return fmt.Sprintf("%d-%d", from, to-1)
}

func (p *proxies) find(name string) *target {
	for _, t := range p.targets {
		if t.name == name {
			return t
		}
	}
	return nil
}

func (p *proxies) has(row string) bool { return slices.Contains(p.rows, row) }

func (p *proxies) main() error {
	tools := map[string]string{"wrk": "wrk", "curl": "curl", "taskset": "util-linux", "nginx": "nginx-light"}
	if p.o.mode == "protocols" {
		tools["h2load"], tools["openssl"] = "nghttp2-client", "openssl"
	}
	if err := need(tools); err != nil {
		return err
	}
	var err error
	p.logf("building the entry and cmd/fenec-standin")
	if p.bin["fenec-standin"], err = p.build("fenec-standin", "./cmd/fenec-standin"); err != nil {
		return err
	}
	if p.bin["fenec-entry"], err = p.entryBin("fenec-entry", p.o.entryBin); err != nil {
		return err
	}
	if p.o.abBin != "" {
		if p.bin["fenec-entry-b"], err = p.entryBin("fenec-entry-b", p.o.abBin); err != nil {
			return err
		}
	}
	if err := p.limits(); err != nil {
		return err
	}
	if p.setup, err = p.setUp(p.serverCPUs, p.o.out); err != nil {
		return err
	}
	defer p.raw.Close()
	if p.has("streams") {
		if p.standinPort, err = p.freePort(); err != nil {
			return err
		}
		s, err := p.start("standin", spec{cpus: p.serverCPUs}, p.bin["fenec-standin"], "--region", fmt.Sprintf("eu=127.0.0.1:%d", p.standinPort),
			"--tenants", "acme=eu", "--http-keepalive", "20s", "--log-level", "warn")
		if err != nil {
			return err
		}
		if err := waitOK(s, fmt.Sprintf("http://127.0.0.1:%d/t/acme/echo", p.standinPort)); err != nil {
			return err
		}
	}
	for _, t := range p.targets {
		if err := p.startTarget(t); err != nil {
			return err
		}
		p.checkTarget(t)
	}
	o, repro := p.o, reproduce("proxies", p.flags)
	vers := fmt.Sprintf("%s, wrk %s, h2load %s, OpenSSL %s, %s; %s", version(3, "nginx", "-v"), version(2, "wrk", "-v"),
		version(2, "h2load", "--version"), version(2, "openssl", "version"), version(3, "go", "version"), version(0, p.bin["fenec-entry"], "version"))
	if b := p.bin["fenec-entry-b"]; b != "" {
		vers += "; fenec-entry-b: " + version(0, b, "version")
	}
	tlsInfo := map[string]string{}
	for _, t := range p.targets {
		if t.tlsInfo != "" {
			tlsInfo[t.name] = t.tlsInfo
		}
	}
	p.rawLine(map[string]any{"kind": "meta", "mode": o.mode, "machine": machine(), "pin": o.pin, "client_cpus": p.clientCPUs,
		"server_cpus": p.serverCPUs, "versions": vers, "reproduce": repro, "tls": tlsInfo})
	p.warm()
	for r := 1; r <= o.rounds; r++ {
		order := rotate(p.targets, r-1)
		p.waitIdle(r)
		p.logf("round %d/%d", r, o.rounds)
		if err := p.round(r, order); err != nil {
			return err
		}
	}
	var names []string
	for _, t := range p.targets {
		names = append(names, t.name)
	}
	var rep string
	floorOK := true
	if o.mode == "requests" {
		rep, floorOK = requestsReport(p.results, names, p.o.pin == "split", o.conns)
		rep = "## fenec-entry vs nginx: GET " + reqPath + " on loopback\n\n" + rep
	} else {
		rep = "## fenec-entry vs nginx over every protocol a client speaks: GET " + reqPath + " on loopback\n\n" + protocolsReport(p.results, names, o, p.broken())
	}
	layout := "nothing pinned"
	if o.pin == "split" {
		layout = fmt.Sprintf("the clients (wrk, h2load, openssl, connhold) on CPU %s; upstream, stand-in and targets on CPU %s", p.clientCPUs, p.serverCPUs)
	}
	rep += fmt.Sprintf("\n- machine: %s\n- versions: %s\n- layout: %s; nginx %d worker(s) (memory rows: 1); fenec-entry one process, GOMAXPROCS unset\n",
		machine(), vers, layout, p.workers)
	for t, info := range tlsInfo {
		rep += fmt.Sprintf("- TLS, %s: %s; one self-signed ECDSA P-256 certificate for every target\n", t, info)
	}
	if p.has("idle") || p.has("streams") {
		rep += fmt.Sprintf("- limits: open files %d; nginx worker_connections %d; connhold from %d source address(es)\n", p.nofile, p.needFDs, p.sources)
	}
	if err := p.report(rep + fmt.Sprintf("- raw: %s\n- reproduce: cd %s && %s\n", p.out, p.root, repro)); err != nil {
		return err
	}
	if o.check && !floorOK {
		return errors.New("fenec-entry missed the floor")
	}
	return nil
}

func rotate[T any](s []T, k int) []T {
	k %= len(s)
	return append(slices.Clone(s[k:]), s[:k]...)
}

// limits raises the open-file limit for the held connections of the memory rows (inherited by
// the processes started here), and chooses connhold's source addresses: every client
// connection is a source port of 127.0.0.1 towards one port, and a quarter of the ephemeral
// range is left to everything else.
func (p *proxies) limits() error {
	held, streams := 0, 0
	if p.has("idle") {
		held = p.o.idleConns
	}
	if p.has("streams") {
		streams = p.o.streams
	}
	p.needFDs = max(held, 2*streams) + 1024 // a stream holds two sockets in the proxy
	var lim syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	if want := uint64(max(2*p.needFDs, 65536)); lim.Cur < want {
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: want, Max: max(lim.Max, want)}) != nil {
			if lim.Max < uint64(p.needFDs) {
				return fmt.Errorf("-idle-conns %d and -streams %d need an open-file limit of %d, and the hard limit is %d", p.o.idleConns, p.o.streams, p.needFDs, lim.Max)
			}
			syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: lim.Max, Max: lim.Max})
		}
	}
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	p.nofile = int(min(lim.Cur, 1<<20))
	lo, hi := portRange()
	perSource := (hi - lo + 1) * 3 / 4
	p.sources = (max(held, streams) + perSource - 1) / perSource
	if streams > perSource {
		return fmt.Errorf("-streams %d: the proxy opens one connection to the stand-in per stream, and ip_local_port_range leaves about %d", streams, perSource)
	}
	return nil
}

// startTarget starts a target's processes for the rounds: plain, and TLS in -mode protocols.
func (p *proxies) startTarget(t *target) error {
	tlsToo := slices.ContainsFunc(p.rows, func(r string) bool { return !slices.Contains([]string{"plain", "h2c", "idle", "streams"}, r) })
	plainToo := p.has("plain") || p.has("h2c")
	a, err := p.addrs(3)
	if err != nil {
		return err
	}
	switch t.name {
	case "direct":
		t.plainURL = fmt.Sprintf("http://127.0.0.1:%d%s", p.upPort, reqPath)
	case "nginx":
		if plainToo {
			t.plainURL, t.h2cURL = "http://"+a[0]+reqPath, "http://"+a[1]+reqPath
			servers := server(a[0], "")
			if p.o.mode == "protocols" {
				servers += server(a[1]+" http2", "") // nginx 1.22 speaks h2c with prior knowledge only on a port of its own
			}
			if t.plain, err = p.startNginx("nginx-plain", nginx{servers: servers, up: p.upPort, workers: p.workers}, spec{cpus: p.serverCPUs}, t.plainURL); err != nil {
				return err
			}
		}
		if tlsToo && err == nil {
			t.tlsAddr, t.tlsURL = a[2], "https://"+a[2]+reqPath
			t.tls, err = p.startNginx("nginx-tls", nginx{servers: server(a[2]+" ssl http2", ""), http: nginxTLS(p.cert, p.key), up: p.upPort, workers: p.workers},
				spec{cpus: p.serverCPUs}, t.tlsURL)
		}
	default:
		var listen string
		if plainToo {
			t.plain, listen, _, err = p.startEntry(t.name+"-plain", t.name, p.upPort, false, reqPath)
			t.plainURL, t.h2cURL = "http://"+listen+reqPath, "http://"+listen+reqPath
		}
		if tlsToo && err == nil {
			t.tls, t.tlsAddr, _, err = p.startEntry(t.name+"-tls", t.name, p.upPort, true, reqPath)
			t.tlsURL = "https://" + t.tlsAddr + reqPath
		}
	}
	return err
}

// startEntry starts fenec-entry (bin: fenec-entry or fenec-entry-b) as `fenec-entry serve` in
// front of port up, TLS with the run's certificate, and waits for ready to answer 200; it
// returns its listener's and its admin listener's addresses.
func (p *proxies) startEntry(name, bin string, up int, tls bool, ready string, extra ...string) (*proc, string, string, error) {
	scheme := "http://"
	if tls {
		scheme, extra = "https://", append(extra, "--tls-cert", p.cert, "--tls-key", p.key)
	}
	args, listen, admin, err := p.entryArgs(p.bin[bin], up, extra...)
	if err != nil {
		return nil, "", "", err
	}
	pr, err := p.start(name, spec{cpus: p.serverCPUs}, args...)
	if err != nil {
		return nil, "", "", err
	}
	return pr, listen, admin, waitOK(pr, scheme+listen+ready)
}

// ours is the CPU ticks of everything this run runs: its processes, their children, and this
// process with its reaped children (the clients).
func (p *proxies) ours() int64 {
	p.mu.Lock()
	var ps []int
	for _, pr := range p.procs {
		ps = append(ps, pr.pid)
	}
	p.mu.Unlock()
	return cpuOf(true, ps...) + selfTicks()
}

// waitIdle waits (up to -idle-wait s) until other processes use less than idleMax% of a CPU.
func (p *proxies) waitIdle(round int) {
	for waited := 0; ; waited++ {
		w := openWindow(p.ours)
		time.Sleep(time.Second)
		if w.close(); w.Other <= idleMax {
			return
		}
		if waited >= p.o.idleWait {
			p.logf("warning: round %d starts with other processes at %d%% of a CPU: its numbers will be noisy", round, w.Other)
			return
		}
	}
}

// wrk runs wrk on the client CPUs against url within a window.
func (p *proxies) wrk(url string, threads, conns, secs int) (wrkOut, client, *window, error) {
	w := openWindow(p.ours)
	c, err := runClient(p.clientCPUs, "", time.Duration(secs+30)*time.Second, "wrk", fmt.Sprintf("-t%d", threads), fmt.Sprintf("-c%d", conns),
		fmt.Sprintf("-d%ds", secs), "--timeout", "2s", "--latency", "-s", p.lua, url)
	w.close()
	if err != nil {
		return wrkOut{}, c, w, err
	}
	out, err := parseWrk(c.out)
	return out, c, w, err
}

func (p *proxies) warm() {
	for _, t := range p.targets {
		for _, m := range []string{"plain", "https", "h2", "h2c"} {
			if p.o.warmup > 0 && (m == "plain" || p.has(m)) && t.broken[m] == "" && p.urlOf(t, m) != "" {
				p.load(0, t, m, p.o.warmup)
			}
		}
	}
}

func (p *proxies) urlOf(t *target, m string) string {
	switch m {
	case "plain":
		return t.plainURL
	case "h2c":
		return t.h2cURL
	}
	return t.tlsURL
}

// round is one round: the latency runs, sliced; then each load measurement of every target in
// turn; then resumption; then the memory rows. Each measurement visits every target before the
// next starts, so that what drifts within a round hits both sides of a ratio alike.
func (p *proxies) round(r int, order []*target) error {
	for _, m := range []string{"plain", "https"} {
		if p.has(m) {
			if err := p.latency(r, m, order); err != nil {
				return err
			}
		}
	}
	for _, m := range []string{"plain", "https", "h2", "h2c", "handshakes", "resumption", "idle", "streams"} {
		for _, t := range order {
			if !p.has(m) || t.broken[m] != "" || (m == "handshakes" || m == "resumption") && t.broken["tls10"] != "" {
				continue
			}
			var err error
			switch m {
			case "resumption":
				err = p.resume(r, t)
			case "idle", "streams":
				err = p.memory(r, m, t)
			default:
				err = p.load(r, t, m, p.o.secs)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *proxies) add(res result) {
	res.Kind = "measurement"
	p.rawLine(res)
	p.results = append(p.results, res)
	for _, w := range []struct {
		bad  bool
		what string
	}{{res.Other > idleMax, fmt.Sprintf("other processes took %d%% of a CPU", res.Other)},
		{res.Steal > stealMax, fmt.Sprintf("the hypervisor took %d%% of the CPU time (steal): other guests on this host", res.Steal)},
		{res.Errors > 0, fmt.Sprintf("%d failed or non-2xx requests", res.Errors)}} {
		if w.bad {
			p.logf("warning: round %d, %s, %s: %s", res.Round, res.Target, res.Measurement, w.what)
		}
	}
}

// latency is the c=1 latency runs over m (plain or https) of every target: -latency-slices
// slices each, the targets taking turns (their order rotated each slice too), each target's
// latencies merged over its slices before the percentiles are taken.
func (p *proxies) latency(r int, m string, order []*target) error {
	var live []*target
	res, hist := map[string]*result{}, map[string]map[int]int64{}
	for _, t := range order {
		if t.broken[m] == "" && p.urlOf(t, m) != "" {
			live = append(live, t)
			res[t.name], hist[t.name] = &result{Round: r, Target: t.name, Measurement: m + "_latency"}, map[int]int64{}
		}
	}
	for k := 0; k < p.o.slices; k++ {
		for _, t := range rotate(live, k) {
			w, _, win, err := p.wrk(p.urlOf(t, m), 1, 1, p.o.secs/p.o.slices)
			if err != nil {
				return err
			}
			x := res[t.name]
			for v, c := range w.hist {
				hist[t.name][v] += c
			}
			x.Requests += w.n("requests")
			x.Errors += w.n("socket_errors") + w.n("non_2xx")
			x.Other, x.Steal = max(x.Other, win.Other), max(x.Steal, win.Steal)
		}
	}
	for _, t := range live {
		x := res[t.name]
		x.P50, x.P99 = percentiles(hist[t.name])
		if x.Requests == 0 {
			x.Errors++ // no answer at all is an error too
		}
		p.add(*x)
	}
	return nil
}

// load is one load run of m (round 0: a warm-up, not recorded): plain or https (wrk -t2
// -c-conns), h2 or h2c (h2load) or handshakes (openssl s_time -new, one connection at a time,
// each a full handshake and a GET), with the CPU of the target's processes and the upstream's.
func (p *proxies) load(r int, t *target, m string, secs int) error {
	pr, url := t.tls, p.urlOf(t, m)
	if m == "plain" || m == "h2c" {
		pr = t.plain
	}
	var pids []int
	if pr != nil {
		pids = []int{pr.pid}
	}
	t0, u0 := cpuOf(true, pids...), cpuOf(false, p.up.pid)
	res := result{Round: r, Target: t.name, Measurement: m}
	var win *window
	var err error
	timeout := time.Duration(secs+30) * time.Second
	switch m {
	case "plain", "https":
		var w wrkOut
		if w, _, win, err = p.wrk(url, 2, p.o.conns, secs); err != nil {
			return err
		}
		res.PerS, res.Requests, res.Errors = w.f["rps"], w.n("requests"), w.n("socket_errors")+w.n("non_2xx")
	case "h2", "h2c":
		win = openWindow(p.ours)
		c, err := runClient(p.clientCPUs, "", timeout, "h2load", "-t2", fmt.Sprintf("-c%d", p.o.h2Clients), fmt.Sprintf("-m%d", p.o.h2Streams), "-D", strconv.Itoa(secs), url)
		win.close()
		if err != nil {
			return err
		}
		var proto string
		if res.PerS, res.Requests, res.Errors, proto, err = parseH2load(c.out); err != nil {
			return err
		}
		if proto != m {
			p.logf("warning: round %d, %s, %s: h2load spoke %s: every request counted as an error", r, t.name, m, proto)
			res.Errors += res.Requests + 1
		}
	case "handshakes":
		win = openWindow(p.ours)
		c, err := runClient(p.clientCPUs, "", timeout, "openssl", "s_time", "-new", "-connect", t.tlsAddr, "-www", reqPath, "-time", strconv.Itoa(secs))
		win.close()
		if err != nil {
			return err
		}
		n, bytes := parseSTime(c.out)
		// s_time counts whole seconds: the rate is the connections over the run's wall time.
		res.Requests, res.PerS = n, float64(n)/c.wall.Seconds()
		if n == 0 {
			res.Errors = 1
		} else if bytes != t.tlsBytes { // every connection read an answer of another size than the checked 200
			res.Errors = n
		}
	}
	if r == 0 {
		return nil
	}
	tt, tu := cpuOf(true, pids...)-t0, cpuOf(false, p.up.pid)-u0
	if res.Requests > 0 && pr != nil {
		res.CPUus = float64(tt) * 1e6 / clkTck / float64(res.Requests)
	}
	if tu > 0 && pr != nil {
		res.CPUvsUp = float64(tt) / float64(tu)
	}
	res.Busy, res.Other, res.Steal = win.Busy, win.Other, win.Steal
	res.srvBusy = meanBusy(win.Busy, p.nClient, len(win.Busy))
	p.add(res)
	return nil
}

var (
	h2Finished = regexp.MustCompile(`(?m)^finished in \S+, ([\d.]+) req/s`)
	h2Requests = regexp.MustCompile(`(?m)^requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed`)
	h2Status   = regexp.MustCompile(`(?m)^status codes: \d+ 2xx, (\d+) 3xx`)
	h2Proto    = regexp.MustCompile(`(?m)^Application protocol: (\S+)`)
	sTime      = regexp.MustCompile(`(\d+) connections in [\d.]+ real seconds, (\d+) bytes read per connection`)
	isShard    = regexp.MustCompile(`(?mi)^fenec-shard: 1`)
)

// parseH2load reads h2load's summary: the rate, the requests that succeeded, the failed ones
// (every failure, errors, timeouts and 4xx/5xx alike) with the 3xx, and the protocol spoken.
func parseH2load(out string) (perS float64, ok, bad int64, proto string, err error) {
	m, q := h2Finished.FindStringSubmatch(out), h2Requests.FindStringSubmatch(out)
	if m == nil || q == nil {
		return 0, 0, 0, "", fmt.Errorf("h2load printed no result:\n%s", lastLines(out, 20))
	}
	perS, _ = strconv.ParseFloat(m[1], 64)
	ok, _ = strconv.ParseInt(q[1], 10, 64)
	bad, _ = strconv.ParseInt(q[2], 10, 64)
	if s := h2Status.FindStringSubmatch(out); s != nil {
		n, _ := strconv.ParseInt(s[1], 10, 64)
		bad += n // h2load counts a 3xx as succeeded
	}
	proto = "-"
	if a := h2Proto.FindStringSubmatch(out); a != nil {
		proto = a[1]
	}
	return perS, ok, bad, proto, nil
}

func parseSTime(out string) (conns int64, bytes int) {
	if m := sTime.FindStringSubmatch(out); m != nil {
		conns, _ = strconv.ParseInt(m[1], 10, 64)
		bytes, _ = strconv.Atoi(m[2])
	}
	return conns, bytes
}

// resume: a full handshake whose session is saved, then -resumes reconnects, each offering the
// last session saved (as a client keeps its newest ticket) and saving the one it gets; counts
// those the server resumed (openssl s_client's "Reused"), each answered 200.
func (p *proxies) resume(r int, t *target) error {
	dir := p.path("resume." + t.name)
	os.RemoveAll(dir)
	os.MkdirAll(dir, 0o755)
	sess := func(i int) string { return filepath.Join(dir, strconv.Itoa(i)+".pem") }
	req := "GET " + reqPath + " HTTP/1.0\r\n\r\n"
	c, _ := runClient(p.clientCPUs, req, 10*time.Second, "openssl", "s_client", "-connect", t.tlsAddr, "-sess_out", sess(0), "-ign_eof")
	if _, err := os.Stat(sess(0)); err != nil {
		return fmt.Errorf("%s: openssl s_client saved no session: %s", t.name, lastLines(c.out, 1))
	}
	res := result{Round: r, Target: t.name, Measurement: "resumption"}
	answered := regexp.MustCompile(`(?m)^HTTP/1\.[01] 200`)
	for i := 1; i <= p.o.resumes; i++ {
		c, _ := runClient(p.clientCPUs, req, 10*time.Second, "openssl", "s_client", "-connect", t.tlsAddr, "-sess_in", sess(i-1), "-sess_out", sess(i), "-ign_eof")
		res.Requests++
		if _, err := os.Stat(sess(i)); err != nil || !answered.MatchString(c.out) {
			res.Errors++
			if b, err := os.ReadFile(sess(i - 1)); err == nil {
				os.WriteFile(sess(i), b, 0o600)
			}
		} else if strings.Contains(c.out, "\nReused, ") {
			res.Resumed++
		}
	}
	p.add(res)
	return nil
}

// checkTarget checks every protocol of t by hand before the rounds: status 200 (and HTTP/2
// where asked), Fenec-Shard: 1 and the 64-byte body. A protocol that fails is named in a
// warning and its rows say BROKEN; the target is measured on the others.
func (p *proxies) checkTarget(t *target) {
	for _, c := range []struct{ proto, want, url, flags string }{{"plain", "HTTP/1.1 200", t.plainURL, "--http1.1"},
		{"h2c", "HTTP/2 200", t.h2cURL, "--http2-prior-knowledge"}, {"https", "HTTP/1.1 200", t.tlsURL, "-k --http1.1"}, {"h2", "HTTP/2 200", t.tlsURL, "-k --http2"}} {
		if c.url == "" || c.proto != "plain" && p.o.mode == "requests" {
			continue
		}
		args := append([]string{"-sS", "-D", "-", "-o", "/dev/null", "-w", "SIZE %{size_download}\n", "--max-time", "2"}, strings.Fields(c.flags)...)
		out, err := exec.Command("curl", append(args, c.url)...).CombinedOutput()
		why := ""
		switch s := string(out); {
		case err != nil:
			why = fmt.Sprintf("curl %s: %v: %s", c.flags, err, lastLines(s, 1))
		case !strings.HasPrefix(s, c.want):
			why = fmt.Sprintf("curl %s: want %s, got %q", c.flags, c.want, strings.SplitN(s, "\n", 2)[0])
		case !isShard.MatchString(s) || !strings.Contains(s, "SIZE 64\n"):
			why = "want Fenec-Shard: 1 and the upstream's 64-byte body"
		case regexp.MustCompile(`(?mi)^fenec-home:`).MatchString(s):
			p.logf("warning: %s passed Fenec-Home on to the client", t.name)
		}
		if why != "" {
			p.logf("warning: %s fails the %s check, its %s rows are left out: %s", t.name, c.proto, c.proto, why)
			t.broken[c.proto] = why
		}
	}
	if t.tlsAddr == "" {
		return
	}
	// The request openssl s_time and the resumption send (GET, HTTP/1.0, no Host): the
	// answer's bytes (s_time's must match), and what the handshake settled on.
	c, _ := runClient("", "GET "+reqPath+" HTTP/1.0\r\n\r\n", 5*time.Second, "openssl", "s_client", "-connect", t.tlsAddr, "-quiet")
	out := c.out[max(0, strings.Index(c.out, "HTTP/")):]
	if _, body, _ := strings.Cut(out, "\r\n\r\n"); !regexp.MustCompile(`^HTTP/1\.[01] 200`).MatchString(out) || len(body) != 64 || !isShard.MatchString(out) {
		t.broken["tls10"] = "openssl s_client, GET HTTP/1.0: want 200, Fenec-Shard: 1 and the 64-byte body, got: " + lastLines(c.out, 1)
		p.logf("warning: %s fails the tls10 check, its handshakes and resumption rows are left out: %s", t.name, t.broken["tls10"])
		return
	}
	t.tlsBytes = len(out)
	c, _ = runClient("", "", 5*time.Second, "openssl", "s_client", "-connect", t.tlsAddr, "-alpn", "h2,http/1.1")
	field := func(re string) string {
		if m := regexp.MustCompile(re).FindStringSubmatch(c.out); m != nil {
			return m[1]
		}
		return "none"
	}
	t.tlsInfo = fmt.Sprintf("%s %s, key exchange %s, %s signature, ALPN %s", field(`(?m)^(?:New|Reused), (\S+?),`),
		field(`(?m)^(?:New|Reused), .* Cipher is (\S+)`), field(`(?m)^Server Temp Key: ([^,\n]+)`),
		field(`(?m)^Peer signature type: (\S+)`), field(`(?m)^ALPN protocol: (\S+)`))
}

// broken is why a measurement of a target was left out, by target and measurement.
func (p *proxies) broken() map[[2]string]string {
	out := map[[2]string]string{}
	rows := map[string][]string{"plain": {"plain", "plain_latency"}, "https": {"https", "https_latency"}, "h2": {"h2"}, "h2c": {"h2c"}, "tls10": {"handshakes", "resumption"}}
	for _, t := range p.targets {
		for proto, why := range t.broken {
			for _, m := range rows[proto] {
				out[[2]string{t.name, m}] = proto + ": " + why
			}
		}
	}
	return out
}

// memory is one memory measurement (idle or streams): the target started afresh (nginx with
// one worker, whose RSS is the reading), a warm-up of holdParallel connections of the kind, its
// RSS (and the entry's goroutines), connhold opening and holding the connections, the same
// again -settle seconds after READY.
func (p *proxies) memory(r int, scen string, t *target) error {
	n, up, ready, path := p.o.idleConns, p.upPort, reqPath, reqPath
	if scen == "streams" {
		n, up, ready, path = p.o.streams, p.standinPort, "/t/acme/echo", "/t/acme/events"
	}
	a, err := p.addrs(1)
	if err != nil {
		return err
	}
	var pr *proc
	admin := ""
	if t.name == "nginx" {
		// No timeout a held connection could reach: keepalive_timeout (75 s by default) would
		// close an idle one, proxy_read_timeout (60 s) a stream quieter than that.
		pr, err = p.startNginx("nginx-mem", nginx{servers: server(a[0], "            proxy_read_timeout 1h;\n            proxy_send_timeout 1h;\n"),
			up: up, workers: 1, conns: p.needFDs, nofile: p.nofile, http: "    keepalive_timeout 1h;\n"}, spec{cpus: p.serverCPUs}, "http://"+a[0]+ready)
	} else {
		var extra []string // a stream is a request in flight: --max-inflight is raised only past its default
		if p.o.streams+holdParallel > 10000 {
			extra = []string{"--max-inflight", strconv.Itoa(p.o.streams + holdParallel)}
		}
		pr, a[0], admin, err = p.startEntry(t.name+"-mem", t.name, up, false, ready, extra...)
	}
	if pr != nil {
		defer p.stop(pr)
	}
	if err != nil {
		return err
	}
	hold := []string{"-addr", a[0], "-parallel", strconv.Itoa(holdParallel), "-timeout", "10s", "-sources", strconv.Itoa(p.sources), "-path", path,
		"-stream=" + strconv.FormatBool(scen == "streams")}
	if c, err := runClient(p.clientCPUs, "", 60*time.Second, append([]string{p.self, "connhold", "-n", strconv.Itoa(holdParallel)}, hold...)...); err != nil || !strings.Contains(c.out, "DONE") {
		return fmt.Errorf("warm-up through %s (%s): %w: %s", t.name, scen, err, lastLines(c.out, 2))
	}
	time.Sleep(time.Second)
	pids := []int{pr.pid}
	if t.name == "nginx" {
		pids = children(pr.pid) // its worker: the master only starts and watches it
	}
	before, err := rssKB(pids...)
	if err != nil {
		return err
	}
	g0 := goroutines(admin)
	h, err := p.connhold(p.clientCPUs, append(hold, "-n", strconv.Itoa(n), "-max-failed", strconv.Itoa(n/500))...)
	if err != nil {
		return fmt.Errorf("connhold through %s (%s): %w", t.name, scen, err)
	}
	time.Sleep(time.Duration(p.o.settle) * time.Second)
	after, err := rssKB(pids...)
	g1 := goroutines(admin)
	closed, err2 := h.release()
	if err = errors.Join(err, err2); err != nil {
		return err
	}
	held := int(h.res.Held)
	res := result{Round: r, Target: t.name, Measurement: scen, Conns: held, Errors: int64(n - held), RSSBefore: before, RSSAfter: after,
		KBPerConn: float64(after-before) / float64(held), Closed: closed}
	if admin != "" {
		g := (g1 - g0) / float64(held)
		res.GorPerConn = &g
	}
	if closed > 0 {
		p.logf("warning: %s (%s): %d of %d held connections were closed by the proxy before they were let go", t.name, scen, closed, held)
	}
	p.logf("round %d, %s, %s: %d conns in %d ms, RSS %d -> %d KiB: %.3f KB/conn", r, scen, t.name, held, h.res.OpenMs, before, after, res.KBPerConn)
	p.add(res)
	return nil
}

// goroutines is go_goroutines of the entry's /metrics at admin (NaN without one).
func goroutines(admin string) float64 {
	if admin == "" {
		return math.NaN()
	}
	_, b, _ := get("http://"+admin+"/metrics", 0)
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "go_goroutines" {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return math.NaN()
}
