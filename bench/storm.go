//go:build linux

package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// storm: the requests fenec-entry and nginx answer and LOSE, each in front of the same
// bench/upstream: new connections by the million, keep-alive, pipelining, slow clients, more
// connections than the open-file limit, a graceful stop and an upgrade in place under load.
// bench/README.md ("Storm") says what each row does and how a request is counted.

type storm struct {
	*run
	rows                         []int
	names                        []string
	quick                        bool
	newConns, nofile, hold       int
	roundS, runS, slowClients    int
	slowS, holders, sources      int
	targetNofile, clientNofile   int
	entry, connhold, upstreamBin string
	cert, key, lua, pipeLua      string
	upPort, nUp                  int
	raw                          *os.File
	recs                         []stormRec
	roundsNew                    int
	verEntry, verNginx           string
}

const (
	stormConns    = 64 // wrk's connections, rows 1-4
	pipeline      = 16 // row 3: requests a write
	signalClients = 16 // rows 6-7: clients of each load
	drain         = "5s"
)

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
	basePort := fs.Int("base-port", 18500, "first port tried for the listeners")
	fs.Parse(args)
	s := &storm{quick: *quick, roundS: 30, runS: 10, slowClients: 200, slowS: 15, newConns: 2000000, nofile: 20000, hold: 21000}
	if s.quick {
		s.roundS, s.runS, s.slowClients, s.slowS, s.newConns, s.nofile, s.hold = 3, 3, 50, 5, 1, 2000, 2100
	}
	for _, f := range []struct{ v, into *int }{{newConns, &s.newConns}, {nofile, &s.nofile}, {hold, &s.hold}} {
		if *f.v != 0 {
			*f.into = *f.v
		}
	}
	if s.nofile < 256 || s.hold < 1 || s.hold > 200000 {
		return errors.New("-nofile: want 256 or more; -hold: 1..200000")
	}
	names := map[string]int{"new": 1, "keepalive": 2, "pipelined": 3, "slow": 4, "nofile": 5, "sigterm": 6, "upgrade": 7}
	if *rows == "all" {
		*rows = "1,2,3,4,5,6,7"
	}
	for _, r := range strings.Split(*rows, ",") {
		n, err := strconv.Atoi(r)
		if err != nil {
			n = names[r]
		}
		if n < 1 || n > 7 {
			return fmt.Errorf("-rows: want a comma list from 1-7 or new,keepalive,pipelined,slow,nofile,sigterm,upgrade, got %q", r)
		}
		s.rows = append(s.rows, n)
	}
	for _, t := range strings.Split(*targets, ",") {
		if t != "nginx" && t != "fenec-entry" {
			return fmt.Errorf("-targets: want nginx and/or fenec-entry, got %q", t)
		}
		s.names = append(s.names, t)
	}
	var err error
	if s.run, err = newRun("storm", *keep, *basePort); err != nil {
		return err
	}
	defer s.close()
	return s.main(*entryBin, *out, fs)
}

func (s *storm) has(row int) bool { return slices.Contains(s.rows, row) }

