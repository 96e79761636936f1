//go:build linux

package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// profile: where a proxied request's CPU goes, for fenec-entry and nginx side by side, under
// the throughput load of proxies (wrk -c32 on CPU 0, the upstream and the proxy on CPU 1, one
// worker; or nothing pinned), per request, in three windows of -seconds in the middle of the
// load: the CPU, context switches and steal, and the entry's runtime metrics and CPU profile;
// syscalls by name (perf's tracepoints, which slow the load); the system-wide scheduler counts.
// pgo: the CPU profile the entry's build is optimized with (cmd/fenec-entry/default.pgo).

// syscallNames are the system calls counted one by one (a proxy's and the Go runtime's
// usual ones); raw_syscalls:sys_enter counts them all, the rest is "other". perf sets up a
// tracepoint in about 27 ms, and all ~360 of syscalls:sys_enter_* took ten seconds here.
var syscallNames = strings.Fields(`read write readv writev pread64 recvfrom sendto recvmsg sendmsg epoll_wait
	epoll_pwait epoll_pwait2 epoll_ctl futex nanosleep clock_nanosleep sched_yield accept accept4 close shutdown
	getsockopt setsockopt mmap munmap madvise mprotect brk tgkill rt_sigreturn rt_sigprocmask sigaltstack
	getrusage openat newfstatat fcntl ioctl splice io_uring_enter getpid gettid clone clone3 connect socket`)

// schedEvents are the system-wide scheduler counts, by the name the report gives them.
var schedEvents = [][2]string{{"context-switches", "context switches"}, {"sched:sched_wakeup", "wake-ups"},
	{"power:cpu_idle", "CPU idle entries and exits"}, {"ipi:ipi_send_cpu", "inter-processor interrupts"}}

// cpuGroups are the rows of the entry's grouped CPU profile: a function and what it stands for
// (its package github.com/fenec/fenec-entry/ written as fe/).
var cpuGroups = [][2]string{
	{"internal/runtime/syscall/linux.Syscall6", "syscalls (all)"}, {"syscall.write", "  write (net.Conn)"},
	{"fe/sockio.(*Conn).write", "  write (sockio, raw)"}, {"syscall.read", "  read (net.Conn)"},
	{"fe/sockio.(*Conn).read", "  read (sockio, raw)"}, {"fe/h1.epollCtl", "  epoll_ctl (the h1 poller)"},
	{"internal/runtime/syscall/linux.EpollWait", "  epoll_wait (netpoll)"}, {"runtime.futex", "  futex (thread wake and sleep)"},
	{"net/http.(*conn).serve", "net/http server, per connection (--http1-server std)"},
	{"net/http.(*conn).readRequest", "  reading and parsing the request"},
	{"net/http.(*connReader).backgroundRead", "  its background read (notices a client leaving)"},
	{"net/http.(*response).finishRequest", "  finishing the answer (flush)"},
	{"fe/h1.(*conn).serve", "h1 server, per woken connection (--http1-server lean)"},
	{"net/http.ReadRequest", "  parsing the request (http.ReadRequest)"},
	{"fe/h1.readPlainInto", "  parsing a plain request (h1.readPlainInto)"},
	{"fe/proxy.(*Handler).ServeHTTP", "proxy.Handler.ServeHTTP"}, {"fe/proxy.(*Handler).forward", "  forward: to the router and back"},
	{"net/http.ReadResponse", "  the answer head from the router (http.ReadResponse)"}, {"runtime.schedule", "Go scheduler"},
	{"runtime.newstack", "goroutine stack growth (runtime.newstack)"}, {"runtime.gcBgMarkWorker", "GC background marking"},
	{"runtime.mallocgc", "allocation (mallocgc)"}}

