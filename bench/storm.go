//go:build linux

package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// storm: the requests fenec-entry and nginx answer and LOSE, each in front of the same
// upstream: new connections by the million, keep-alive, pipelining, slow clients, more
// connections than the open-file limit, a graceful stop and an upgrade in place under load.
// bench/README.md ("Storm") says what each row does and how a request is counted.

type storm struct {
	*run
	setup
	rows, names                []string
	quick                      bool
	newConns, nofile, hold     int
	roundS, runS, slowClients  int
	slowS, holders, sources    int
	targetNofile, clientNofile int
	entry, pipe                string
	nUp                        int
	shared                     map[string]*tgt // rows 1-4's instances
	recs                       []stormRec
}

const wrkConns = 64 // wrk's connections, rows 1-4

// stormRows are the rows by number (their place, from 1) and name.
var stormRows = []string{"new", "keepalive", "pipelined", "slow", "nofile", "sigterm", "upgrade"}

// stormRec is one result: a line of the table before row 1's rounds are summed, and of the raw file.
type stormRec struct {
	Kind       string           `json:"kind"`
	Row        int              `json:"row"`
	Title      string           `json:"title"`
	Target     string           `json:"target"`
	Requests   int64            `json:"requests"`
	OK         int64            `json:"answered_2xx"`
	Non        map[string]int64 `json:"non_2xx_by_status"`
	Lost       map[string]int64 `json:"lost_by_kind"`
	NotConn    map[string]int64 `json:"not_connected_by_kind"`
	ClosedIdle int64            `json:"closed_idle"`
	Note       string           `json:"note"`
	Raw        any              `json:"raw"`
}

func stormMain(args []string) error {
	fs := flag.NewFlagSet("storm", flag.ExitOnError)
	rows := fs.String("rows", "all", "comma list of rows by number or name: 1 new, 2 keepalive, 3 pipelined, 4 slow, 5 nofile, 6 sigterm, 7 upgrade")
	targets := fs.String("targets", "nginx,fenec-entry", "comma list from nginx,fenec-entry")
	entryBin := fs.String("entry-bin", "", "measure this fenec-entry binary (a copy of it) instead of building ./cmd/fenec-entry")
	quick := fs.Bool("quick", false, "a short run (about 2 minutes): 3-second runs, one round of row 1, 50 slow clients, row 5 at -nofile 2000 -hold 2100")
	newConns := fs.Int("new-conns", 0, "row 1: rounds until fenec-entry has made N requests (default 2000000; -quick: one round)")
	nofile := fs.Int("nofile", 0, "row 5: the targets' open-file limit (default 20000; -quick 2000)")
	hold := fs.Int("hold", 0, "row 5: idle keep-alive connections held (default 21000; -quick 2100)")
	out := fs.String("out", "", "the raw file, JSON lines (default bench/out/storm-<UTC time>.jsonl); the table goes beside it as .md")
	keep := fs.Bool("keep", false, "keep the temp dir (configs, every log)")
	fs.Parse(args)
	s := &storm{quick: *quick, roundS: 30, runS: 10, slowClients: 200, slowS: 15, newConns: 2000000, nofile: 20000, hold: 21000, shared: map[string]*tgt{}}
	if s.quick {
		s.roundS, s.runS, s.slowClients, s.slowS, s.newConns, s.nofile, s.hold = 3, 3, 50, 5, 1, 2000, 2100
	}
	s.newConns, s.nofile, s.hold = cmp.Or(*newConns, s.newConns), cmp.Or(*nofile, s.nofile), cmp.Or(*hold, s.hold)
	if s.nofile < 256 || s.hold < 1 || s.hold > 200000 {
		return errors.New("-nofile: want 256 or more; -hold: 1..200000")
	}
	if *rows == "all" {
		*rows = "1,2,3,4,5,6,7"
	}
	for _, r := range strings.Split(*rows, ",") {
		if n, err := strconv.Atoi(r); err == nil && n >= 1 && n <= len(stormRows) {
			r = stormRows[n-1]
		}
		if !slices.Contains(stormRows, r) {
			return fmt.Errorf("-rows: want a comma list from 1-7 or %s, got %q", strings.Join(stormRows, ","), r)
		}
		s.rows = append(s.rows, r)
	}
	for _, t := range strings.Split(*targets, ",") {
		if t != "nginx" && t != "fenec-entry" {
			return fmt.Errorf("-targets: want nginx and/or fenec-entry, got %q", t)
		}
		s.names = append(s.names, t)
	}
	var err error
	if s.run, err = newRun("storm", *keep); err != nil {
		return err
	}
	defer s.close()
	return s.main(*entryBin, *out, reproduce("storm", fs))
}

