//go:build linux

package main

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The clients (wrk, h2load, openssl) and the servers (nginx, haproxy) every bench runs the
// same way.

const reqPath = "/t/acme/items/1"

// wrkLua is wrk's report: done() prints one machine-readable line (latency in µs; errors in
// total, socket_errors, and by wrk's kind) and the latencies themselves, "HIST µs:count ...",
// so that several runs merge into one (mergeHist). Nothing is scraped from wrk's text.
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

// pipelineLua writes n requests at once; wrk counts each answer.
func pipelineLua(n int) string {
	return fmt.Sprintf("init = function(args) local r = {} for i = 1, %d do r[i] = wrk.format() end req = table.concat(r) end\n"+
		"request = function() return req end\n", n) + wrkLua
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

// client is one client run (wrk, h2load, openssl) on the client CPUs: its output, its wall
// time and its own CPU ticks.
type client struct {
	out  string
	wall time.Duration
	cpu  int64
}

// runClient runs argv on cpus, its stdin from stdin, within timeout.
func runClient(cpus string, stdin string, timeout time.Duration, argv ...string) (client, error) {
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
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

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// nginx is an nginx configuration as the benches run it in front of bench/upstream on up:
// upstream keepalive 64, no access log, its temp files in dir, the server blocks servers
// (location is the proxying they share), main and http lines added to those contexts.
type nginx struct {
	dir, servers, main, http string
	up, workers, conns       int
}

func (n nginx) write() (string, error) {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return "", err
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
`, n.workers, n.main, n.dir, cmp.Or(n.conns, 4096), n.http, n.up, n.servers)
	f := n.dir + "/nginx.conf"
	return f, os.WriteFile(f, []byte(conf), 0o644)
}

// startNginx writes n's configuration into the temp dir's name/ and starts it in the foreground.
func (r *run) startNginx(name string, n nginx, s spec) (*proc, error) {
	n.dir = r.path(name)
	conf, err := n.write()
	if err != nil {
		return nil, err
	}
	pr, err := r.start(name, s, "nginx", "-e", n.dir+"/error.log", "-p", n.dir, "-c", conf, "-g", "daemon off;")
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile(`listen (\S+?)[ ;]`).FindStringSubmatch(n.servers)
	scheme := "http://"
	if strings.Contains(n.servers, " ssl") {
		scheme = "https://"
	}
	return pr, waitOK(pr, scheme+m[1]+reqPath)
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

// haproxyConf is haproxy in front of the upstream on up, doing the entry's header work:
// http mode, http-reuse always, no logs, maxconn and its timeouts as given.
func haproxyConf(listen string, up, threads, maxconn int, timeout string) string {
	return fmt.Sprintf(`global
    nbthread %d
    maxconn %d
defaults
    mode http
    maxconn %[2]d
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client %[3]s
    timeout server %[3]s
    timeout http-keep-alive %[3]s
frontend entry
    bind %s
    unique-id-format %%{+X}o\ %%ci:%%cp_%%fi:%%fp_%%Ts_%%rt:%%pid
    http-request set-header Fenec-Home 1
    http-request set-header X-Request-Id %%[unique-id]
    default_backend fenec_router
backend fenec_router
    http-response del-header Fenec-Home
    server r1 127.0.0.1:%d
`, threads, maxconn, timeout, listen, up)
}

// entryArgs is `fenec-entry serve` as every bench starts it: its listener, an admin listener,
// gossip and RPC on loopback, the upstream as the one router of eu, and extra.
func (r *run) entryArgs(bin string, up int, extra ...string) ([]string, string, string, error) {
	a, err := r.addrs(4)
	if err != nil {
		return nil, "", "", err
	}
	args := append([]string{bin, "serve", "--listen", a[0], "--admin-listen", a[1],
		"--routers", fmt.Sprintf("eu=http://127.0.0.1:%d", up), "--gossip-bind", a[2], "--rpc-addr", a[3]}, extra...)
	return args, a[0], a[1], nil
}

// scanLines reads lines of a process's output as they come, into a channel.
func scanLines(f *os.File) <-chan string {
	ch := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
	}()
	return ch
}

// holder is a connhold holding connections (its hold mode), until release.
type holder struct {
	p             *proc
	stdin         *os.File
	lines         <-chan string
	json          string // its line of failures by kind and times
	conns, failed int
	openMs        int64
}

// hold starts connhold (argv, with -n n) and waits, at most 300 s, for its READY line.
func (r *run) hold(cpus string, argv []string, n int) (*holder, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	p, err := r.start("connhold", spec{cpus: cpus, stdin: inR, stdout: outW}, append(argv, "-n", strconv.Itoa(n))...)
	inR.Close()
	outW.Close()
	if err != nil {
		return nil, err
	}
	h := &holder{p: p, stdin: inW, lines: scanLines(outR)}
	deadline := time.After(300 * time.Second)
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				r.stop(p)
				return nil, fmt.Errorf("connhold ended before READY: %s", p.tail())
			}
			if strings.HasPrefix(line, "{") {
				h.json = line
			}
			if strings.HasPrefix(line, "READY ") {
				fmt.Sscanf(line, "READY conns=%d failed=%d", &h.conns, &h.failed)
				h.openMs = time.Since(t0).Milliseconds()
				if h.conns == 0 {
					h.release()
					return nil, errors.New("no connection held")
				}
				return h, nil
			}
		case <-deadline:
			r.stop(p)
			return nil, fmt.Errorf("%d connections not open within 300 s", n)
		}
	}
}

// release closes connhold's stdin and waits (20 s at most) for it to let go of every
// connection; it returns the held connections the other side had closed by then.
func (h *holder) release() (closed int, err error) {
	h.stdin.Close()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				if _, err := h.p.gone(5 * time.Second); err != nil {
					return closed, err
				}
				return closed, nil
			}
			if strings.HasPrefix(line, "DONE ") {
				var n int
				fmt.Sscanf(line, "DONE conns=%d closed=%d", &n, &closed)
			}
		case <-timeout:
			return closed, errors.New("connhold did not exit when its stdin closed")
		}
	}
}
