package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// The end-to-end tests build the binary and run it as an operator would.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildOut  []byte
)

// binary builds ./cmd/fenec-entry once per test run into a temporary directory.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	buildOnce.Do(func() {
		gomod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			buildErr = err
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(gomod)))
		dir, err := os.MkdirTemp("", "fenec-entry-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "fenec-entry")
		// -pgo=off: the profile-guided build compiles every dependency again, a minute of
		// CPU taken from the suite's timing tests running beside it; it changes no behaviour.
		cmd := exec.Command("go", "build", "-pgo=off", "-o", binPath, "./cmd/fenec-entry")
		cmd.Dir = root
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, buildOut)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// cleanEnv is the test's environment without any FENEC_ENTRY_ or FLY_ variable, plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envPrefix) && !strings.HasPrefix(kv, "FLY_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// entry is a running fenec-entry serve.
type entry struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string // stderr, line by line
	waited chan struct{}
	err    error // of Wait, once waited is closed
}

func startEntry(t *testing.T, args []string, env []string) *entry {
	t.Helper()
	return startEntryBin(t, binary(t), args, env)
}

// startEntryBin is startEntry with the binary at bin.
func startEntryBin(t *testing.T, bin string, args []string, env []string) *entry {
	t.Helper()
	e := &entry{cmd: exec.Command(bin, append([]string{"serve"}, args...)...), waited: make(chan struct{})}
	e.cmd.Env = env
	stderr, err := e.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			e.mu.Lock()
			e.lines = append(e.lines, sc.Text())
			e.mu.Unlock()
		}
		e.err = e.cmd.Wait()
		close(e.waited)
	}()
	t.Cleanup(func() {
		select {
		case <-e.waited:
		default:
			e.cmd.Process.Kill()
			<-e.waited
		}
		if t.Failed() {
			t.Logf("stderr of the entry:\n%s", strings.Join(e.stderr(), "\n"))
		}
	})
	return e
}

func (e *entry) stderr() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.lines...)
}

// startLine returns the client and admin addresses of the first start line in lines.
func startLine(lines []string) (client, admin string, ok bool) {
	for _, l := range lines {
		var line struct {
			Message     string `json:"message"`
			Listen      string `json:"listen"`
			AdminListen string `json:"admin_listen"`
		}
		if json.Unmarshal([]byte(l), &line) == nil && line.Message == "entry started" {
			return line.Listen, line.AdminListen, true
		}
	}
	return "", "", false
}

// started waits for the start line and returns the client and admin addresses it names.
func (e *entry) started(t *testing.T) (client, admin string) {
	t.Helper()
	testutil.EventuallyEvery(t, 10*time.Second, 20*time.Millisecond, "the entry's start line", func() bool {
		var ok bool
		if client, admin, ok = startLine(e.stderr()); ok {
			return true
		}
		select {
		case <-e.waited:
			t.Fatalf("the entry exited before starting: %v", e.err)
		default:
		}
		return false
	})
	return client, admin
}

// exitStatus waits up to within for the entry to exit and returns its status.
func (e *entry) exitStatus(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-e.waited:
	case <-time.After(within):
		t.Fatalf("the entry did not exit within %v", within)
	}
	if e.err == nil {
		return 0
	}
	if ee, ok := e.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	t.Fatalf("wait: %v", e.err)
	return -1
}

