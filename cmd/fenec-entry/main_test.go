package main

import (
	"bytes"
	"encoding/json"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestRunExitStatus(t *testing.T) {
	env := envOf(map[string]string{"FLY_REGION": "fra", "FLY_MACHINE_ID": "m1"})
	tests := []struct {
		name       string
		args       []string
		status     int
		stdout     string // contained in stdout
		stderrLine string // stderr is exactly one line containing this ("" for no stderr)
	}{
		{"version", []string{"version"}, 0, "fenec-entry ", ""},
		{"help", []string{"help"}, 0, "Usage: fenec-entry <command>", ""},
		{"serve help", []string{"serve", "--help"}, 0, "FENEC_ENTRY_ROUTERS", ""},
		{"demo help", []string{"demo", "--help"}, 0, "Usage: fenec-entry demo", ""},
		{"version help", []string{"version", "--help"}, 0, "Usage: fenec-entry version", ""},
		{"no command", nil, 2, "", "\x00"},
		{"unknown command", []string{"start"}, 2, "", `unknown command "start" (want serve, demo or version`},
		{"flag before command", []string{"--gossip-key=c2VjcmV0", "serve"}, 2, "", "flags go after the command"},
		{"version with arguments", []string{"version", "--json"}, 2, "", "takes no arguments"},
		{"unknown flag", []string{"serve", "--routers", testRouters, "--nope"}, 2, "", "--nope: unknown flag"},
		{"bad value", []string{"serve", "--routers", "eu=ftp://r:1"}, 2, "", "--routers: "},
		{"config error from a file", []string{"serve", "--routers", testRouters, "--router-ca", "/nonexistent/ca.pem",
			"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, 2, "", "--router-ca: "},
		{"geoip file missing", []string{"serve", "--routers", testRouters, "--geoip", "/nonexistent/geo.mmdb",
			"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, 2, "", "--geoip: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := run(tt.args, &stdout, &stderr, env)
			if status != tt.status {
				t.Errorf("status %d, want %d (stderr %q)", status, tt.status, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.stdout) {
				t.Errorf("stdout %q, want it to contain %q", stdout.String(), tt.stdout)
			}
			switch tt.stderrLine {
			case "":
				if stderr.Len() != 0 {
					t.Errorf("stderr %q, want none", stderr.String())
				}
			case "\x00": // usage
				if stderr.Len() == 0 {
					t.Error("no usage on stderr")
				}
			default:
				if lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n"); len(lines) != 1 ||
					!strings.Contains(lines[0], tt.stderrLine) {
					t.Errorf("stderr %q, want one line containing %q", stderr.String(), tt.stderrLine)
				}
				if strings.Contains(stderr.String(), "c2VjcmV0") {
					t.Errorf("stderr shows a secret: %q", stderr.String())
				}
			}
		})
	}
}

func TestVersionLine(t *testing.T) {
	b := readBuildInfo()
	line := b.String()
	for _, want := range []string{"fenec-entry ", "commit ", runtime.Version()} {
		if !strings.Contains(line, want) {
			t.Errorf("version line %q lacks %q", line, want)
		}
	}
	old := version
	defer func() { version = old }()
	version = "v1.2.3"
	if got := readBuildInfo().short(); got != "v1.2.3" {
		t.Errorf("short() = %q with -X main.version=v1.2.3", got)
	}
	for _, v := range []string{"4b79f65", "4b79f65aa0b1c2d3"} {
		got := (buildInfo{version: v, commit: "4b79f65aa0b1c2d3", goVer: "go1.26", platform: "linux/amd64"}).String()
		if want := "fenec-entry commit 4b79f65aa0b1c2d3 go1.26 linux/amd64"; got != want {
			t.Errorf("version line with the commit as version %q = %q, want %q (the commit once)", v, got, want)
		}
	}
	if got := (buildInfo{version: "dev", commit: "0123456789abcdef", modified: true}).short(); got != "dev-0123456789ab-modified" {
		t.Errorf("short() of a dev build = %q", got)
	}
}

// The first signal says what happens (drain) and cancels the context; the second exits 1 at
// once; stop without a signal cancels the context and says nothing.
func TestWatchSignals(t *testing.T) {
	ch := make(chan os.Signal, 2)
	var mu sync.Mutex
	var said []string
	say := func(what string) func(os.Signal) {
		return func(s os.Signal) { mu.Lock(); said = append(said, what+" "+s.String()); mu.Unlock() }
	}
	exited := make(chan int, 1)
	ctx, stop := watchSignals(ch, say("first"), say("second"), func(code int) { exited <- code })
	defer stop()
	ch <- os.Interrupt
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the first signal did not cancel the context")
	}
	ch <- syscall.SIGTERM
	select {
	case code := <-exited:
		if code != 1 {
			t.Errorf("second signal: exit status %d, want 1", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second signal did not exit")
	}
	stop()
	mu.Lock()
	if want := []string{"first interrupt", "second terminated"}; !slices.Equal(said, want) {
		t.Errorf("said %q, want %q", said, want)
	}
	mu.Unlock()

	ctx, stop = watchSignals(make(chan os.Signal), say("x"), say("y"), func(int) { t.Error("exit without a signal") })
	stop()
	stop() // safe twice
	if ctx.Err() == nil {
		t.Error("stop did not cancel the context")
	}
}

// At a terminal the first Ctrl-C gets a plain sentence naming the drain, whatever the log
// level; a log collector (no terminal) gets JSON lines only.
func TestDrainNotice(t *testing.T) {
	for _, level := range []zerolog.Level{zerolog.InfoLevel, zerolog.WarnLevel} {
		var logs, tty bytes.Buffer
		drainNotice(zerolog.New(&logs).Level(level), &tty, 1500*time.Millisecond)(os.Interrupt)
		want := "fenec-entry: interrupt: draining for 1.5s (--drain), then up to 10s for open requests; Ctrl-C again stops at once\n"
		if tty.String() != want {
			t.Errorf("at %s, the terminal got %q, want %q", level, tty.String(), want)
		}
		if level == zerolog.InfoLevel {
			var line struct {
				Signal, Drain, Message string
			}
			if err := json.Unmarshal(logs.Bytes(), &line); err != nil || line.Signal != "interrupt" ||
				line.Drain != "1.5s" || !strings.Contains(line.Message, "a second signal stops at once") {
				t.Errorf("log line %q (%v)", logs.String(), err)
			}
		}
		tty.Reset()
		secondNotice(zerolog.New(&logs).Level(level), &tty)(os.Interrupt)
		if tty.String() != "fenec-entry: interrupt again: stopping at once\n" {
			t.Errorf("second: the terminal got %q", tty.String())
		}
	}
	var logs bytes.Buffer
	drainNotice(zerolog.New(&logs), nil, time.Second)(syscall.SIGTERM) // no terminal: JSON only
	if !json.Valid(bytes.TrimSpace(logs.Bytes())) {
		t.Errorf("without a terminal: %q, want one JSON line", logs.String())
	}
	if terminal(&logs) != nil {
		t.Error("a buffer taken for a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if terminal(w) != nil {
		t.Error("a pipe taken for a terminal")
	}
}

// The Ps follow the load unless GOMAXPROCS is set (then it is the operator's).
func TestAdaptProcs(t *testing.T) {
	for env, want := range map[string]bool{"": true, "2": false, "1": false} {
		got := adaptProcs(func(k string) string {
			if k == "GOMAXPROCS" {
				return env
			}
			return ""
		})
		if got != want {
			t.Errorf("GOMAXPROCS=%q: adapt %v, want %v", env, got, want)
		}
	}
}
