//go:build linux

package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The clients (wrk, h2load, openssl, connhold) and the servers (nginx, the entry, the
// upstream) every bench runs the same way.

const reqPath = "/t/acme/items/1"

// wrkLua is wrk's report: done() prints one machine-readable line (latency in µs; errors in
// total, socket_errors, and by wrk's kind) and the latencies themselves, "HIST µs:count ...",
// so that several runs merge into one (addHist). Nothing is scraped from wrk's text.
const wrkLua = `done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "BENCH p50_us=%d p99_us=%d rps=%.1f requests=%d duration_us=%d socket_errors=%d non_2xx=%d connect_errors=%d read_errors=%d write_errors=%d timeout_errors=%d\n",
    latency:percentile(50.0), latency:percentile(99.0),
    summary.requests / (summary.duration / 1e6), summary.requests, summary.duration,
    e.connect + e.read + e.write + e.timeout, e.status, e.connect, e.read, e.write, e.timeout))
  local parts = {}
  for i = 1, #latency do
    local v, c = latency(i)
    parts[#parts + 1] = string.format("%d:%d", v, c)
  end
  io.write("HIST " .. table.concat(parts, " ") .. "\n")
end
`

// writeLua writes wrk's report script into the temp dir, with pipelined requests a write
// when pipelined > 1 (wrk counts each answer); it returns the file.
func (r *run) writeLua(pipelined int) (string, error) {
	f, lua := r.path(fmt.Sprintf("report%d.lua", pipelined)), wrkLua
	if pipelined > 1 {
		lua = fmt.Sprintf("init = function(args) local r = {} for i = 1, %d do r[i] = wrk.format() end req = table.concat(r) end\n"+
			"request = function() return req end\n", pipelined) + lua
	}
	return f, os.WriteFile(f, []byte(lua), 0o644)
}

// wrkOut is what wrk's report says: its BENCH fields and its latencies by value.
type wrkOut struct {
	f    map[string]float64
	hist map[int]int64
}

func (w wrkOut) n(k string) int64 { return int64(w.f[k]) }

// parseWrk reads wrk's report lines out of its output.
func parseWrk(out string) (wrkOut, error) {
	w := wrkOut{f: map[string]float64{}, hist: map[int]int64{}}
	found := false
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "BENCH "); ok {
			found = true
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				w.f[k], _ = strconv.ParseFloat(v, 64)
			}
		} else if rest, ok := strings.CutPrefix(line, "HIST "); ok {
			addHist(w.hist, rest)
		}
	}
	if !found {
		return w, fmt.Errorf("wrk printed no BENCH line:\n%s", out)
	}
	return w, nil
}

// addHist adds a HIST line's "µs:count" pairs into h.
func addHist(h map[int]int64, line string) {
	for _, vc := range strings.Fields(line) {
		v, c, ok := strings.Cut(vc, ":")
		vi, err1 := strconv.Atoi(v)
		ci, err2 := strconv.ParseInt(c, 10, 64)
		if ok && err1 == nil && err2 == nil {
			h[vi] += ci
		}
	}
}

// percentiles is p50 and p99 of merged latencies, each at the rank wrk's own percentile takes:
// the value at rank int(p*n+1), counted from 1.
func percentiles(h map[int]int64) (p50, p99 int) {
	vals := make([]int, 0, len(h))
	var total int64
	for v, c := range h {
		vals = append(vals, v)
		total += c
	}
	slices.Sort(vals)
	at := func(p float64) int {
		rank, seen := int64(p*float64(total)+1), int64(0)
		for _, v := range vals {
			if seen += h[v]; seen >= rank {
				return v
			}
		}
		if len(vals) == 0 {
			return 0
		}
		return vals[len(vals)-1]
	}
	return at(0.50), at(0.99)
}

// client is one client run (wrk, h2load, openssl, connhold): its output, its wall time and
// its own CPU ticks.
type client struct {
	out  string
	wall time.Duration
	cpu  int64
}