func (s *storm) main(entryBin, out, repro string) error {
	if err := need(map[string]string{"wrk": "wrk", "nginx": "nginx-light", "prlimit": "util-linux", "curl": "curl"}); err != nil {
		return err
	}
	// The targets run with the open-file limit found here (rows 1-4, 6, 7) or -nofile (row 5);
	// the clients with more, when it may be raised. Row 5's connections are held by as many
	// connhold processes as that limit needs, each holding at most the limit less 1000.
	var lim syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	s.targetNofile = int(min(lim.Cur, 1<<20))
	want := min(uint64(max(s.hold+20000, 65536)), lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: want, Max: lim.Max}); err != nil {
		return fmt.Errorf("raising the open-file limit to %d: %w", want, err)
	}
	if s.clientNofile = int(want); s.clientNofile < 4096 {
		return fmt.Errorf("the open-file limit is %d: the clients need 4096 or more", s.clientNofile)
	}
	if slices.Contains(s.rows, "nofile") && uint64(s.nofile) > lim.Max {
		return fmt.Errorf("-nofile %d: above the hard open-file limit (%d), which prlimit cannot raise here", s.nofile, lim.Max)
	}
	s.holders = (s.hold + s.clientNofile - 1001) / (s.clientNofile - 1000)
	lo, hi := portRange()
	s.sources = (s.hold+100)/((hi-lo+1)/2) + 1 // no source address gives more than half the ports to one target port
	var err error
	s.logf("building the entry")
	if s.entry, err = s.entryBin("fenec-entry", entryBin); err != nil { // a copy: row 7 upgrades it in place
		return err
	}
	if s.pipe, err = s.writeLua(16); err != nil {
		return err
	}
	if s.setup, err = s.setUp("", out); err != nil {
		return err
	}
	defer s.raw.Close()
	verEntry, verNginx := version(0, s.entry, "version"), version(3, "nginx", "-v")
	s.rawLine(map[string]any{"kind": "meta", "machine": machine(), "fenec_entry": verEntry, "nginx": verNginx,
		"wrk": version(2, "wrk", "-v"), "go": version(3, "go", "version"), "rows": s.rows, "targets": s.names, "quick": s.quick,
		"new_conns": s.newConns, "nofile": s.nofile, "hold": s.hold, "target_nofile": s.targetNofile, "sources": s.sources, "reproduce": repro})
	t0 := time.Now()
	for _, row := range s.rows {
		if slices.Index(stormRows, row) >= 4 { // rows 5-7 start their own
			for t, x := range s.shared {
				s.stop(x.p)
				delete(s.shared, t)
			}
		}
		if err := s.row(row); err != nil {
			return fmt.Errorf("row %s: %w", row, err)
		}
	}
	rep := stormTable(s.recs, s.roundS) + fmt.Sprintf(`
- requests: answered (2xx and not) + LOST. **LOST**: a request written (over TLS: its connection's handshake begun) on a
  connection the target's kernel accepted, with no whole answer, by kind (bench/README.md, "How a request is counted").
- not connected: dials that failed, no request written (refused: nothing listens, as after a graceful stop).
- verdict: rows 1-6, the LOST; row 7, every failure (non-2xx, LOST, not connected, and connections seen closed while
  idle), since nothing may fail at an upgrade.
- machine: %s; nothing pinned
- fenec-entry: %s (--drain 5s, --header-timeout 10s, its default); nginx: %s (%d workers, 1 in row 5)
- open-file limit: the targets %d (row 5: %d), each client process %d; row 5's connections held by %d connhold
  process(es), from %d source address(es)
- run time: %s; raw: %s
- reproduce: cd %s && %s
`, machine(), verEntry, verNginx, numCPU(), s.targetNofile, s.nofile, s.clientNofile, s.holders, s.sources,
		time.Since(t0).Round(time.Second), s.out, s.root, repro)
	return s.report(rep)
}