func (s *storm) main(entryBin, out string, fs *flag.FlagSet) error {
	if err := need(map[string]string{"wrk": "wrk", "nginx": "nginx-light", "prlimit": "util-linux", "curl": "curl"}); err != nil {
		return err
	}
	// The targets run with the open-file limit found here (rows 1-4, 6, 7) or -nofile (row 5);
	// the clients with more, when it may be raised. Row 5's connections are held by as many
	// connhold processes as that limit needs, each holding at most the limit less 1000.
	var lim syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	s.targetNofile = int(min(lim.Cur, 1<<20))
	want := uint64(max(s.hold+20000, 65536))
	if lim.Max < want {
		want = lim.Max
	}
	l := syscall.Rlimit{Cur: want, Max: max(lim.Max, want)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("raising the open-file limit to %d: %w", want, err)
	}
	s.clientNofile = int(want)
	if s.clientNofile < 4096 {
		return fmt.Errorf("the open-file limit is %d: the clients need 4096 or more", s.clientNofile)
	}
	if s.has(5) && uint64(s.nofile) > lim.Max {
		return fmt.Errorf("-nofile %d: above the hard open-file limit (%d), which prlimit cannot raise here", s.nofile, lim.Max)
	}
	s.holders = (s.hold + s.clientNofile - 1001) / (s.clientNofile - 1000)
	lo, hi := portRange()
	s.sources = (s.hold+100)/((hi-lo+1)/2) + 1 // no source address gives more than half the ports to one target port
	var err error
	s.logf("building bench/upstream, bench/connhold and the entry")
	if s.upstreamBin, err = s.build("upstream", "./bench/upstream", false); err != nil {
		return err
	}
	if s.connhold, err = s.build("connhold", "./bench/connhold", false); err != nil {
		return err
	}
	if s.entry, err = s.entryBin("fenec-entry", entryBin); err != nil { // a copy: row 7 upgrades it in place
		return err
	}
	if s.cert, s.key, err = s.makeCert(); err != nil {
		return err
	}
	s.lua, s.pipeLua = s.path("report.lua"), s.path("pipeline.lua")
	os.WriteFile(s.lua, []byte(wrkLua), 0o644)
	os.WriteFile(s.pipeLua, []byte(pipelineLua(pipeline)), 0o644)
	if s.upPort, err = s.freePort(); err != nil {
		return err
	}
	up, err := s.start("upstream", spec{}, s.upstreamBin, "-listen", fmt.Sprintf("127.0.0.1:%d", s.upPort))
	if err != nil {
		return err
	}
	if err := waitOK(up, fmt.Sprintf("http://127.0.0.1:%d%s", s.upPort, reqPath)); err != nil {
		return err
	}
	if out, err = s.outFile(out, ".jsonl"); err != nil {
		return err
	}
	if s.raw, err = os.Create(out); err != nil {
		return err
	}
	defer s.raw.Close()
	s.verEntry, s.verNginx = version(0, s.entry, "version"), version(3, "nginx", "-v")
	repro := "go run ./bench storm"
	fs.Visit(func(f *flag.Flag) { repro += " -" + f.Name + "=" + f.Value.String() })
	json.NewEncoder(s.raw).Encode(map[string]any{"kind": "meta", "machine": machine(), "fenec_entry": s.verEntry, "nginx": s.verNginx,
		"wrk": version(2, "wrk", "-v"), "go": version(3, "go", "version"), "rows": s.rows, "targets": s.names, "quick": s.quick,
		"new_conns": s.newConns, "nofile": s.nofile, "hold": s.hold, "target_nofile": s.targetNofile, "sources": s.sources, "reproduce": repro})
	t0 := time.Now()
	if s.has(1) || s.has(2) || s.has(3) || s.has(4) {
		if err := s.shared(); err != nil {
			return err
		}
	}
	for i, row := range []func() error{s.rowNofile, s.rowStop, s.rowUpgrade} {
		if s.has(5 + i) {
			if err := row(); err != nil {
				return err
			}
		}
	}
	rep := stormTable(s.recs, s.roundS) + s.notes(time.Since(t0), out, repro)
	fmt.Print(rep)
	md := strings.TrimSuffix(out, ".jsonl") + ".md"
	fmt.Printf("(this report: %s)\n", md)
	return os.WriteFile(md, []byte(rep), 0o644)
}

// tgt is a target instance the storm started.
type tgt struct {
	name, kind, addr, url, dir, log string
	p                               *proc
}