// runClient runs argv on cpus ("": anywhere), its stdin from stdin, within timeout.
func runClient(cpus string, stdin string, timeout time.Duration, argv ...string) (client, error) {
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader(stdin)
	t0 := time.Now()
	var err error
	done := make(chan struct{})
	var b []byte
	go func() { b, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		err = fmt.Errorf("no end within %v", timeout)
	}
	c := client{out: string(b), wall: time.Since(t0)}
	if cmd.ProcessState != nil {
		c.cpu = int64((cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()) * clkTck / time.Second)
	}
	if err != nil {
		return c, fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, lastLines(c.out, 20))
	}
	return c, nil
}

// nginx is an nginx configuration as the benches run it in front of the bench upstream (upstream.go) on up:
// upstream keepalive 64, no access log, its temp files in dir, the server blocks servers
// (server() gives the proxying they share), http lines added to that context, conns
// worker_connections (0: 4096), nofile its worker_rlimit_nofile (0: none).
type nginx struct {
	dir, servers, http         string
	up, workers, conns, nofile int
	daemon                     bool
}

func (n nginx) write() (string, error) {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return "", err
	}
	main := ""
	if n.nofile > 0 {
		main = fmt.Sprintf("worker_rlimit_nofile %d;\n", n.nofile)
	}
	conf := fmt.Sprintf(`worker_processes %d;
%spid %[3]s/nginx.pid;
error_log %[3]s/error.log warn;
events { worker_connections %d; }
http {
    access_log off;
    client_body_temp_path %[3]s/body;
    proxy_temp_path %[3]s/proxy;
    fastcgi_temp_path %[3]s/fastcgi;
    uwsgi_temp_path %[3]s/uwsgi;
    scgi_temp_path %[3]s/scgi;
    keepalive_requests 1000000;
%[5]s    upstream fenec_router {
        server 127.0.0.1:%[6]d;
        keepalive 64;
        keepalive_requests 1000000;
    }
%[7]s
}
`, n.workers, main, n.dir, cmp.Or(n.conns, 4096), n.http, n.up, n.servers)
	f := n.dir + "/nginx.conf"
	return f, os.WriteFile(f, []byte(conf), 0o644)
}