func portRange() (lo, hi int) {
	b, _ := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	fmt.Sscan(string(b), &lo, &hi)
	if hi <= lo {
		return 32768, 60999
	}
	return lo, hi
}

// tgt is a target instance the storm started.
type tgt struct {
	name, kind, addr, url, dir string
	p                          *proc
}

// up starts target t afresh, kind plain or tls, under the open-file limit nofile (0: the
// run's), nginx with workers workers (0: one a CPU), as a daemon when daemon (its upgrade).
func (s *storm) up(t, kind string, nofile, workers int, daemon bool) (*tgt, error) {
	s.nUp++
	x := &tgt{name: fmt.Sprintf("%s-%d", t, s.nUp), kind: kind}
	x.dir = s.path(x.name)
	os.MkdirAll(x.dir, 0o755)
	nofile = cmp.Or(nofile, s.targetNofile)
	scheme, extra := "http://", []string{"--drain", "5s", "--pid-file", x.dir + "/entry.pid"}
	if kind == "tls" {
		scheme, extra = "https://", append(extra, "--tls-cert", s.cert, "--tls-key", s.key)
	}
	if t == "nginx" {
		a, err := s.addrs(1)
		if err != nil {
			return nil, err
		}
		// worker_connections above the open-file limit by 1/32 of it, so that the limit is what
		// binds (row 5): nginx closes idle keep-alive connections to take new ones once fewer
		// than 1/16 of worker_connections are free, which is then below the limit. An idle
		// keep-alive connection is kept 300 s, longer than row 5 holds them.
		n := nginx{up: s.upPort, workers: cmp.Or(workers, numCPU()), conns: nofile + nofile/32, daemon: daemon, http: "    keepalive_timeout 300s;\n"}
		listen := a[0]
		if kind == "tls" {
			listen, n.http = listen+" ssl", n.http+nginxTLS(s.cert, s.key)
		}
		n.servers = server(listen, "")
		x.addr, x.url = a[0], scheme+a[0]+reqPath
		var err2 error
		x.p, err2 = s.startNginx(x.name, n, spec{nofile: nofile}, x.url)
		return x, err2
	}
	args, listen, _, err := s.entryArgs(s.entry, s.upPort, extra...)
	if err != nil {
		return nil, err
	}
	x.addr, x.url = listen, scheme+listen+reqPath
	if x.p, err = s.start(x.name, spec{nofile: nofile}, args...); err != nil {
		return nil, err
	}
	return x, waitOK(x.p, x.url)
}

func (s *storm) record(r stormRec) {
	r.Kind, r.Requests = "storm", r.OK+sum(r.Non)+sum(r.Lost)
	s.rawLine(r)
	s.recs = append(s.recs, r)
	s.logf("  %s: %d requests, %d LOST %v", r.Target, r.Requests, sum(r.Lost), r.Lost)
}