func profileMain(args []string) error {
	fs := flag.NewFlagSet("profile", flag.ExitOnError)
	secs := fs.Int("seconds", 10, "seconds of each window")
	conns := fs.Int("conns", 32, "wrk's connections")
	targets := fs.String("targets", "nginx,fenec-entry", "comma list from nginx,fenec-entry")
	entryBin := fs.String("entry-bin", "", "a fenec-entry built with -tags pprof to profile instead of building one")
	pin := fs.String("pin", "split", "split: wrk on CPU 0, upstream and proxy on CPU 1, nginx 1 worker, the entry GOMAXPROCS=1; none: nothing pinned")
	out := fs.String("out", "", "keep the report, profiles and raw counts here (default bench/out/profile-<UTC time>)")
	fs.Parse(args)
	if *secs < 2 || *secs > 600 || *conns < 1 || (*pin != "split" && *pin != "none") {
		return errors.New("-seconds: want 2..600; -conns 1 or more; -pin split or none")
	}
	if os.Geteuid() != 0 || numCPU() < 2 {
		return errors.New("needs root (perf's syscall tracepoints) and 2 CPUs")
	}
	if err := need(map[string]string{"wrk": "wrk", "nginx": "nginx-light", "perf": "linux-perf", "taskset": "util-linux"}); err != nil {
		return err
	}
	r, err := newRun("profile", false)
	if err != nil {
		return err
	}
	defer r.close()
	dir, err := r.outFile(*out, "")
	if err != nil {
		return err
	}
	os.MkdirAll(dir, 0o755)
	cli, srv, workers, title := "", "", numCPU(), "wrk -t2 -c%d, upstream and proxy, nothing pinned"
	if *pin == "split" {
		cli, srv, workers, title = "0", "1", 1, "wrk -t2 -c%d on CPU 0, upstream and proxy on CPU 1"
	}
	up, upPort, err := r.startUpstream(srv)
	if err != nil {
		return err
	}
	entry, err := r.entryBin("fenec-entry", *entryBin, "pprof")
	if err != nil {
		return err
	}
	rep := fmt.Sprintf("## Where a request's CPU goes: "+title+"\n\n- machine: %s\n- %s; %s\n- reproduce: %s\n\n",
		*conns, machine(), version(3, "nginx", "-v"), version(0, entry, "version"), reproduce("profile", fs))
	for _, t := range strings.Split(*targets, ",") {
		r.logf("%s", t)
		a, err := r.addrs(2)
		if err != nil {
			return err
		}
		var p *proc
		pprof := ""
		switch t {
		case "nginx":
			p, err = r.startNginx("nginx", nginx{servers: server(a[0], ""), up: upPort, workers: workers}, spec{cpus: srv}, "http://"+a[0]+reqPath)
		case "fenec-entry":
			pprof = a[1]
			env := []string{"FENEC_ENTRY_PPROF_ADDR=" + pprof}
			if *pin == "split" {
				env = append(env, "GOMAXPROCS=1")
			}
			args, listen, _, err2 := r.entryArgs(entry, upPort, "--log-level", "warn")
			if err2 != nil {
				return err2
			}
			a[0] = listen
			if p, err = r.start("fenec-entry", spec{cpus: srv, env: env}, args...); err == nil {
				err = waitOK(p, "http://"+listen+reqPath)
			}
			if code, _, _ := get("http://"+pprof+"/debug/runtime-metrics", 0); err == nil && code != 200 {
				err = errors.New("fenec-entry serves no /debug/runtime-metrics: -entry-bin must be built with -tags pprof")
			}
		default:
			return fmt.Errorf("-targets: want nginx and/or fenec-entry, got %q", t)
		}
		if err != nil {
			return err
		}
		sec, err := r.measure(t, "http://"+a[0]+reqPath, dir, entry, pprof, cli, *conns, *secs, p, up, upPort)
		if err != nil {
			return err
		}
		rep += sec
		r.stop(p)
	}
	fmt.Print(rep)
	r.logf("report, profile and raw counts in %s", dir)
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(rep), 0o644)
}