// startNginx writes n's configuration into the temp dir's name/ and starts it, in the
// foreground, or as a daemon followed by its pid file (its binary upgrade needs that: nginx
// 1.22 ignores USR2 when its parent started it with daemon off), and waits for url.
func (r *run) startNginx(name string, n nginx, s spec, url string) (*proc, error) {
	n.dir = r.path(name)
	conf, err := n.write()
	if err != nil {
		return nil, err
	}
	bin, err := exec.LookPath("nginx") // by its full path: nginx starts its new binary from argv[0] at an upgrade
	if err != nil {
		return nil, err
	}
	argv := []string{bin, "-e", n.dir + "/error.log", "-p", n.dir, "-c", conf}
	var p *proc
	if n.daemon {
		if s.nofile > 0 {
			argv = append([]string{"prlimit", fmt.Sprintf("--nofile=%d:%d", s.nofile, s.nofile)}, argv...)
		}
		if _, err := runClient("", "", 30*time.Second, argv...); err != nil {
			return nil, err
		}
		pid, err := waitPidFile(n.dir+"/nginx.pid", 0, 5*time.Second)
		if err != nil {
			return nil, err
		}
		p = r.follow(name, pid)
	} else if p, err = r.start(name, s, append(argv, "-g", "daemon off;")...); err != nil {
		return nil, err
	}
	p.log = n.dir + "/error.log"
	return p, waitOK(p, url)
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

// server is one server block listening on listen, with the proxying every nginx of the
// benches does: the header work the entry does (Fenec-Home: 1 and an X-Request-Id on the
// way in, Fenec-Home dropped on the way out), streamed (proxy_buffering off), extra added.
func server(listen, extra string) string {
	return "    server {\n        listen " + listen + `;
        location / {
            proxy_pass http://fenec_router;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Fenec-Home 1;
            proxy_set_header X-Request-Id $request_id;
            proxy_hide_header Fenec-Home;
            proxy_buffering off;
` + extra + "        }\n    }\n"
}

// nginxTLS is the TLS of every HTTPS nginx of the benches. ssl_protocols: nginx 1.22's
// default leaves TLS 1.3 out, which the entry (Go) and every client here speak. The server's
// order of TLS 1.3 ciphers, as the entry (Go) chooses its own: both then agree on
// TLS_AES_128_GCM_SHA256 with OpenSSL's clients, which list AES-256 first. Session cache and
// tickets as nginx has them by default, with the shared cache of a server of several workers.
func nginxTLS(cert, key string) string {
	return "    ssl_certificate " + cert + ";\n    ssl_certificate_key " + key + `;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_prefer_server_ciphers on;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256;
    ssl_session_cache shared:SSL:10m;
`
}

// entryArgs is `fenec-entry serve` as every bench starts it: its listener, an admin listener,
// gossip and RPC on loopback, the upstream as the one router of eu, and extra. It returns
// the listener's and the admin listener's addresses.
func (r *run) entryArgs(bin string, up int, extra ...string) ([]string, string, string, error) {
	a, err := r.addrs(4)
	if err != nil {
		return nil, "", "", err
	}
	args := append([]string{bin, "serve", "--listen", a[0], "--admin-listen", a[1],
		"--routers", fmt.Sprintf("eu=http://127.0.0.1:%d", up), "--gossip-bind", a[2], "--rpc-addr", a[3]}, extra...)
	return args, a[0], a[1], nil
}

// startUpstream starts the upstream (this program's upstream command) on cpus.
func (r *run) startUpstream(cpus string) (*proc, int, error) {
	port, err := r.freePort()
	if err != nil {
		return nil, 0, err
	}
	p, err := r.start("upstream", spec{cpus: cpus}, r.self, "upstream", "-listen", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, 0, err
	}
	return p, port, waitOK(p, fmt.Sprintf("http://127.0.0.1:%d%s", port, reqPath))
}

// holder is a connhold holding connections or making a load, until release.
type holder struct {
	p     *proc
	stdin io.Closer
	out   *bufio.Scanner
	res   loadResult // its line: what it held or made, what failed and how, the times
}

// connhold starts connhold (args) on cpus; holding (without -load), it waits, at most 300 s,
// for its READY line.
func (r *run) connhold(cpus string, args ...string) (*holder, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p, err := r.start("connhold", spec{cpus: cpus, stdin: inR, stdout: outW}, append([]string{r.self, "connhold"}, args...)...)
	inR.Close()
	outW.Close()
	if err != nil {
		return nil, err
	}
	h := &holder{p: p, stdin: inW, out: bufio.NewScanner(outR)}
	h.out.Buffer(make([]byte, 64<<10), 4<<20)
	if slices.Contains(args, "-load") {
		return h, nil
	}
	late := time.AfterFunc(300*time.Second, func() { r.stop(p) })
	defer late.Stop()
	for h.out.Scan() {
		if err := h.line(); err != nil || strings.HasPrefix(h.out.Text(), "READY") {
			return h, err
		}
	}
	r.stop(p)
	return nil, fmt.Errorf("connhold ended before READY (in 300 s at most): %s", p.tail())
}

func (h *holder) line() error {
	if line := h.out.Text(); strings.HasPrefix(line, "{") {
		if err := json.Unmarshal([]byte(line), &h.res); err != nil {
			return fmt.Errorf("connhold printed %q: %w", line, err)
		}
	}
	return nil
}

// release closes connhold's stdin and waits (20 s at most) for it to end: a load's line, or
// holding, the held connections the other side had closed by then.
func (h *holder) release() (closed int, err error) {
	h.stdin.Close()
	late := time.AfterFunc(20*time.Second, func() { syscall.Kill(h.p.pid, syscall.SIGKILL) })
	defer late.Stop()
	for h.out.Scan() {
		if err = h.line(); err != nil {
			return 0, err
		}
		fmt.Sscanf(h.out.Text(), "DONE closed=%d", &closed)
	}
	_, err = h.p.gone(5 * time.Second)
	return closed, err
}