func sum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// wrk runs wrk -t2 -c64 --timeout 5s on x for secs seconds with lua. wrk's kinds: read (ended
// or reset before the whole answer), write, timeout (an answer slower than 5 s, counted again
// every 2 s while it waits: an upper bound), connect (a failed dial, refused or not).
func (s *storm) wrk(x *tgt, secs int, lua string, extra ...string) (stormRec, error) {
	argv := append([]string{"wrk", "-t2", fmt.Sprintf("-c%d", wrkConns), fmt.Sprintf("-d%ds", secs), "--timeout", "5s", "-s", lua}, extra...)
	c, err := runClient("", "", time.Duration(secs+60)*time.Second, append(argv, x.url)...)
	if err != nil {
		return stormRec{}, err
	}
	w, err := parseWrk(c.out)
	if err != nil {
		return stormRec{}, err
	}
	r := stormRec{OK: w.n("requests") - w.n("non_2xx"), Non: map[string]int64{}, Lost: map[string]int64{}, NotConn: map[string]int64{}, Raw: w.f}
	for _, k := range []struct {
		m           map[string]int64
		field, kind string
	}{{r.Non, "non_2xx", "non-2xx"}, {r.Lost, "read_errors", "read"}, {r.Lost, "write_errors", "write"}, {r.Lost, "timeout_errors", "timeout"}, {r.NotConn, "connect_errors", "connect"}} {
		if n := w.n(k.field); n > 0 {
			k.m[k.kind] = n
		}
	}
	return r, nil
}

// loadRec is the record of a connhold's line: its counts, and as its note the connections
// made, those seen closed while idle and the lost on a kept-alive connection.
func loadRec(l *loadResult) stormRec {
	r := stormRec{Non: map[string]int64{}, Lost: l.LostBy, NotConn: l.DialFailed, ClosedIdle: l.ClosedIdle, Raw: l}
	for code, n := range l.AnsweredBy {
		if strings.HasPrefix(code, "2") {
			r.OK += n
		} else {
			r.Non[code] = n
		}
	}
	r.Note = fmt.Sprintf("%d connections", l.Connections)
	if l.ClosedIdle > 0 {
		r.Note += fmt.Sprintf(", %d seen closed while idle (dialed again)", l.ClosedIdle)
	}
	if l.LostOnReused > 0 {
		r.Note += fmt.Sprintf(", %d of the lost on a kept-alive connection", l.LostOnReused)
	}
	return r
}

// add adds o's counts to r's.
func (r *stormRec) add(o stormRec) {
	r.Requests, r.OK, r.ClosedIdle, r.Note = r.Requests+o.Requests, r.OK+o.OK, r.ClosedIdle+o.ClosedIdle, cmp.Or(o.Note, r.Note)
	for _, p := range [][2]map[string]int64{{o.Non, r.Non}, {o.Lost, r.Lost}, {o.NotConn, r.NotConn}} {
		for k, n := range p[0] {
			p[1][k] += n
		}
	}
}

// load is a connhold -load on x, over TLS when x is, its record once released.
func (s *storm) load(x *tgt, args ...string) (*holder, error) {
	return s.connhold("", append([]string{"-addr", x.addr, "-load", "-timeout", "5s", "-n", "16", "-tls=" + strconv.FormatBool(x.kind == "tls")}, args...)...)
}

func loaded(h *holder, err error) (stormRec, error) {
	if err != nil {
		return stormRec{}, err
	}
	_, err = h.release()
	return loadRec(&h.res), err
}