// up starts target t afresh, kind plain or tls, under the open-file limit nofile (0: the
// run's), nginx with workers workers (0: one a CPU), as a daemon when daemon (its binary
// upgrade needs that: nginx 1.22 ignores USR2 when its parent started it with daemon off).
func (s *storm) up(t, kind string, nofile, workers int, daemon bool) (*tgt, error) {
	s.nUp++
	x := &tgt{name: fmt.Sprintf("%s-%d", t, s.nUp), kind: kind}
	x.dir = s.path(x.name)
	os.MkdirAll(x.dir, 0o755)
	nofile, workers = cmp.Or(nofile, s.targetNofile), cmp.Or(workers, numCPU())
	a, err := s.addrs(1)
	if err != nil {
		return nil, err
	}
	x.addr, x.url = a[0], "http://"+a[0]+reqPath
	if kind == "tls" {
		x.url = "https://" + a[0] + reqPath
	}
	limit := []string{"prlimit", fmt.Sprintf("--nofile=%d:%d", nofile, nofile)}
	if t == "nginx" {
		// worker_connections above the open-file limit by 1/32 of it, so that the limit is what
		// binds (row 5): nginx closes idle keep-alive connections to take new ones once fewer
		// than 1/16 of worker_connections are free, which is then below the limit. An idle
		// keep-alive connection is kept 300 s, longer than row 5 holds them.
		n := nginx{dir: x.dir, up: s.upPort, workers: workers, conns: nofile + nofile/32, http: "    keepalive_timeout 300s;\n"}
		listen := x.addr
		if kind == "tls" {
			listen += " ssl"
			n.http += nginxTLS(s.cert, s.key)
		}
		n.servers = server(listen, "")
		conf, err := n.write()
		if err != nil {
			return nil, err
		}
		x.log = x.dir + "/error.log"
		nginxBin, err := exec.LookPath("nginx") // by its full path: nginx starts its new binary from argv[0] at an upgrade
		if err != nil {
			return nil, err
		}
		argv := append(limit, nginxBin, "-p", x.dir, "-c", conf, "-e", x.log)
		if daemon {
			if _, err := runClient("", "", 30*time.Second, argv...); err != nil {
				return nil, err
			}
			pid, err := waitPidFile(x.dir+"/nginx.pid", 0, 5*time.Second)
			if err != nil {
				return nil, err
			}
			x.p = s.follow(x.name, pid)
		} else if x.p, err = s.start(x.name, spec{}, append(argv, "-g", "daemon off;")...); err != nil {
			return nil, err
		}
	} else {
		extra := []string{"--drain", drain, "--pid-file", x.dir + "/entry.pid"}
		if kind == "tls" {
			extra = append(extra, "--tls-cert", s.cert, "--tls-key", s.key)
		}
		args, listen, _, err := s.entryArgs(s.entry, s.upPort, extra...)
		if err != nil {
			return nil, err
		}
		x.addr, x.url = listen, strings.Replace(x.url, x.addr, listen, 1)
		if x.p, err = s.start(x.name, spec{nofile: nofile}, args...); err != nil {
			return nil, err
		}
		x.log = x.p.log
	}
	return x, waitOK(x.p, x.url)
}