func httpGet(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

func TestServeEndToEnd(t *testing.T) {
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Fenec-Shard", "1")
		if r.Header.Get("Fenec-Home") == "1" {
			w.Header().Set("Fenec-Home", "eu")
		}
		io.WriteString(w, "answer for "+r.URL.Path)
	}))
	defer router.Close()

	const drain = 300 * time.Millisecond
	const secret = "e2e-planted-entry-token"
	e := startEntry(t,
		[]string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--drain", drain.String()},
		cleanEnv("FENEC_ENTRY_ROUTERS=eu="+router.URL, "FENEC_ENTRY_POP=e2e", "FENEC_ENTRY_NODE=e2e-1",
			"FENEC_ENTRY_ENTRY_TOKEN="+secret, "FENEC_ENTRY_LOG_LEVEL=debug"))
	client, admin := e.started(t)

	if status, _, body := httpGet(t, "http://"+client+"/t/acme/items/1"); status != 200 || body != "answer for /t/acme/items/1" {
		t.Errorf("through the entry: %d %q", status, body)
	}
	if status, _, _ := httpGet(t, "http://"+admin+"/healthz"); status != 200 {
		t.Errorf("/healthz = %d", status)
	}
	if status, _, _ := httpGet(t, "http://"+admin+"/readyz"); status != 200 {
		t.Errorf("/readyz = %d", status)
	}
	if _, _, metrics := httpGet(t, "http://"+admin+"/metrics"); !strings.Contains(metrics, "fenec_entry_requests_total") {
		t.Errorf("/metrics lacks fenec_entry_requests_total")
	}

	sent := time.Now()
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if status := e.exitStatus(t, drain+10*time.Second+5*time.Second); status != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", status)
	}
	if took := time.Since(sent); took < drain {
		t.Errorf("exited %v after SIGTERM, before --drain %v", took, drain)
	}
	// stderr is a pipe, not a terminal: JSON lines only, the drain notice among them.
	notice := false
	for _, l := range e.stderr() {
		if !json.Valid([]byte(l)) {
			t.Errorf("a stderr line is not JSON: %q", l)
		}
		if strings.Contains(l, secret) {
			t.Errorf("a log line shows --entry-token: %q", l)
		}
		notice = notice || strings.Contains(l, `"signal":"terminated","drain":"300ms"`)
	}
	if !notice {
		t.Error("no log line says the entry drains and for how long")
	}
}

func TestServeBadConfiguration(t *testing.T) {
	const secret = "cGxhbnRlZC1nb3NzaXAta2V5" // base64 of 18 bytes
	tests := []struct {
		name string
		args []string
		env  []string
		flag string
	}{
		{"unknown flag", []string{"--routers", "eu=http://127.0.0.1:1", "--nope"}, nil, "--nope"},
		{"bad routers", []string{"--routers", "eu=ftp://127.0.0.1:1"}, nil, "--routers"},
		{"no routers", nil, nil, "--routers"},
		{"env bad value", []string{"--routers", "eu=http://127.0.0.1:1"}, []string{"FENEC_ENTRY_BODY_BUFFER=2XB"}, "--body-buffer"},
		{"bad gossip key", []string{"--routers", "eu=http://127.0.0.1:1", "--gossip-key", secret}, nil, "--gossip-key"},
		{"missing router ca", []string{"--routers", "eu=http://127.0.0.1:1", "--router-ca", "/nonexistent.pem",
			"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, nil, "--router-ca"},
		{"state dir missing", []string{"--routers", "eu=http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"},
			[]string{"FENEC_ENTRY_STATE_DIR=/nonexistent/fenec-entry"}, "--state-dir"},
		{"state dir a file", []string{"--routers", "eu=http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
			"--state-dir", "/dev/null"}, nil, "--state-dir"},
		{"pid file's directory missing", []string{"--routers", "eu=http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
			"--pid-file", "/nonexistent/fenec-entry.pid"}, nil, "--pid-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := binary(t) // built once, before the clock starts: a cold build takes longer
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"serve"}, tt.args...)...)
			cmd.Env = cleanEnv(append([]string{"FENEC_ENTRY_POP=p", "FENEC_ENTRY_NODE=n"}, tt.env...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("not refused within 10s: still running (stderr %q)", stderr.String())
			}
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 {
				t.Fatalf("run = %v, want exit status 2 (stderr %q)", err, stderr.String())
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.flag) {
				t.Errorf("stderr %q, want one line naming %s", stderr.String(), tt.flag)
			}
			if strings.Contains(stderr.String(), secret) {
				t.Errorf("stderr shows the secret: %q", stderr.String())
			}
		})
	}
}