// row runs one row on every target.
func (s *storm) row(row string) error {
	if row == "new" {
		return s.rowNew()
	}
	kinds := []string{"plain"}
	if row == "sigterm" || row == "upgrade" {
		kinds = append(kinds, "tls")
	}
	for _, k := range kinds {
		for _, t := range s.names {
			s.logf("row %s: %s, %s", row, t, k)
			var err error
			switch row {
			case "keepalive", "pipelined":
				err = s.rowWrk(row, t)
			case "slow":
				err = s.rowSlow(t)
			case "nofile":
				err = s.rowNofile(t)
			default:
				err = s.rowSignal(row, k, t)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// plain is target t's instance for rows 1-4, started once.
func (s *storm) plain(t string) (*tgt, error) {
	if x := s.shared[t]; x != nil {
		return x, nil
	}
	x, err := s.up(t, "plain", 0, 0, false)
	s.shared[t] = x
	return x, err
}

// rowNew is row 1: rounds of -roundS seconds a target, the two taking turns (the order
// rotated each round), until fenec-entry has made -new-conns requests.
func (s *storm) rowNew() error {
	total := map[string]int64{}
	for round := 1; round <= 200; round++ {
		for i := range s.names {
			t := s.names[(i+round-1)%len(s.names)]
			s.logf("row 1, round %d: %s", round, t)
			x, err := s.plain(t)
			if err != nil {
				return err
			}
			r, err := s.wrk(x, s.roundS, s.lua, "-H", "Connection: close")
			if err != nil {
				return err
			}
			r.Row, r.Title, r.Target = 1, fmt.Sprintf("1 new connection each request (wrk -c%d, Connection: close)", wrkConns), t
			s.record(r)
			total[t] += r.OK
		}
		made := total[s.names[0]]
		if slices.Contains(s.names, "fenec-entry") {
			made = total["fenec-entry"]
		}
		if made >= int64(s.newConns) {
			break
		}
	}
	return nil
}

// rowWrk is rows 2 (keep-alive) and 3 (pipelined, 16 requests a write).
func (s *storm) rowWrk(row, t string) error {
	x, err := s.plain(t)
	if err != nil {
		return err
	}
	lua, title := s.lua, fmt.Sprintf("2 keep-alive (wrk -c%d)", wrkConns)
	if row == "pipelined" {
		lua, title = s.pipe, fmt.Sprintf("3 pipelined, 16 requests a write (wrk -c%d)", wrkConns)
	}
	r, err := s.wrk(x, s.runS, lua)
	r.Row, r.Title, r.Target = slices.Index(stormRows, row)+1, title, t
	if err == nil {
		s.record(r)
	}
	return err
}

// rowSlow is row 4: slow clients, a byte every 5-20 ms (a GET's head, ~70 bytes, in about a
// second, a POST's with its 32-byte body about two, well within the entry's 10 s
// --header-timeout), beside a keep-alive wrk load.
func (s *storm) rowSlow(t string) error {
	x, err := s.plain(t)
	if err != nil {
		return err
	}
	type res struct {
		r   stormRec
		err error
	}
	done := make(chan res, 1)
	go func() { r, err := s.wrk(x, s.slowS+3, s.lua); done <- res{r, err} }()
	h, err := s.load(x, "-slow", "-n", strconv.Itoa(s.slowClients), "-per-conn", "4", "-byte-min", "5ms", "-byte-max", "20ms", "-body", "32",
		"-timeout", "10s", "-duration", fmt.Sprintf("%ds", s.slowS))
	w := <-done
	r, err := loaded(h, err)
	if err = errors.Join(err, w.err); err != nil {
		return err
	}
	r.Row, r.Title, r.Target = 4, fmt.Sprintf("4 slow clients, a byte every 5-20 ms (%d clients, connhold -load -slow)", s.slowClients), t
	s.record(r)
	w.r.Row, w.r.Title, w.r.Target = 4, fmt.Sprintf("4 keep-alive beside the slow clients (wrk -c%d)", wrkConns), t
	s.record(w.r)
	return nil
}

// rowNofile is row 5: the target afresh under -nofile, nginx with one worker; -hold idle
// keep-alive connections opened and held; then, while they are held, a fresh GET and 5 s of
// fresh clients.
func (s *storm) rowNofile(t string) error {
	x, err := s.up(t, "plain", s.nofile, 1, false)
	if err != nil {
		return err
	}
	defer s.stop(x.p)
	first := stormRec{Row: 5, Title: fmt.Sprintf("5 open-file limit %d, %d idle connections: their first requests (connhold)", s.nofile, s.hold),
		Target: t, Non: map[string]int64{}, Lost: map[string]int64{}, NotConn: map[string]int64{}}
	var hs []*holder
	var held, openMs, lastMs int64
	var raws []any
	for j := range s.holders {
		h, err := s.connhold("", "-n", strconv.Itoa(s.hold/s.holders+map[bool]int{true: 1}[j < s.hold%s.holders]), "-addr", x.addr,
			"-parallel", "256", "-timeout", "5s", "-sources", strconv.Itoa(s.sources), "-max-failed", strconv.Itoa(s.hold))
		if err != nil {
			return fmt.Errorf("connhold through %s: %w", t, err)
		}
		hs = append(hs, h)
		first.add(loadRec(&h.res))
		held, openMs, lastMs, raws = held+h.res.Held, max(openMs, h.res.OpenMs), max(lastMs, h.res.LastOKMs), append(raws, &h.res)
	}
	t0 := time.Now()
	code, _, ferr := get(x.url, 0)
	freshS := time.Since(t0).Seconds()
	f, err := loaded(s.load(x, "-close", "-n", "4", "-duration", "5s"))
	if err != nil {
		return err
	}
	closed := 0
	for _, h := range hs {
		n, err := h.release()
		if err != nil {
			return err
		}
		closed += n
	}
	logText, _ := os.ReadFile(x.p.log)
	count := func(what string) int { return strings.Count(strings.ToLower(string(logText)), what) }
	first.Raw, first.Note = raws, fmt.Sprintf("took %.1f s to take %d (all tried in %.1f s); %d closed by %s while held; its log: 'too many open files' %d times",
		float64(lastMs)/1000, held, float64(openMs)/1000, closed, t, count("too many open files"))
	if t == "nginx" {
		first.Note += fmt.Sprintf(", 'reusing connections' %d times", count("reusing connections"))
	}
	s.record(first)
	f.Row, f.Title, f.Target, f.Note = 5, "5 open-file limit: fresh clients while held (5 s, connhold -load -close -n 4)", t, fmt.Sprintf("fresh GET: %d in %.3f s; %s", code, freshS, f.Note)
	if ferr != nil {
		f.Note = "fresh GET: no answer within 2 s; " + f.Note
	}
	s.record(f)
	return nil
}

// rowSignal is rows 6 and 7 on a fresh instance: two connhold loads of 16 clients, new
// connections and keep-alive; 2 s in, the graceful stop (the entry: SIGTERM, --drain 5s;
// nginx: SIGQUIT), the loads running on until it has exited and 1 s more (refused); or the
// upgrade in place (the entry: SIGUSR2, the new PID followed in --pid-file until the old
// process has exited; nginx: USR2 to the master, the new master up with its workers, WINCH,
// the old workers gone, QUIT), 2 s more on the new process, which must answer.
func (s *storm) rowSignal(row, k, t string) error {
	x, err := s.up(t, k, 0, 0, t == "nginx" && row == "upgrade")
	if err != nil {
		return err
	}
	defer func() { s.stop(x.p) }() // the new process after an upgrade
	ln, err := s.load(x, "-close")
	if err != nil {
		return err
	}
	lk, err := s.load(x)
	if err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	note, title, old := "", "", x.p
	if row == "sigterm" {
		sig, name := syscall.SIGTERM, "SIGTERM"
		if t == "nginx" {
			sig, name = syscall.SIGQUIT, "SIGQUIT"
		}
		syscall.Kill(old.pid, sig)
		d, err := old.gone(40 * time.Second)
		if err != nil {
			return err
		}
		time.Sleep(time.Second) // and the load goes on, refused
		title, note = fmt.Sprintf("6 %s under load, %s", name, kinds[k]), fmt.Sprintf("%s; exited %.1f s later", name, d.Seconds())
	} else {
		syscall.Kill(old.pid, syscall.SIGUSR2)
		pidFile := x.dir + "/entry.pid"
		if t == "nginx" {
			pidFile = x.dir + "/nginx.pid"
		}
		pid, err := waitPidFile(pidFile, old.pid, 35*time.Second)
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", t, err, old.tail())
		}
		x.p = s.follow(x.name+"-new", pid)
		defer s.stop(old)
		note = "SIGUSR2; the old process exited %.1f s after the new one took over"
		if t == "nginx" {
			if err := waitFor(35*time.Second, "nginx: no new master with workers", func() bool { return len(children(pid)) > 0 }); err != nil {
				return err
			}
			syscall.Kill(old.pid, syscall.SIGWINCH)
			if err := waitFor(30*time.Second, "nginx: the old workers still run after WINCH", func() bool {
				return !slices.ContainsFunc(children(old.pid), func(c int) bool { return c != pid })
			}); err != nil {
				return err
			}
			syscall.Kill(old.pid, syscall.SIGQUIT)
			note = "USR2, WINCH, QUIT; the old master exited %.1f s after QUIT"
		}
		d, err := old.gone(40 * time.Second)
		if err != nil {
			return err
		}
		time.Sleep(2 * time.Second) // the load goes on, on the new process
		if code, _, err := get(x.url, 0); err != nil || code != 200 {
			return fmt.Errorf("%s: the new process does not answer after the upgrade (%d, %v)", t, code, err)
		}
		title, note = "7 upgrade in place under load, "+kinds[k], fmt.Sprintf(note, d.Seconds())
	}
	for _, l := range []struct {
		h    *holder
		what string
	}{{ln, "new connections (connhold -load -close)"}, {lk, "keep-alive (connhold -load)"}} {
		r, err := loaded(l.h, nil)
		if err != nil {
			return err
		}
		r.Row, r.Title, r.Target, r.Note = slices.Index(stormRows, row)+1, title+": "+l.what, t, r.Note+"; "+note
		s.record(r)
	}
	return nil
}

var kinds = map[string]string{"plain": "plain", "tls": "TLS"}

// waitFor polls ok every 50 ms until it holds, or fails with what after d.
func waitFor(d time.Duration, what string, ok func() bool) error {
	for t0 := time.Now(); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Since(t0) > d {
			return fmt.Errorf("%s within %v", what, d)
		}
	}
	return nil
}

// stormTable is the table: a line a row and target (row 1's rounds summed).
func stormTable(recs []stormRec, roundS int) string {
	var order []string
	lines, runs := map[string]*stormRec{}, map[string]int{}
	for _, r := range recs {
		k := r.Title + "\x00" + r.Target
		l := lines[k]
		if l == nil {
			l = &stormRec{Row: r.Row, Title: r.Title, Target: r.Target, Non: map[string]int64{}, Lost: map[string]int64{}, NotConn: map[string]int64{}}
			lines[k] = l
			order = append(order, k)
		}
		runs[k]++
		l.add(r)
	}
	show := func(m map[string]int64) string {
		if sum(m) == 0 {
			return "0"
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
		return fmt.Sprintf("%d (%s)", sum(m), strings.Join(parts, ", "))
	}
	var b strings.Builder
	b.WriteString("| row | target | requests | answered 2xx | non-2xx | LOST | not connected | verdict | notes |\n|---|---|--:|--:|--:|--:|--:|---|---|\n")
	for _, k := range order {
		l := lines[k]
		fail, v := sum(l.Lost), "none lost"
		if fail > 0 {
			v = fmt.Sprintf("**LOST %d**", fail)
		}
		if l.Row == 7 { // nothing may fail at an upgrade
			if fail += sum(l.Non) + sum(l.NotConn) + l.ClosedIdle; fail > 0 {
				v = fmt.Sprintf("**FAILED %d**", fail)
			} else {
				v = "no failure"
			}
		}
		if l.Row == 1 {
			l.Note = strings.TrimSuffix(fmt.Sprintf("%d round%s of %d s; %s", runs[k], map[bool]string{true: "s"}[runs[k] > 1], roundS, l.Note), "; ")
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s | %s | %s | %s |\n", l.Title, l.Target, l.Requests, l.OK, show(l.Non), show(l.Lost), show(l.NotConn), v, l.Note)
	}
	return b.String()
}
