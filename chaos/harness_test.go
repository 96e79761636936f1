//go:build chaos

package chaos

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
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

	"github.com/fenec/fenec-entry/internal/testutil"
)

// Settings of every entry the suite starts, and the bounds the checks use.
const (
	readBackoff   = 2 * time.Second // --read-backoff
	answerTimeout = 3 * time.Second // --answer-timeout: a blackholed router fails in 3 s, not 35
	clientTimeout = 10 * time.Second
	// repairMax is the longest gap between two repair rounds of one entry: the entry's
	// gossip.DefaultConfig().Sync.RepairInterval (30 s, no flag) jittered +25 %.
	repairMax = 30 * time.Second * 5 / 4
	// partitionGID is the group id entry A runs with (as root), so that the packet filter can
	// tell A's outgoing gossip and snapshot connections from B's and C's (nft meta skgid).
	partitionGID = 4242
	// rpcAuth is every entry's --rpc-auth: the serf CLI must send it (-rpc-auth).
	rpcAuth = "fenec-chaos-rpc-auth"
)

// The gossip keys: every entry starts with gossipKeyA; the key rotation scenario moves the
// cluster to gossipKeyB.
var (
	gossipKeyA = base64.StdEncoding.EncodeToString([]byte("fenec-chaos-gossip-key-32-bytes!"))
	gossipKeyB = base64.StdEncoding.EncodeToString([]byte("fenec-chaos-gossip-key-B-32bytes"))
)

var (
	flagSeed = flag.Int64("chaos.seed", 0, "override every scenario's seed (0: each scenario's own)")
	flagKeep = flag.Bool("chaos.keep", false, "keep the logs directory of every scenario")
)

// regions in --routers order (the fallback order); each has two stand-in routers.
var regions = []string{"eu", "us", "ap"}

// tenants t01..t12, homed round robin eu, us, ap.
var tenants, initialHomes = func() ([]string, map[string]string) {
	var ts []string
	homes := map[string]string{}
	for i := 1; i <= 12; i++ {
		t := fmt.Sprintf("t%02d", i)
		ts = append(ts, t)
		homes[t] = regions[(i-1)%len(regions)]
	}
	return ts, homes
}()

// bin holds the binaries built once for the run: the entry, the stand-in, and the stock serf
// CLI at the version go.mod names (the module's tool, as `go tool serf` runs it).
var bin struct{ dir, root, entry, standin, serf string }

func TestMain(m *testing.M) {
	flag.Parse()
	if err := build(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos: build:", err)
		os.Exit(1)
	}
	code := m.Run()
	printSummary(os.Stdout)
	os.RemoveAll(bin.dir)
	os.Exit(code)
}

