//go:build linux

package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// run is one bench run: its temp dir, the processes it started, its ports. Its methods are
// safe for concurrent use.
type run struct {
	name, tmp, root string
	self            string // this program: the upstream and connhold are its commands
	keep            bool
	ctx             context.Context // done on SIGINT or SIGTERM
	mu              sync.Mutex      // guards the following fields
	procs           []*proc
	port            int
}

// proc is a process a run started, or one it follows by PID (an upgraded entry or nginx).
type proc struct {
	name string
	pid  int
	cmd  *exec.Cmd     // nil when only followed
	done chan struct{} // closed once waited for (cmd only)
	log  string
}

// newRun makes the temp dir, finds the repository, and stops everything at SIGINT or SIGTERM.
func newRun(name string, keep bool) (*run, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return nil, fmt.Errorf("finding the module's root (go list -m): %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program: %w", err)
	}
	tmp, err := os.MkdirTemp("", "fenec-"+name+".")
	if err != nil {
		return nil, err
	}
	r := &run{name: name, tmp: tmp, root: strings.TrimSpace(string(out)), self: self, keep: keep, port: 18000}
	ctx, cancel := context.WithCancel(context.Background())
	r.ctx = ctx
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		r.logf("interrupted: stopping everything")
		cancel()
		r.close()
		os.Exit(130)
	}()
	os.Setenv("PATH", os.Getenv("PATH")+":/usr/sbin:/sbin")
	return r, nil
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, r.name+": "+format+"\n", args...)
}

// close stops every process (stopAll) and removes the temp dir unless kept.
func (r *run) close() {
	r.mu.Lock()
	ps := r.procs
	r.procs = nil
	r.mu.Unlock()
	stopAll(r, ps...)
	if r.keep {
		r.logf("kept %s", r.tmp)
	} else {
		os.RemoveAll(r.tmp)
	}
}

// path is a file in the temp dir.
func (r *run) path(name string) string { return filepath.Join(r.tmp, name) }

// freePort is the next port from the run's base with neither a TCP nor a UDP listener.
func (r *run) freePort() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ; r.port < 65535; r.port++ {
		t, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(r.port))
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(r.port))
		t.Close()
		if err != nil {
			continue
		}
		u.Close()
		r.port++
		return r.port - 1, nil
	}
	return 0, errors.New("no free port left")
}

// addrs is n free loopback addresses.
func (r *run) addrs(n int) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		p, err := r.freePort()
		if err != nil {
			return nil, err
		}
		out[i] = "127.0.0.1:" + strconv.Itoa(p)
	}
	return out, nil
}

// spec is how to start a process: on CPUs (taskset; "" anywhere), under an open-file limit
// (prlimit; 0: the run's), with env added, its stdin from stdin (nil: none), its stdout to
// stdout (nil: the log file).
type spec struct {
	cpus   string
	nofile int
	env    []string
	stdin  io.Reader
	stdout io.Writer
}

// start starts argv as process name, its output in the temp dir's name.log.
func (r *run) start(name string, s spec, argv ...string) (*proc, error) {
	if s.nofile > 0 {
		argv = append([]string{"prlimit", fmt.Sprintf("--nofile=%d:%d", s.nofile, s.nofile)}, argv...)
	}
	if s.cpus != "" {
		argv = append([]string{"taskset", "-c", s.cpus}, argv...)
	}
	p := &proc{name: name, done: make(chan struct{}), log: r.path(name + ".log")}
	lf, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = append(os.Environ(), s.env...)
	p.cmd.Stdout, p.cmd.Stderr, p.cmd.Stdin = lf, lf, s.stdin
	if s.stdout != nil {
		p.cmd.Stdout = s.stdout
	}
	if err := p.cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p.pid = p.cmd.Process.Pid // taskset and prlimit exec the command: the pid is its own
	go func() { p.cmd.Wait(); lf.Close(); close(p.done) }()
	r.add(p)
	return p, nil
}

func (r *run) add(p *proc) {
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
}