// served is the requests the upstream served (its /_bench/requests): what every window divides by.
func served(upPort int) (int64, error) {
	_, b, err := get(fmt.Sprintf("http://127.0.0.1:%d/_bench/requests", upPort), 0)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// spanMain is perf's workload: the upstream's count as it starts and as it ends, S seconds
// later, so that the requests match the window perf counts in: `span PORT S FILE`.
func spanMain(args []string) error {
	if len(args) != 3 {
		return errors.New("usage: span PORT SECONDS FILE")
	}
	port, _ := strconv.Atoi(args[0])
	secs, _ := strconv.Atoi(args[1])
	a, err := served(port)
	if err != nil {
		return err
	}
	time.Sleep(time.Duration(secs) * time.Second)
	b, err := served(port)
	if err != nil {
		return err
	}
	return os.WriteFile(args[2], []byte(strconv.FormatInt(b-a, 10)), 0o644)
}

// measure is one target's three windows under the load; its section of the report.
func (r *run) measure(name, url, dir, entry, pprof, cpus string, conns, secs int, p, up *proc, upPort int) (string, error) {
	c := fmt.Sprintf("-c%d", conns)
	if _, err := runClient(cpus, "", time.Minute, "wrk", "-t2", c, "-d3s", url); err != nil { // warm-up
		return "", err
	}
	wrk, err := r.start("wrk", spec{cpus: cpus}, "wrk", "-t2", c, fmt.Sprintf("-d%ds", secs*3+60), url)
	if err != nil {
		return "", err
	}
	defer r.stop(wrk)
	time.Sleep(time.Second)
	pids := append([]int{p.pid}, children(p.pid)...)
	type edge struct {
		t                            time.Time
		served, user, sys, upT, wrkT int64
		vol, invol, steal, all       int64
		rm                           map[string]float64
	}
	take := func() (e edge, err error) {
		e.served, err = served(upPort)
		e.t, e.rm = time.Now(), runtimeMetrics(pprof)
		e.user, e.sys = ticks(false, pids...)
		e.upT, e.wrkT = cpuOf(false, up.pid), cpuOf(false, wrk.pid)
		e.vol, e.invol = ctxSwitches(pids...)
		cs := readCPU()
		e.steal, e.all = cs.steal, cs.all
		return e, err
	}
	e0, err := take()
	if err != nil {
		return "", err
	}
	var prof []byte
	if pprof != "" {
		_, prof, err = get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprof, secs), time.Duration(secs+10)*time.Second)
	} else {
		time.Sleep(time.Duration(secs) * time.Second)
	}
	e1, err2 := take()
	if err = errors.Join(err, err2); err != nil {
		return "", err
	}
	// perf runs its workload (span) once every counter is set up and reads them after it ends.
	perf := func(label string, events []string, scope ...string) (map[string]float64, error) {
		var list []string
		for _, e := range events {
			if tp := strings.Replace(e, ":", "/", 1); !strings.Contains(e, ":") || e == "raw_syscalls:sys_enter" || traced(tp) {
				list = append(list, e)
			}
		}
		csv, span := r.path("perf.csv"), r.path("span")
		args := append(append([]string{"stat", "-x,", "-e", strings.Join(list, ",")}, scope...), "-o", csv, "--", r.self, "span", strconv.Itoa(upPort), strconv.Itoa(secs), span)
		if b, err := exec.Command("perf", args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s: perf stat: %w\n%s", name, err, b)
		}
		nb, _ := os.ReadFile(span)
		n, _ := strconv.ParseFloat(string(nb), 64)
		b, _ := os.ReadFile(csv)
		os.WriteFile(filepath.Join(dir, name+"."+label+".csv"), b, 0o644)
		counts := map[string]float64{}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Split(l, ","); len(f) >= 3 {
				if v, err := strconv.ParseFloat(f[0], 64); err == nil {
					counts[f[2]] = v / n
				}
			}
		}
		if n <= 0 {
			return nil, fmt.Errorf("%s: no request counted in perf's window", name)
		}
		return counts, nil
	}
	events := []string{"raw_syscalls:sys_enter"}
	for _, c := range syscallNames {
		events = append(events, "syscalls:sys_enter_"+c)
	}
	sys, err := perf("syscalls", events, "-p", strings.Trim(strings.ReplaceAll(fmt.Sprint(pids), " ", ","), "[]"))
	if err != nil {
		return "", err
	}
	events = nil
	for _, e := range schedEvents {
		events = append(events, e[0])
	}
	sched, err := perf("sched", events, "-a")
	if err != nil {
		return "", err
	}

	reqs, secsW := float64(e1.served-e0.served), e1.t.Sub(e0.t).Seconds()
	if reqs <= 0 {
		return "", fmt.Errorf("%s: no request counted in the window", name)
	}
	us := func(t int64) float64 { return float64(t) / clkTck * 1e6 / reqs }
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n- processes counted together: %d (the process and its children)\n", name, len(pids))
	fmt.Fprintf(&b, "- requests/s %.0f; requests in the %.1f s window %d (the upstream's count); proxy CPU %.1f µs per request (user %.1f, kernel %.1f)\n",
		reqs/secsW, secsW, int64(reqs), us(e1.user+e1.sys-e0.user-e0.sys), us(e1.user-e0.user), us(e1.sys-e0.sys))
	fmt.Fprintf(&b, "- the others' CPU per request in the window: wrk %.1f µs, upstream %.1f µs\n", us(e1.wrkT-e0.wrkT), us(e1.upT-e0.upT))
	fmt.Fprintf(&b, "- context switches per request (all threads): %.2f voluntary, %.2f involuntary\n", float64(e1.vol-e0.vol)/reqs, float64(e1.invol-e0.invol)/reqs)
	fmt.Fprintf(&b, "- steal (the hypervisor running other guests): %d%% of the CPU time\n", pct(e1.steal-e0.steal, e1.all-e0.all))
	var parts []string
	named := 0.0
	for _, c := range syscallNames {
		if v := sys["syscalls:sys_enter_"+c]; v >= 0.01 {
			parts, named = append(parts, fmt.Sprintf("%s %.2f", c, v)), named+v
		}
	}
	if total := sys["raw_syscalls:sys_enter"]; total-named >= 0.01 {
		parts = append(parts, fmt.Sprintf("other %.2f", total-named))
	}
	fmt.Fprintf(&b, "- syscalls per request: %.2f (%s)\n", sys["raw_syscalls:sys_enter"], strings.Join(parts, ", "))
	parts = nil
	for _, e := range schedEvents {
		if v, ok := sched[e[0]]; ok {
			parts = append(parts, fmt.Sprintf("%s %.3f", e[1], v))
		}
	}
	fmt.Fprintf(&b, "- system-wide, every process, per request: %s\n", strings.Join(parts, ", "))
	if pprof == "" {
		return b.String() + "\n", nil
	}
	d := func(k string) float64 { return e1.rm[k] - e0.rm[k] }
	for _, k := range []string{"/sched/goroutines-created:goroutines", "/gc/heap/allocs:objects", "/gc/heap/allocs:bytes"} {
		fmt.Fprintf(&b, "- %s: %.2f per request\n", k, d(k)/reqs)
	}
	fmt.Fprintf(&b, "- /gc/cycles/total:gc-cycles: %.2f per 10,000 requests; the GC's share of the Go CPU (runtime/metrics): %.1f%%\n",
		d("/gc/cycles/total:gc-cycles")/reqs*10000, d("/cpu/classes/gc/total:cpu-seconds")/d("/cpu/classes/total:cpu-seconds")*100)
	cpuProf := filepath.Join(dir, name+".cpu.pprof")
	os.WriteFile(cpuProf, prof, 0o644)
	cum, _ := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=100000", entry, cpuProf).Output()
	share := map[string]string{}
	for _, l := range strings.Split(string(cum), "\n") {
		if f := strings.Fields(l); len(f) >= 6 {
			share[strings.Replace(f[len(f)-1], "github.com/fenec/fenec-entry/", "fe/", 1)] = f[4]
		}
	}
	b.WriteString("\nCPU profile, by where the time goes (cumulative share of the samples; a sample can be in more than one row):\n\n| where | share |\n|---|---|\n")
	for _, g := range cpuGroups {
		fmt.Fprintf(&b, "| %s | %s |\n", g[1], cmp.Or(share[g[0]], "0%"))
	}
	top, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=15", entry, cpuProf).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go tool pprof: %w: %s", err, top)
	}
	s := string(top)
	fmt.Fprintf(&b, "\nTop 15 functions by their own time:\n\n```\n%s```\n\n", s[max(0, strings.Index(s, "      flat")):])
	return b.String(), nil
}