// build compiles ./cmd/fenec-entry, ./cmd/fenec-standin and the serf CLI (the module's tool)
// once, into a temporary directory.
func build() error {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return err
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	bin.root = root
	if bin.dir, err = os.MkdirTemp("", "fenec-chaos-bin-"); err != nil {
		return err
	}
	bin.entry = filepath.Join(bin.dir, "fenec-entry")
	bin.standin = filepath.Join(bin.dir, "fenec-standin")
	bin.serf = filepath.Join(bin.dir, "serf")
	for out, pkg := range map[string]string{bin.entry: "./cmd/fenec-entry", bin.standin: "./cmd/fenec-standin",
		bin.serf: "github.com/hashicorp/serf/cmd/serf"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	return nil
}

// ---- ports ----

var portsMu sync.Mutex
var portsUsed = map[int]bool{}

// freePort returns a loopback port free for TCP and UDP now, never returned before in this run.
// It asks the kernel first (port 0). When the ephemeral range is crowded with TIME_WAIT
// sockets (the load's new connections, and on a shared machine everyone else's), the kernel
// may hand back only ports this run has used already: it then tries random ports below the
// ephemeral range, which no client connection takes.
func freePort(t *testing.T) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !portsUsed[port] && bothFree(port) {
			portsUsed[port] = true
			return port
		}
	}
	for range 2000 {
		port := 10000 + rand.IntN(22000) // 10000-31999: below Linux's default ephemeral range
		if !portsUsed[port] && bothFree(port) {
			portsUsed[port] = true
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// bothFree: port can be bound on loopback for TCP and UDP now.
func bothFree(port int) bool {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer ln.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	pc.Close()
	return true
}

// ---- the stand-in process ----

type routerInfo struct {
	Region string `json:"region"`
	Addr   string `json:"addr"`
	URL    string `json:"url"`
}

type standinProc struct {
	cmd     *exec.Cmd
	routers []routerInfo
	done    chan struct{}
}

func (h *harness) startStandin() {
	t := h.t
	var pairs []string
	for _, tn := range tenants {
		pairs = append(pairs, tn+"="+initialHomes[tn])
	}
	args := []string{"--tenants", strings.Join(pairs, ","), "--log-level", "warn", "--http-keepalive", "1s"}
	for _, r := range regions {
		args = append(args, "--region", r+"=127.0.0.1:0,127.0.0.1:0")
	}
	cmd := exec.Command(bin.standin, args...)
	logf, err := os.Create(filepath.Join(h.dir, "standin.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &standinProc{cmd: cmd, done: make(chan struct{})}
	lines := make(chan routerInfo)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ri routerInfo
			if json.Unmarshal(sc.Bytes(), &ri) == nil && ri.Addr != "" {
				lines <- ri
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	go func() { cmd.Wait(); logf.Close(); close(s.done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-s.done
		}
	})
	timeout := time.After(10 * time.Second)
	for len(s.routers) < 2*len(regions) {
		select {
		case ri := <-lines:
			s.routers = append(s.routers, ri)
		case <-s.done:
			t.Fatalf("fenec-standin exited before listening; see %s", filepath.Join(h.dir, "standin.log"))
		case <-timeout:
			t.Fatal("fenec-standin: no router lines within 10s")
		}
	}
	h.standin = s
}

func (h *harness) routersOf(region string) []routerInfo {
	var out []routerInfo
	for _, r := range h.standin.routers {
		if r.Region == region {
			out = append(out, r)
		}
	}
	return out
}

func (h *harness) routersSpec() string {
	var parts []string
	for _, reg := range regions {
		var urls []string
		for _, r := range h.routersOf(reg) {
			urls = append(urls, r.URL)
		}
		parts = append(parts, reg+"="+strings.Join(urls, ","))
	}
	return strings.Join(parts, ";")
}

var adminClient = &http.Client{Timeout: 5 * time.Second}

// admin calls the stand-in's admin API on the first router that is not offline (refuse and
// down close a router's listener, its admin API with it) and decodes the JSON answer into out.
func (h *harness) admin(method, path string, form url.Values, out any) error {
	var last error
	routers := slices.Clone(h.standin.routers)
	slices.SortStableFunc(routers, func(a, b routerInfo) int {
		ao, bo := h.faults.offline(a.Addr), h.faults.offline(b.Addr)
		switch {
		case ao == bo:
			return 0
		case ao:
			return 1
		}
		return -1
	})
	for _, r := range routers {
		u := r.URL + "/_standin/" + path
		var req *http.Request
		if method == http.MethodPost {
			req, _ = http.NewRequest(method, u, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		} else {
			if form != nil {
				u += "?" + form.Encode()
			}
			req, _ = http.NewRequest(method, u, nil)
		}
		resp, err := adminClient.Do(req)
		if err != nil {
			last = err
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			last = err
			continue
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s /_standin/%s: %d %s", method, path, resp.StatusCode, body)
		}
		if out != nil {
			return json.Unmarshal(body, out)
		}
		return nil
	}
	return fmt.Errorf("%s /_standin/%s: no router answered: %v", method, path, last)
}

// apply is one row of the stand-in ledger (standin.Apply).
type apply struct {
	Tenant    string    `json:"tenant"`
	Region    string    `json:"region"`
	Router    string    `json:"router"`
	Method    string    `json:"method"`
	Key       string    `json:"key"`
	RequestID string    `json:"request_id"`
	At        time.Time `json:"at"`
}

// seen is one request a router received (standin.Seen, the fields used here).
type seen struct {
	Seq       uint64 `json:"seq"`
	Router    string `json:"router"`
	Region    string `json:"region"`
	Tenant    string `json:"tenant"`
	RequestID string `json:"request_id"`
	From      string `json:"from"`
}

func (h *harness) ledger() []apply {
	var out []apply
	if err := h.admin(http.MethodGet, "ledger", nil, &out); err != nil {
		h.t.Fatalf("ledger: %v", err)
	}
	return out
}

func (h *harness) seenSince(seq uint64) []seen {
	var out []seen
	if err := h.admin(http.MethodGet, "seen", url.Values{"since": {strconv.FormatUint(seq, 10)}}, &out); err != nil {
		h.t.Fatalf("seen: %v", err)
	}
	return out
}

// setFault switches one router and records the change with the instants around the call.
func (h *harness) setFault(addr, mode string) {
	before := time.Now()
	err := h.admin(http.MethodPost, "fault", url.Values{"router": {addr}, "mode": {mode}}, nil)
	h.faults.add(addr, mode, before, time.Now())
	if err != nil {
		h.t.Errorf("fault %s=%s: %v", addr, mode, err)
	}
}

// move moves a tenant's home and records it.
func (h *harness) move(tenant, home string) {
	before := time.Now()
	err := h.admin(http.MethodPost, "move", url.Values{"tenant": {tenant}, "home": {home}}, nil)
	h.dirLog.add(tenant, home, before, time.Now())
	if err != nil {
		h.t.Errorf("move %s to %s: %v", tenant, home, err)
	}
}

func (h *harness) clearFaults() {
	for _, r := range h.standin.routers {
		if h.faults.current(r.Addr) != "ok" {
			h.setFault(r.Addr, "ok")
		}
	}
}

// ---- entries ----

type entryProc struct {
	name, continent            string
	listen, admin, gossip, rpc string
	args, env                  []string
	gid                        uint32
	logPath                    string
	binary                     string // the fenec-entry it runs; "": bin.entry, this build's
	pidFile                    string // if set, --pid-file at the next start (a flag the previous release lacks)
	release                    string // the release binary is, if not this build's (previousRelease)
	ran                        []ranSpan
	tls                        bool // its --listen serves HTTPS (tlsEntry); the admin port stays plain
	dis                        *disruptions
	mu                         sync.Mutex
	pid                        int           // the process now (the one an upgrade in place started, once adopted)
	done                       chan struct{} // closed when that process has ended (and been reaped)
	exit                       int           // the exit code of the last process to end (-1: a signal)
	exitAt                     time.Time     // when it ended
	base                       procMetrics
	starts                     int
}

func (h *harness) newEntries() {
	t := h.t
	conts := []string{"EU", "NA", "AS"}
	for i, name := range []string{"a", "b", "c"} {
		e := h.newEntryProc(name, conts[i])
		if name == "a" && os.Geteuid() == 0 {
			e.gid = partitionGID
		}
		e.tls = name == tlsEntry
		h.entries = append(h.entries, e)
	}
	for _, e := range h.entries {
		var join []string
		for _, o := range h.entries {
			if o != e {
				join = append(join, o.gossip)
			}
		}
		h.setArgs(e, join, gossipKeyA)
	}
	t.Cleanup(func() {
		for _, e := range h.entries {
			e.signal(syscall.SIGCONT)
			e.kill()
		}
	})
}

// newEntryProc picks an entry's ports and log file; setArgs then gives it its flags.
func (h *harness) newEntryProc(name, continent string) *entryProc {
	t := h.t
	return &entryProc{name: name, continent: continent,
		listen: fmt.Sprintf("127.0.0.1:%d", freePort(t)), admin: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		gossip: fmt.Sprintf("127.0.0.1:%d", freePort(t)), rpc: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		logPath: filepath.Join(h.dir, "entry-"+name+".log"), dis: h.dis,
	}
}

// setArgs sets the flags and environment every entry of the suite runs with: join those
// gossip addresses, with gossip key key (base64) and --rpc-auth rpcAuth.
func (h *harness) setArgs(e *entryProc, join []string, key string) {
	e.args = []string{"serve", "--listen", e.listen, "--admin-listen", e.admin,
		"--gossip-bind", e.gossip, "--rpc-addr", e.rpc,
		"--node", e.name, "--pop", e.name, "--continent", e.continent,
		"--routers", h.routersSpec(), "--join", strings.Join(join, ","),
		"--read-backoff", readBackoff.String(), "--answer-timeout", answerTimeout.String(),
		"--drain", "200ms", "--log-level", "info"}
	if e.tls {
		e.args = append(e.args, "--tls-cert", h.tls.certFile, "--tls-key", h.tls.keyFile)
	}
	e.setKey(key)
}

// setKey sets the gossip key the entry's environment gives it at its next start (its only
// key: the entry keeps no keyring across restarts).
func (e *entryProc) setKey(key string) {
	e.env = append(cleanEnv(), "FENEC_ENTRY_GOSSIP_KEY="+key, "FENEC_ENTRY_RPC_AUTH="+rpcAuth)
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FENEC_ENTRY_") && !strings.HasPrefix(kv, "FLY_") {
			env = append(env, kv)
		}
	}
	return env
}

// scheme is how clients speak to the entry's client port: "https" for the TLS entry.
func (e *entryProc) scheme() string {
	if e.tls {
		return "https"
	}
	return "http"
}

// url is the URL of path on the entry's client port.
func (e *entryProc) url(path string) string { return e.scheme() + "://" + e.listen + path }

// start starts the entry with its flags (the same every time: a restart is the same entry).
func (e *entryProc) start(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	binary := e.binary
	if binary == "" {
		binary = bin.entry
	}
	args := e.args
	if e.pidFile != "" {
		args = append(slices.Clone(args), "--pid-file", e.pidFile)
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = e.env
	cmd.Stdout, cmd.Stderr = logf, logf
	if e.gid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 0, Gid: e.gid, NoSetGroups: true}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		e.ended(cmd.ProcessState.ExitCode(), done)
	}()
	e.dis.endDown(e.name) // a kill's span ends, and a stopped entry's time down
	e.mu.Lock()
	e.pid, e.done = cmd.Process.Pid, done
	e.starts++
	e.ran = append(e.ran, ranSpan{from: time.Now(), release: e.release})
	e.mu.Unlock()
}

// ranSpan: from this instant (a start) the entry ran release ("": this build).
type ranSpan struct {
	from    time.Time
	release string
}

// releaseAt is the release the entry ran at t ("": this build's, or not started yet).
func (e *entryProc) releaseAt(t time.Time) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	rel := ""
	for _, r := range e.ran {
		if !t.Before(r.from) {
			rel = r.release
		}
	}
	return rel
}

// ended records the exit of the entry's process whose done channel is done.
func (e *entryProc) ended(code int, done chan struct{}) {
	e.mu.Lock()
	e.exit, e.exitAt = code, time.Now()
	e.mu.Unlock()
	close(done)
}

// process is the entry's process now and the channel closed when it has ended.
func (e *entryProc) process() (int, chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pid, e.done
}

// running: the entry's process has not ended (its PID is still ours, not reaped).
func (e *entryProc) running() bool {
	pid, done := e.process()
	if pid == 0 {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// adopt makes pid, the process an upgrade in place started from the entry's process (which
// has ended), the entry's process: signals go to it, and it is reaped here. The suite is the
// child subreaper (setSubreaper), so the orphan is its child once its parent has exited.
func (e *entryProc) adopt(pid int) {
	done := make(chan struct{})
	e.mu.Lock()
	e.pid, e.done = pid, done
	e.mu.Unlock()
	go func() {
		for {
			var ws syscall.WaitStatus
			_, err := syscall.Wait4(pid, &ws, 0, nil)
			if err == syscall.EINTR {
				continue
			}
			code := ws.ExitStatus()
			if err != nil { // not our child after all: wait for it to be gone, its status unknown
				for syscall.Kill(pid, 0) == nil {
					time.Sleep(50 * time.Millisecond)
				}
				code = -2
			}
			e.ended(code, done)
			return
		}
	}()
}

func (e *entryProc) signal(sig syscall.Signal) {
	if !e.running() {
		return
	}
	pid, _ := e.process()
	switch sig {
	case syscall.SIGSTOP:
		e.dis.begin(e.name, disFrozen)
	case syscall.SIGCONT:
		e.dis.end(e.name, disFrozen)
	}
	syscall.Kill(pid, sig)
}

// kill is kill -9, and waits for the process to be gone.
func (e *entryProc) kill() {
	if !e.running() {
		return
	}
	pid, done := e.process()
	e.dis.begin(e.name, disKilled)
	syscall.Kill(pid, syscall.SIGKILL)
	<-done
}

// stop is SIGTERM, the operator's restart: the entry leaves the cluster, drains and exits.
// It waits up to within for the exit, then kills it and reports false.
func (e *entryProc) stop(within time.Duration) bool {
	if !e.running() {
		return true
	}
	pid, done := e.process()
	d := e.dis.begin(e.name, disDrained)
	syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-done:
		e.dis.endAt(d, e.exitTime())
		return true
	case <-time.After(within):
		e.kill()
		return false
	}
}

// exitTime is when the entry's last process to end ended.
func (e *entryProc) exitTime() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.exitAt
}

type statusDoc struct {
	Version string `json:"version"`
	Ready   bool   `json:"ready"`
	Homes   struct {
		Held   int    `json:"held"`
		Local  int    `json:"local"`
		Gossip int    `json:"gossip"`
		Digest string `json:"digest"` // order-independent digest of the homes held
	} `json:"homes"`
	Regions []struct {
		Name           string `json:"name"`
		Marked         bool   `json:"marked"`           // plain writes ask it last (until a router of it answers)
		MarkedForReads bool   `json:"marked_for_reads"` // reads and keyed writes too (--read-backoff)
	} `json:"regions"`
	Marks   []markDoc `json:"marks"` // the failing regions
	Members []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"members"`
}

var statusClient = &http.Client{Timeout: 2 * time.Second}

func (e *entryProc) status() (statusDoc, error) {
	var s statusDoc
	resp, err := statusClient.Get("http://" + e.admin + "/status.json")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&s)
	return s, err
}

func (s statusDoc) member(name string) string {
	for _, m := range s.Members {
		if m.Name == name {
			return m.State
		}
	}
	return ""
}

func (s statusDoc) alive() int {
	n := 0
	for _, m := range s.Members {
		if m.State == "alive" {
			n++
		}
	}
	return n
}

// markedForReads: a read planned now asks region last (its latest failure is younger than
// --read-backoff and no router of it has answered since).
func (s statusDoc) markedForReads(region string) bool {
	for _, r := range s.Regions {
		if r.Name == region {
			return r.MarkedForReads
		}
	}
	return false
}

// markDoc is a failing region: its latest failure is newer than its latest clear.
type markDoc struct {
	Region     string    `json:"region"`
	Observer   string    `json:"observer"`
	FailedAt   time.Time `json:"failed_at"`
	ReadsUntil time.Time `json:"reads_until"`
}

// line describes the mark as entry lists it, for the log.
func (m markDoc) line(entry string) string {
	return fmt.Sprintf("%s: %s failing (seen by %s at %s; reads ask it first again from %s)",
		entry, m.Region, m.Observer, m.FailedAt.Format("15:04:05.000"), m.ReadsUntil.Format("15:04:05.000"))
}

// marksLine describes the failing regions the entry lists, for the log.
func (s statusDoc) marksLine(entry string) []string {
	var out []string
	for _, m := range s.Marks {
		out = append(out, m.line(entry))
	}
	return out
}

// serfKeys runs the stock serf CLI's `serf keys` with args through entry e's RPC, with
// -rpc-auth; it fails when serf does (a member that did not answer, a refused key).
func (h *harness) serfKeys(e *entryProc, args ...string) (string, error) {
	return h.serfKeysAuth(e, rpcAuth, args...)
}

// serfKeysAuth is serfKeys with -rpc-auth auth; "" sends none.
func (h *harness) serfKeysAuth(e *entryProc, auth string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pre := []string{"keys", "-rpc-addr", e.rpc}
	if auth != "" {
		pre = append(pre, "-rpc-auth", auth)
	}
	args = append(pre, args...)
	out, err := exec.CommandContext(ctx, bin.serf, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("serf %s via %s: %w: %s", redact(strings.Join(args, " ")), e.name, err, redact(strings.TrimSpace(string(out))))
	}
	return string(out), nil
}

// redact shows the suite's gossip keys and RPC token by name, in a command line or an output.
func redact(s string) string {
	return strings.NewReplacer(gossipKeyA, "<key A>", gossipKeyB, "<key B>", rpcAuth, "<rpc auth>").Replace(s)
}

// procMetrics are the process figures the leak check compares.
type procMetrics struct {
	goroutines, fds, rss float64
}

func (m procMetrics) String() string {
	return fmt.Sprintf("goroutines %.0f, fds %.0f, rss %.1f MiB", m.goroutines, m.fds, m.rss/(1<<20))
}

func (e *entryProc) metrics() (procMetrics, error) {
	var m procMetrics
	resp, err := statusClient.Get("http://" + e.admin + "/metrics")
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "go_goroutines":
			m.goroutines, found = v, found+1
		case "process_open_fds":
			m.fds, found = v, found+1
		case "process_resident_memory_bytes":
			m.rss, found = v, found+1
		}
	}
	if found != 3 {
		return m, errors.New("/metrics lacks go_goroutines, process_open_fds or process_resident_memory_bytes")
	}
	return m, nil
}

// exitCode is the exit code of the entry's last process to end (-1: killed by a signal).
func (e *entryProc) exitCode() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.exit
}

// ---- the harness ----

type harness struct {
	t        *testing.T
	scenario string
	seed     int64
	dir      string
	standin  *standinProc
	entries  []*entryProc
	faults   *faultLog
	dirLog   *directoryLog
	dis      *disruptions // what the scenario did to the entries: kills, freezes, drains, upgrades
	rec      *recorder
	tls      *suiteTLS    // the TLS entry's certificate, and what clients trust
	ready    *http.Client // GET /_entry/ready on the client ports (TLS to the TLS entry), a new connection each
}

func newHarness(t *testing.T, scenario string, seed int64) *harness {
	return newHarnessWith(t, scenario, seed, nil)
}

// newHarnessWith is newHarness, with prep (if not nil) called on each entry after its flags
// are set and before its first start: another binary, another flag.
func newHarnessWith(t *testing.T, scenario string, seed int64, prep func(*entryProc)) *harness {
	if *flagSeed != 0 {
		seed = *flagSeed
	}
	dir, err := os.MkdirTemp("", "fenec-chaos-"+scenario+"-")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, scenario: scenario, seed: seed, dir: dir, faults: newFaultLog(), dirLog: newDirectoryLog(), dis: &disruptions{}}
	if h.tls, err = newSuiteTLS(t.TempDir()); err != nil {
		t.Fatalf("the TLS entry's certificate: %v", err)
	}
	h.ready = &http.Client{Timeout: 2 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: h.tls.client()}}
	h.rec = newRecorder(h)
	t.Cleanup(func() {
		if t.Failed() || *flagKeep {
			t.Logf("logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	t.Logf("scenario %s, seed %d, logs in %s", scenario, seed, dir)
	h.startStandin()
	h.newEntries()
	for _, e := range h.entries {
		if prep != nil {
			prep(e)
		}
		e.start(t)
	}
	h.waitCluster(30 * time.Second)
	return h
}

func (h *harness) entry(name string) *entryProc {
	for _, e := range h.entries {
		if e.name == name {
			return e
		}
	}
	h.t.Fatalf("no entry %s", name)
	return nil
}

// waitCluster waits until every entry is ready and sees the three entries alive, and its
// client port answers GET /_entry/ready 200 (over TLS at the TLS entry), and returns how long
// it took; past within it fails the test with what the last entry lacked.
func (h *harness) waitCluster(within time.Duration) time.Duration {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	took, err := testutil.Poll(ctx, 100*time.Millisecond, "cluster whole", func() error {
		for _, e := range h.entries {
			s, err := e.status()
			if err != nil || !s.Ready || s.alive() != len(h.entries) {
				return fmt.Errorf("%s: ready %v, members %+v, err %v", e.name, s.Ready, s.Members, err)
			}
			if err := h.clientReady(e); err != nil {
				return fmt.Errorf("%s: client port: %v", e.name, err)
			}
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return took
}

// clientReady asks the entry's client port (over TLS at the TLS entry, on a new connection)
// whether it is ready: GET /_entry/ready, 200.
func (h *harness) clientReady(e *entryProc) error {
	resp, err := h.ready.Get(e.url("/_entry/ready"))
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", e.url("/_entry/ready"), resp.StatusCode)
	}
	return nil
}

// waitStatus polls an entry's status until cond holds, and returns how long it took; past
// within it marks the test failed (any goroutine may call it) and returns false.
func (h *harness) waitStatus(e *entryProc, within time.Duration, what string, cond func(statusDoc) bool) (time.Duration, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	took, err := testutil.Poll(ctx, 50*time.Millisecond, what, func() error {
		s, err := e.status()
		if err == nil && !cond(s) {
			err = fmt.Errorf("%s's status does not show it", e.name)
		}
		return err
	})
	if err != nil {
		h.t.Error(err)
		return took, false
	}
	return took, true
}

// baseline records every entry's process figures after a warm-up at full concurrency, with
// the client's idle connections closed.
func (h *harness) baseline() {
	h.rec.closeIdle()
	time.Sleep(300 * time.Millisecond)
	for _, e := range h.entries {
		m, err := e.metrics()
		if err != nil {
			h.t.Fatalf("%s: %v", e.name, err)
		}
		e.base = m
		h.t.Logf("baseline %s: %v", e.name, m)
	}
}

// warmup teaches every entry the homes of tenants (one request each through every entry),
// then runs the scenario's traffic shape for a moment so that the router pools fill as they
// will under load, and takes the baseline.
func (h *harness) warmup(ts []string) {
	for _, e := range h.entries {
		for _, tn := range ts {
			h.rec.probe(e, tn, "warm")
		}
	}
	tr := h.startTraffic(h.seed^0x5eed, 12, ts)
	time.Sleep(1500 * time.Millisecond)
	tr.stop()
	h.baseline()
}

func (h *harness) logf(format string, args ...any) {
	h.t.Logf("%s +%s: %s", h.scenario, time.Since(h.rec.t0).Round(100*time.Millisecond), fmt.Sprintf(format, args...))
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// metricLines returns the /metrics lines of the named metrics (for the log).
func (e *entryProc) metricLines(names ...string) []string {
	resp, err := statusClient.Get("http://" + e.admin + "/metrics")
	if err != nil {
		return []string{err.Error()}
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		for _, n := range names {
			if strings.HasPrefix(l, n+"{") || strings.HasPrefix(l, n+" ") {
				out = append(out, l)
			}
		}
	}
	return out
}