// follow registers a process this run did not start (a daemon, an upgraded process), to be
// stopped with the rest.
func (r *run) follow(name string, pid int) *proc {
	p := &proc{name: name, pid: pid}
	r.add(p)
	return p
}

// stop stops p (stopAll) and forgets it.
func (r *run) stop(p *proc) {
	r.mu.Lock()
	for i, q := range r.procs {
		if q == p {
			r.procs = append(r.procs[:i], r.procs[i+1:]...)
			break
		}
	}
	r.mu.Unlock()
	stopAll(r, p)
}

// alive says whether p runs (a zombie, exited and not yet reaped, does not).
func (p *proc) alive() bool {
	if p.cmd != nil {
		select {
		case <-p.done:
			return false
		default:
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	f := statFields(string(b))
	return err == nil && len(f) > 0 && f[0] != "Z"
}

// tail is the last lines of p's log, for an error message.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	return lastLines(string(b), 10)
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// gone waits up to d for p to exit; it returns how long that took.
func (p *proc) gone(d time.Duration) (time.Duration, error) {
	t0 := time.Now()
	for p.alive() {
		if time.Since(t0) > d {
			return 0, fmt.Errorf("%s (pid %d) still runs %v later", p.name, p.pid, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(t0), nil
}

// stopAll: SIGTERM to each; a second SIGTERM to those still running 1 s later (fenec-entry
// drains on the first and stops at once on the second); SIGKILL to those and their children
// (nginx's workers) 4 s after that.
func stopAll(r *run, ps ...*proc) {
	signalAll := func(sig syscall.Signal) {
		for _, p := range ps {
			if p.alive() {
				syscall.Kill(p.pid, sig)
			}
		}
	}
	signalAll(syscall.SIGTERM)
	for i := 0; i < 50; i++ {
		left := false
		for _, p := range ps {
			left = left || p.alive()
		}
		if !left {
			return
		}
		if i == 10 {
			signalAll(syscall.SIGTERM)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range ps {
		if p.alive() {
			r.logf("%s (pid %d) still running after two SIGTERMs: SIGKILL", p.name, p.pid)
			for _, c := range children(p.pid) {
				syscall.Kill(c, syscall.SIGKILL)
			}
			syscall.Kill(p.pid, syscall.SIGKILL)
			p.gone(2 * time.Second) // so that what stopAll returns from is gone
		}
	}
}

// insecure is a client for the bench's own servers on loopback (its self-signed certificate).
var insecure = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}} //nolint:gosec // loopback, the run's own certificate

// get is one GET within timeout (0: 2 s): the status and the body.
func get(url string, timeout time.Duration) (int, []byte, error) {
	c := *insecure
	if timeout > 0 {
		c.Timeout = timeout
	}
	resp, err := c.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, b, err
}

// waitOK waits (15 s at most) for url to answer 200, failing at once if p exits.
func waitOK(p *proc, url string) error {
	code := 0
	for i := 0; i < 150; i++ {
		if !p.alive() {
			return fmt.Errorf("%s exited while starting:\n%s", p.name, p.tail())
		}
		if c, _, err := get(url, 0); err == nil {
			if code = c; c == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer 200 at %s within 15 s (last status %d)\n%s", p.name, url, code, p.tail())
}

// build builds pkg into the temp dir's bin/ as name, with the ldflags `make build` sets, so
// that `fenec-entry version` names what was measured.
func (r *run) build(name, pkg string, tags ...string) (string, error) {
	out := r.path("bin/" + name)
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "-tags", strings.Join(tags, ","), "-ldflags",
		"-s -w -X main.version="+gitOut("describe", "--tags", "--always", "--dirty")+" -X main.commit="+gitOut("rev-parse", "--short", "HEAD"), pkg)
	cmd.Dir = r.root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// entryBin is the fenec-entry to measure, in the temp dir (the storm upgrades it in place): a
// copy of bin, or a build of ./cmd/fenec-entry.
func (r *run) entryBin(name, bin string, tags ...string) (string, error) {
	if bin == "" {
		return r.build(name, "./cmd/fenec-entry", tags...)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	out := r.path("bin/" + name)
	os.MkdirAll(filepath.Dir(out), 0o755)
	return out, os.WriteFile(out, b, 0o755)
}

func gitOut(args ...string) string {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// need installs from Debian whichever of the tools (command: package) are missing, running
// apt-get update once, and only then.
func need(tools map[string]string) error {
	var pkgs []string
	for tool, pkg := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			pkgs = append(pkgs, pkg)
		}
	}
	if len(pkgs) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("need %s and not root: install them yourself", strings.Join(pkgs, " "))
	}
	fmt.Fprintln(os.Stderr, "bench: apt-get update; apt-get install", strings.Join(pkgs, " "))
	for _, args := range [][]string{{"update", "-qq"}, append([]string{"install", "-y", "-qq"}, pkgs...)} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", args[0], err)
		}
	}
	return nil
}

// makeCert writes a self-signed ECDSA P-256 certificate for localhost and 127.0.0.1 into the
// temp dir; it returns the paths of the certificate and the key.
func (r *run) makeCert() (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = r.path("cert.pem"), r.path("key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}

// version is the first line of a tool's version output, or with field > 0 that word of it
// (-: none).
func version(field int, argv ...string) string {
	out, _ := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if f := strings.Fields(line); field > 0 && field <= len(f) {
		return f[field-1]
	} else if line == "" || field > 0 {
		return "-"
	}
	return line
}

// machine is the machine's line of a report: CPUs, model, kernel, the time, the tree.
func machine() string {
	model := "-"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	rev := gitOut("rev-parse", "--short", "HEAD")
	if gitOut("status", "--porcelain") != "" {
		rev += "+dirty"
	}
	return fmt.Sprintf("nproc %d (%s), kernel %s, %s; repo at %s", numCPU(), model, strings.TrimSpace(string(kernel)),
		time.Now().UTC().Format(time.RFC3339), rev)
}

// setup is what the proxies and the storm set up alike: a certificate, wrk's report script,
// the upstream, and the raw file (JSON lines) the report goes beside.
type setup struct {
	cert, key, lua, out string
	up                  *proc
	upPort              int
	raw                 *os.File
}

func (r *run) setUp(upCPUs, out string) (setup, error) {
	var s setup
	var err error
	if s.cert, s.key, err = r.makeCert(); err != nil {
		return s, err
	}
	if s.lua, err = r.writeLua(1); err != nil {
		return s, err
	}
	if s.up, s.upPort, err = r.startUpstream(upCPUs); err != nil {
		return s, err
	}
	if s.out, err = r.outFile(out, ".jsonl"); err != nil {
		return s, err
	}
	s.raw, err = os.Create(s.out)
	return s, err
}

// rawLine writes v as a line of the raw file.
func (s setup) rawLine(v any) { json.NewEncoder(s.raw).Encode(v) }

// report prints rep and writes it beside the raw file, as .md.
func (s setup) report(rep string) error {
	md := strings.TrimSuffix(s.out, ".jsonl") + ".md"
	fmt.Print("\n" + rep + "(this report: " + md + ")\n")
	return os.WriteFile(md, []byte(rep), 0o644)
}

// reproduce is the command that runs a bench again: its name and the flags given.
func reproduce(name string, fs *flag.FlagSet) string {
	s := "go run ./bench " + name
	fs.Visit(func(f *flag.Flag) { s += " -" + f.Name + "=" + f.Value.String() })
	return s
}

// outFile is -out, or bench/out/NAME-<UTC time>.EXT.
func (r *run) outFile(out, ext string) (string, error) {
	if out == "" {
		out = filepath.Join(r.root, "bench/out", r.name+"-"+time.Now().UTC().Format("20060102T150405Z")+ext)
	}
	return out, os.MkdirAll(filepath.Dir(out), 0o755)
}