// traced says whether the kernel has the tracepoint (category/name).
func traced(tp string) bool {
	for _, root := range []string{"/sys/kernel/tracing/events/", "/sys/kernel/debug/tracing/events/"} {
		if _, err := os.Stat(root + tp); err == nil {
			return true
		}
	}
	return false
}

// ctxSwitches is the voluntary and involuntary context switches of every thread of the processes.
func ctxSwitches(pids ...int) (vol, invol int64) {
	for _, p := range pids {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", p))
		for _, t := range tasks {
			b, _ := os.ReadFile(t)
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) == 2 {
					v, _ := strconv.ParseInt(f[1], 10, 64)
					switch f[0] {
					case "voluntary_ctxt_switches:":
						vol += v
					case "nonvoluntary_ctxt_switches:":
						invol += v
					}
				}
			}
		}
	}
	return vol, invol
}

// runtimeMetrics is the pprof build's /debug/runtime-metrics at addr ("": none): a value by name.
func runtimeMetrics(addr string) map[string]float64 {
	out := map[string]float64{}
	if addr == "" {
		return out
	}
	_, b, _ := get("http://"+addr+"/debug/runtime-metrics", 0)
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				out[f[0]] = v
			}
		}
	}
	return out
}

// pgoMain records cmd/fenec-entry/default.pgo: the entry built with -tags pprof in front of
// the upstream, nothing pinned, its default Ps, profiled under wrk -t2 -c32 (throughput)
// then wrk -t1 -c1 (latency), the two merged. Record it again when the request path changes
// much; a stale profile only optimizes less.
func pgoMain(args []string) error {
	fs := flag.NewFlagSet("pgo", flag.ExitOnError)
	secs := fs.Int("seconds", 20, "seconds profiled for each of the two loads")
	out := fs.String("out", "", "where to write the merged profile (default cmd/fenec-entry/default.pgo)")
	fs.Parse(args)
	if *secs < 5 || *secs > 600 {
		return fmt.Errorf("-seconds: want 5..600, got %d", *secs)
	}
	r, err := newRun("pgo", false)
	if err != nil {
		return err
	}
	defer r.close()
	if *out == "" {
		*out = filepath.Join(r.root, "cmd/fenec-entry/default.pgo")
	}
	_, upPort, err := r.startUpstream("")
	if err != nil {
		return err
	}
	entry, err := r.entryBin("fenec-entry", "", "pprof")
	if err != nil {
		return err
	}
	args, listen, _, err := r.entryArgs(entry, upPort, "--log-level", "warn")
	if err != nil {
		return err
	}
	a, err := r.addrs(1)
	if err != nil {
		return err
	}
	pp := a[0]
	p, err := r.start("fenec-entry", spec{env: []string{"FENEC_ENTRY_PPROF_ADDR=" + pp}}, args...)
	if err != nil {
		return err
	}
	url := "http://" + listen + reqPath
	if err := waitOK(p, url); err != nil {
		return err
	}
	var files []string
	for _, l := range []struct{ t, c int }{{2, 32}, {1, 1}} {
		wrk := []string{"wrk", fmt.Sprintf("-t%d", l.t), fmt.Sprintf("-c%d", l.c)}
		runClient("", "", time.Minute, append(wrk, "-d3s", url)...) // warm-up
		done := make(chan error, 1)
		go func() {
			_, err := runClient("", "", time.Duration(*secs+60)*time.Second, append(wrk, fmt.Sprintf("-d%ds", *secs+4), url)...)
			done <- err
		}()
		time.Sleep(time.Second)
		code, b, err := get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pp, *secs), time.Duration(*secs+10)*time.Second)
		if err = errors.Join(err, <-done); err != nil || code != 200 {
			return fmt.Errorf("c=%d: no CPU profile (%d): %w", l.c, code, err)
		}
		f := r.path(fmt.Sprintf("c%d.pprof", l.c))
		os.WriteFile(f, b, 0o644)
		files = append(files, f)
	}
	merged, err := exec.Command("go", append([]string{"tool", "pprof", "-proto"}, files...)...).Output()
	if err != nil {
		return fmt.Errorf("go tool pprof could not merge the profiles: %w", err)
	}
	r.logf("wrote %s (%d bytes); rebuild to use it", *out, len(merged))
	return os.WriteFile(*out, merged, 0o644)
}