// TestServeBindFailureExitsOne: an address in use, whichever flag names it, stops the entry
// at once with exit 1 (the host, not the configuration) and one plain line on stderr: the
// flag, then the system's words, as a configuration error reads. A gossip address in use is
// said at once too: only a process an upgrade started waits for its address.
func TestServeBindFailureExitsOne(t *testing.T) {
	const key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // base64 of 32 bytes
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	for _, flag := range []string{"--listen", "--admin-listen", "--gossip-bind", "--gossip-bind udp", "--rpc-addr"} {
		t.Run(flag, func(t *testing.T) {
			bin := binary(t)
			var taken string
			if flag == "--gossip-bind udp" {
				pc, err := net.ListenPacket("udp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer pc.Close()
				taken = pc.LocalAddr().String()
			} else {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				taken = ln.Addr().String()
			}
			addrs := map[string]string{"--listen": "127.0.0.1:0", "--admin-listen": "127.0.0.1:0",
				"--gossip-bind": free(), "--rpc-addr": free()}
			name, proto, _ := strings.Cut(flag, " ")
			addrs[name] = taken
			args := []string{"--routers", "eu=http://127.0.0.1:1"}
			for f, a := range addrs {
				args = append(args, f, a)
			}
			began := time.Now()
			e := startEntryBin(t, bin, args, cleanEnv("FENEC_ENTRY_POP=p", "FENEC_ENTRY_NODE=n", "FENEC_ENTRY_GOSSIP_KEY="+key))
			if status := e.exitStatus(t, 10*time.Second); status != 1 {
				t.Errorf("exit status %d with %s taken, want 1", status, flag)
			}
			if took := time.Since(began); took > 3*time.Second {
				t.Errorf("took %v to say %s is in use, want it at once", took, flag)
			}
			if proto == "" {
				proto = "tcp"
			}
			lines := e.stderr()
			want := "fenec-entry serve: " + name + ": listen " + proto + " " + taken + ": bind: address already in use"
			if len(lines) == 0 || lines[len(lines)-1] != want {
				t.Errorf("stderr ends %q, want %q", lines[max(len(lines)-1, 0):], want)
			}
			for _, l := range lines {
				var line struct{ Level string }
				if json.Unmarshal([]byte(l), &line) == nil && line.Level != "" && line.Level != "info" && line.Level != "debug" {
					t.Errorf("a line above info besides the one line: %s", l)
				}
			}
		})
	}
}

// From the flags on: the headers named by --client-ip header:NAME and
// --country-header do not reach the router, which learns the client from Fenec-Client.
func TestServeDoesNotPassClientSourceHeaders(t *testing.T) {
	seen := make(chan http.Header, 4)
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		w.Header().Set("Fenec-Shard", "1")
		io.WriteString(w, "ok")
	}))
	defer router.Close()
	e := startEntry(t, []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--drain", "0s",
		"--client-ip", "header:X-Client-IP", "--trusted-proxies", "127.0.0.0/8", "--country-header", "X-Country"},
		cleanEnv("FENEC_ENTRY_ROUTERS=eu="+router.URL, "FENEC_ENTRY_POP=e2e", "FENEC_ENTRY_NODE=e2e-strip",
			"FENEC_ENTRY_ENTRY_TOKEN=e2e-token"))
	client, _ := e.started(t)

	req, _ := http.NewRequest("GET", "http://"+client+"/t/acme/items/1", nil)
	req.Header.Set("X-Client-IP", "203.0.113.9")
	req.Header.Set("X-Country", "DE")
	req.Header.Set("X-Other", "kept")
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var h http.Header
	select {
	case h = <-seen:
	case <-time.After(5 * time.Second):
		t.Fatal("the router saw nothing")
	}
	for _, k := range []string{"X-Client-Ip", "X-Country"} {
		if v := h.Values(k); len(v) != 0 {
			t.Errorf("%s reached the router: %q", k, v)
		}
	}
	if h.Get("X-Other") != "kept" {
		t.Errorf("X-Other did not reach the router: %v", h)
	}
	if v := h.Get("Fenec-Client"); !strings.HasPrefix(v, "203.0.113.9 ") {
		t.Errorf("Fenec-Client = %q, want the address --client-ip header:X-Client-IP gave", v)
	}
	e.cmd.Process.Signal(syscall.SIGTERM)
	if status := e.exitStatus(t, 15*time.Second); status != 0 {
		t.Errorf("exit status %d after SIGTERM", status)
	}
}