// waitPidFile waits for a pid file to name a process other than not.
func waitPidFile(file string, not int, d time.Duration) (int, error) {
	for t0 := time.Now(); time.Since(t0) < d; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(file)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid != not {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("%s names no new process within %v", file, d)
}

func (s *storm) record(r stormRec) {
	r.Kind = "storm"
	for _, m := range []map[string]int64{r.Non, r.Lost} {
		for _, n := range m {
			r.Requests += n
		}
	}
	r.Requests += r.OK
	json.NewEncoder(s.raw).Encode(r)
	s.recs = append(s.recs, r)
	if lost := sum(r.Lost); lost > 0 {
		s.logf("  %s: %d requests, %d LOST (%v)", r.Target, r.Requests, lost, r.Lost)
	} else {
		s.logf("  %s: %d requests, none lost", r.Target, r.Requests)
	}
}

func sum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// wrkRun runs wrk -t2 -c64 --timeout 5s on x for secs seconds with lua, and returns its
// record's counts. wrk's kinds: read (ended or reset before the whole answer), write, timeout
// (an answer slower than 5 s, counted again every 2 s while it waits: an upper bound), connect
// (a failed dial; wrk does not tell refused from the rest).
func (s *storm) wrkRun(x *tgt, secs int, lua string, extra ...string) (stormRec, error) {
	argv := append([]string{"wrk", "-t2", fmt.Sprintf("-c%d", stormConns), fmt.Sprintf("-d%ds", secs), "--timeout", "5s", "-s", lua}, extra...)
	c, err := runClient("", "", time.Duration(secs+60)*time.Second, append(argv, x.url)...)
	if err != nil {
		return stormRec{}, err
	}
	w, err := parseWrk(c.out)
	if err != nil {
		return stormRec{}, err
	}
	r := stormRec{OK: w.n("requests") - w.n("non_2xx"), Non: map[string]int64{}, Lost: map[string]int64{}, NotConn: map[string]int64{}, Raw: w.f}
	if n := w.n("non_2xx"); n > 0 {
		r.Non["non-2xx"] = n
	}
	for _, k := range []string{"read", "write", "timeout"} {
		if n := w.n(k + "_errors"); n > 0 {
			r.Lost[k] = n
		}
	}
	if n := w.n("connect_errors"); n > 0 {
		r.NotConn["connect"] = n
	}
	return r, nil
}

// loadOut is connhold -load's JSON line.
type loadOut struct {
	AnsweredBy   map[string]int64 `json:"answered_by_status"`
	LostBy       map[string]int64 `json:"lost_by_kind"`
	DialFailed   map[string]int64 `json:"dial_failed_by_kind"`
	ClosedIdle   int64            `json:"closed_idle"`
	LostOnReused int64            `json:"lost_on_reused"`
	Connections  int64            `json:"connections"`
}

// fromLoad is a record's counts of a connhold -load line, and its note: connections made,
// seen closed while idle, lost on a kept-alive connection.
func fromLoad(line string) (stormRec, error) {
	var l loadOut
	if err := json.Unmarshal([]byte(line), &l); err != nil {
		return stormRec{}, fmt.Errorf("connhold -load printed %q: %w", line, err)
	}
	var raw any
	json.Unmarshal([]byte(line), &raw)
	r := stormRec{Non: map[string]int64{}, Lost: l.LostBy, NotConn: l.DialFailed, ClosedIdle: l.ClosedIdle, Raw: raw}
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
	return r, nil
}

// load is a connhold -load on x until stop: new connections or keep-alive, over TLS when x is.
type load struct {
	stdin *os.File
	out   *os.File
	p     *proc
}

func (s *storm) startLoad(name string, x *tgt, args ...string) (*load, error) {
	args = append([]string{s.connhold, "-addr", x.addr, "-load", "-timeout", "5s"}, args...)
	if x.kind == "tls" {
		args = append(args, "-tls")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	out, err := os.Create(s.path(name + ".out"))
	if err != nil {
		return nil, err
	}
	p, err := s.start(name, spec{stdin: inR, stdout: out}, args...)
	inR.Close()
	return &load{stdin: inW, out: out, p: p}, err
}

// stop ends the load (each client finishes the request it is making) and returns its line.
func (l *load) stop() (string, error) {
	l.stdin.Close()
	if _, err := l.p.gone(20 * time.Second); err != nil {
		return "", err
	}
	l.out.Close()
	b, err := os.ReadFile(l.out.Name())
	return strings.TrimSpace(string(b)), err
}

// shared runs rows 1-4 on one plain instance of each target.
func (s *storm) shared() error {
	xs := map[string]*tgt{}
	for _, t := range s.names {
		x, err := s.up(t, "plain", 0, 0, false)
		if err != nil {
			return err
		}
		xs[t] = x
	}
	defer func() {
		for _, x := range xs {
			s.stop(x.p)
		}
	}()
	if s.has(1) {
		s.logf("row 1: a new connection each request, %ds a target a round, until fenec-entry has made %d", s.roundS, s.newConns)
		total := map[string]int64{}
		for {
			s.roundsNew++
			for _, t := range rotate(s.names, s.roundsNew-1) {
				s.logf("row 1, round %d: %s", s.roundsNew, t)
				r, err := s.wrkRun(xs[t], s.roundS, s.lua, "-H", "Connection: close")
				if err != nil {
					return err
				}
				r.Row, r.Title, r.Target = 1, fmt.Sprintf("1 new connection each request (wrk -c%d, Connection: close)", stormConns), t
				s.record(r)
				total[t] += r.OK
			}
			made := total["fenec-entry"]
			if !slices.Contains(s.names, "fenec-entry") {
				made = total[s.names[0]]
			}
			if made >= int64(s.newConns) || s.roundsNew >= 200 {
				break
			}
		}
	}
	for _, row := range []int{2, 3} {
		if !s.has(row) {
			continue
		}
		for _, t := range s.names {
			s.logf("row %d: %s", row, t)
			lua, title := s.lua, fmt.Sprintf("2 keep-alive (wrk -c%d)", stormConns)
			if row == 3 {
				lua, title = s.pipeLua, fmt.Sprintf("3 pipelined, %d requests a write (wrk -c%d)", pipeline, stormConns)
			}
			r, err := s.wrkRun(xs[t], s.runS, lua)
			if err != nil {
				return err
			}
			r.Row, r.Title, r.Target = row, title, t
			s.record(r)
		}
	}
	if !s.has(4) {
		return nil
	}
	for _, t := range s.names {
		s.logf("row 4: %d slow clients for %ds beside a keep-alive load, %s", s.slowClients, s.slowS, t)
		type res struct {
			r   stormRec
			err error
		}
		done := make(chan res, 1)
		go func() { r, err := s.wrkRun(xs[t], s.slowS+3, s.lua); done <- res{r, err} }()
		// A byte every 5-20 ms: a GET's head (~70 bytes) takes about a second, a POST's with its
		// 32-byte body about two, well within the entry's 10 s --header-timeout.
		c, err := runClient("", "", time.Duration(s.slowS+60)*time.Second, s.connhold, "-addr", xs[t].addr, "-load", "-slow",
			"-n", strconv.Itoa(s.slowClients), "-per-conn", "4", "-byte-min", "5ms", "-byte-max", "20ms", "-body", "32",
			"-timeout", "10s", "-duration", fmt.Sprintf("%ds", s.slowS))
		w := <-done
		if err = errors.Join(err, w.err); err != nil {
			return err
		}
		r, err := fromLoad(lastLines(c.out, 1))
		if err != nil {
			return err
		}
		r.Row, r.Title, r.Target = 4, fmt.Sprintf("4 slow clients, a byte every 5-20 ms (%d clients, connhold -load -slow)", s.slowClients), t
		s.record(r)
		w.r.Row, w.r.Title, w.r.Target = 4, fmt.Sprintf("4 keep-alive beside the slow clients (wrk -c%d)", stormConns), t
		s.record(w.r)
	}
	return nil
}

// rowNofile is row 5: each target afresh under -nofile, nginx with one worker; -hold idle
// keep-alive connections opened and held; then, while they are held, a fresh GET and 5 s of
// fresh clients.
func (s *storm) rowNofile() error {
	for _, t := range s.names {
		s.logf("row 5: %s under an open-file limit of %d, %d idle keep-alive connections held", t, s.nofile, s.hold)
		x, err := s.up(t, "plain", s.nofile, 1, false)
		if err != nil {
			return err
		}
		var hs []*holder
		for j := range s.holders {
			n := s.hold / s.holders
			if j < s.hold%s.holders {
				n++
			}
			h, err := s.run.hold("", []string{s.connhold, "-addr", x.addr, "-path", reqPath, "-parallel", "256", "-timeout", "5s",
				"-sources", strconv.Itoa(s.sources), "-max-failed", strconv.Itoa(s.hold)}, n)
			if err != nil {
				return fmt.Errorf("connhold through %s: %w", t, err)
			}
			hs = append(hs, h)
		}
		var held, openMs, lastMs int64
		kinds := map[string]int64{}
		var raws []any
		for _, h := range hs {
			var o struct {
				Held     int64            `json:"held"`
				OpenMs   int64            `json:"open_ms"`
				LastOkMs int64            `json:"last_ok_ms"`
				Failed   map[string]int64 `json:"failed_by_kind"`
			}
			json.Unmarshal([]byte(h.json), &o)
			var raw any
			json.Unmarshal([]byte(h.json), &raw)
			raws = append(raws, raw)
			held, openMs, lastMs = held+o.Held, max(openMs, o.OpenMs), max(lastMs, o.LastOkMs)
			for k, n := range o.Failed {
				kinds[k] += n
			}
		}
		t0 := time.Now()
		code, _, _, ferr := get(x.url)
		freshS := time.Since(t0).Seconds()
		c, err := runClient("", "", 60*time.Second, s.connhold, "-addr", x.addr, "-load", "-close", "-n", "4", "-timeout", "5s", "-duration", "5s")
		if err != nil {
			return err
		}
		var closed int
		for _, h := range hs {
			n, err := h.release()
			if err != nil {
				return err
			}
			closed += n
		}
		logText, _ := os.ReadFile(x.log)
		count := func(what string) int { return strings.Count(strings.ToLower(string(logText)), what) }
		s.stop(x.p)
		r := stormRec{Row: 5, Title: fmt.Sprintf("5 open-file limit %d, %d idle connections: their first requests (connhold)", s.nofile, s.hold),
			Target: t, OK: held, Non: map[string]int64{}, Lost: map[string]int64{}, NotConn: map[string]int64{}, Raw: raws}
		for k, n := range kinds {
			switch {
			case strings.HasPrefix(k, "status_"):
				r.Non[strings.TrimPrefix(k, "status_")] = n
			case k == "refused" || k == "connect_timeout" || k == "connect_error":
				r.NotConn[k] = n
			default:
				r.Lost[k] = n
			}
		}
		r.Note = fmt.Sprintf("took %.1f s to take %d (all tried in %.1f s); %d closed by %s while held; its log: 'too many open files' %d times",
			float64(lastMs)/1000, held, float64(openMs)/1000, closed, t, count("too many open files"))
		if t == "nginx" {
			r.Note += fmt.Sprintf(", 'reusing connections' %d times", count("reusing connections"))
		}
		s.record(r)
		f, err := fromLoad(lastLines(c.out, 1))
		if err != nil {
			return err
		}
		f.Row, f.Title, f.Target = 5, "5 open-file limit: fresh clients while held (5 s, connhold -load -close -n 4)", t
		if ferr != nil {
			f.Note = "fresh GET: no answer within 2 s; " + f.Note
		} else {
			f.Note = fmt.Sprintf("fresh GET: %d in %.3f s; %s", code, freshS, f.Note)
		}
		s.record(f)
	}
	return nil
}

// loads runs the two loads of rows 6 and 7 on x (new connections and keep-alive, 16 clients
// each), calls during 2 s in, and records both.
func (s *storm) loads(row int, title, t string, x *tgt, during func() (string, error)) error {
	ln, err := s.startLoad("load-new", x, "-n", strconv.Itoa(signalClients), "-close")
	if err != nil {
		return err
	}
	lk, err := s.startLoad("load-keep", x, "-n", strconv.Itoa(signalClients))
	if err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	note, err := during()
	if err != nil {
		return err
	}
	for _, l := range []struct {
		l    *load
		what string
	}{{ln, "new connections (connhold -load -close)"}, {lk, "keep-alive (connhold -load)"}} {
		line, err := l.l.stop()
		if err != nil {
			return err
		}
		r, err := fromLoad(line)
		if err != nil {
			return err
		}
		r.Row, r.Title, r.Target, r.Note = row, title+": "+l.what, t, r.Note+"; "+note
		s.record(r)
	}
	return nil
}

func kind(k string) string {
	if k == "tls" {
		return "TLS"
	}
	return k
}

// rowStop is row 6: the graceful stop under load (the entry: SIGTERM, --drain 5s; nginx:
// SIGQUIT); the loads run on until it has exited and 1 s more (refused).
func (s *storm) rowStop() error {
	for _, k := range []string{"plain", "tls"} {
		for _, t := range s.names {
			sig, name := syscall.SIGTERM, "SIGTERM"
			if t == "nginx" {
				sig, name = syscall.SIGQUIT, "SIGQUIT"
			}
			s.logf("row 6: %s under load, %s, %s", name, k, t)
			x, err := s.up(t, k, 0, 0, false)
			if err != nil {
				return err
			}
			err = s.loads(6, fmt.Sprintf("6 %s under load, %s", name, kind(k)), t, x, func() (string, error) {
				syscall.Kill(x.p.pid, sig)
				d, err := x.p.gone(40 * time.Second)
				if err != nil {
					return "", err
				}
				time.Sleep(time.Second) // and the load goes on, refused
				return fmt.Sprintf("%s; exited %.1f s later", name, d.Seconds()), nil
			})
			s.stop(x.p)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// rowUpgrade is row 7: the upgrade in place under load. The entry: SIGUSR2, the new PID
// followed in --pid-file until the old process has exited; nginx: its binary upgrade (USR2 to
// the master, the new master up with its workers, WINCH, the old workers gone, QUIT); 2 s more
// on the new process, which must answer.
func (s *storm) rowUpgrade() error {
	for _, k := range []string{"plain", "tls"} {
		for _, t := range s.names {
			s.logf("row 7: upgrade in place under load, %s, %s", k, t)
			x, err := s.up(t, k, 0, 0, t == "nginx")
			if err != nil {
				return err
			}
			var newP *proc
			err = s.loads(7, "7 upgrade in place under load, "+kind(k), t, x, func() (string, error) {
				old := x.p
				syscall.Kill(old.pid, syscall.SIGUSR2)
				note := ""
				if t == "nginx" {
					pid, err := waitPidFile(x.dir+"/nginx.pid", old.pid, 35*time.Second)
					if err != nil {
						return "", err
					}
					for t0 := time.Now(); len(children(pid)) == 0; time.Sleep(50 * time.Millisecond) {
						if time.Since(t0) > 35*time.Second {
							return "", errors.New("nginx: no new master with workers within 35 s of USR2")
						}
					}
					newP = s.follow(x.name+"-new", pid)
					syscall.Kill(old.pid, syscall.SIGWINCH)
					for t0 := time.Now(); slices.ContainsFunc(children(old.pid), func(c int) bool { return c != pid }); time.Sleep(50 * time.Millisecond) {
						if time.Since(t0) > 30*time.Second {
							return "", errors.New("nginx: the old workers still run 30 s after WINCH")
						}
					}
					syscall.Kill(old.pid, syscall.SIGQUIT)
					d, err := old.gone(30 * time.Second)
					if err != nil {
						return "", err
					}
					note = fmt.Sprintf("USR2, WINCH, QUIT; the old master exited %.1f s after QUIT", d.Seconds())
				} else {
					pid, err := waitPidFile(x.dir+"/entry.pid", old.pid, 35*time.Second)
					if err != nil {
						return "", fmt.Errorf("fenec-entry: %w\n%s", err, old.tail())
					}
					newP = s.follow(x.name+"-new", pid)
					d, err := old.gone(40 * time.Second)
					if err != nil {
						return "", err
					}
					note = fmt.Sprintf("SIGUSR2; the old process exited %.1f s after the new one took over", d.Seconds())
				}
				s.stop(old)
				time.Sleep(2 * time.Second) // the load goes on, on the new process
				return note, nil
			})
			if err == nil {
				if code, _, _, gerr := get(x.url); gerr != nil || code != 200 {
					err = fmt.Errorf("%s: the new process does not answer after the upgrade (%d, %v)", t, code, gerr)
				}
			}
			s.stop(x.p)
			if newP != nil {
				s.stop(newP)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// stormTable is the table: a line a row and target (row 1's rounds summed).
func stormTable(recs []stormRec, roundS int) string {
	type line struct {
		r              stormRec
		runs           int
		non, lost, ncs map[string]int64
	}
	var order []string
	lines := map[string]*line{}
	for _, r := range recs {
		k := r.Title + "\x00" + r.Target
		l := lines[k]
		if l == nil {
			l = &line{r: r, non: map[string]int64{}, lost: map[string]int64{}, ncs: map[string]int64{}}
			l.r.Requests, l.r.OK, l.r.ClosedIdle = 0, 0, 0
			lines[k] = l
			order = append(order, k)
		}
		l.runs++
		l.r.Requests, l.r.OK, l.r.ClosedIdle = l.r.Requests+r.Requests, l.r.OK+r.OK, l.r.ClosedIdle+r.ClosedIdle
		if r.Note != "" {
			l.r.Note = r.Note
		}
		for _, p := range []struct{ from, into map[string]int64 }{{r.Non, l.non}, {r.Lost, l.lost}, {r.NotConn, l.ncs}} {
			for k, n := range p.from {
				p.into[k] += n
			}
		}
	}
	show := func(m map[string]int64) string {
		n := sum(m)
		if n == 0 {
			return "0"
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
		return fmt.Sprintf("%d (%s)", n, strings.Join(parts, ", "))
	}
	var b strings.Builder
	b.WriteString("| row | target | requests | answered 2xx | non-2xx | LOST | not connected | verdict | notes |\n|---|---|--:|--:|--:|--:|--:|---|---|\n")
	for _, k := range order {
		l := lines[k]
		fail := sum(l.lost)
		v := "none lost"
		if fail > 0 {
			v = fmt.Sprintf("**LOST %d**", fail)
		}
		if l.r.Row == 7 { // nothing may fail at an upgrade
			fail += sum(l.non) + sum(l.ncs) + l.r.ClosedIdle
			v = "no failure"
			if fail > 0 {
				v = fmt.Sprintf("**FAILED %d**", fail)
			}
		}
		note := l.r.Note
		if l.r.Row == 1 {
			note = fmt.Sprintf("%d round%s of %d s", l.runs, map[bool]string{true: "s"}[l.runs > 1], roundS) + map[bool]string{true: "; " + note}[note != ""]
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s | %s | %s | %s |\n", l.r.Title, l.r.Target, l.r.Requests, l.r.OK, show(l.non), show(l.lost), show(l.ncs), v, note)
	}
	return b.String()
}

func (s *storm) notes(took time.Duration, out, repro string) string {
	return fmt.Sprintf(`
- requests: answered (2xx and not) + LOST. **LOST**: a request written (over TLS: its connection's handshake begun) on a
  connection the target's kernel accepted, with no whole answer, by kind (bench/README.md, "How a request is counted").
- not connected: dials that failed, no request written (refused: nothing listens, as after a graceful stop).
- verdict: rows 1-6, the LOST; row 7, every failure (non-2xx, LOST, not connected, and connections seen closed while
  idle), since nothing may fail at an upgrade.
- machine: %s; nothing pinned
- fenec-entry: %s (--drain %s, --header-timeout 10s, its default); nginx: %s (%d workers, 1 in row 5)
- open-file limit: the targets %d (row 5: %d), each client process %d; row 5's connections held by %d connhold
  process(es), from %d source address(es)
- run time: %d min %d s; raw: %s
- reproduce: cd %s && %s
`, machine(), s.verEntry, drain, s.verNginx, numCPU(), s.targetNofile, s.nofile, s.clientNofile, s.holders, s.sources,
		int(took.Minutes()), int(took.Seconds())%60, out, s.root, repro)
}
