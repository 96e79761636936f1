package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fenec/fenec-entry/internal/testutil"
	"github.com/fenec/fenec-entry/standin"
)

func noEnv(string) (string, bool) { return "", false }

func TestRunRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	badFile := filepath.Join(dir, "tenants")
	os.WriteFile(badFile, []byte("# directory\nacme=eu\nglobex\n"), 0o600)
	eu := "--region=eu=127.0.0.1:0"
	tests := []struct {
		name string
		args []string
		env  map[string]string
		flag string
	}{
		{"no region", nil, nil, "--region"},
		{"region without addresses", []string{"--region", "eu="}, nil, "--region"},
		{"address without port", []string{"--region", "eu=127.0.0.1"}, nil, "--region"},
		{"bad port", []string{"--region", "eu=127.0.0.1:99999"}, nil, "--region"},
		{"region twice", []string{eu, eu}, nil, "--region"},
		{"same address twice", []string{"--region", "eu=127.0.0.1:7101", "--region", "us=127.0.0.1:7101"}, nil, "--region"},
		{"tenant in an unknown region", []string{eu, "--tenants", "acme=us"}, nil, "--tenants"},
		{"tenant without region", []string{eu, "--tenants", "acme"}, nil, "--tenants"},
		{"tenant twice", []string{eu, "--tenants", "acme=eu,acme=eu"}, nil, "--tenants"},
		{"tenants file missing", []string{eu, "--tenants", "@" + filepath.Join(dir, "nope")}, nil, "--tenants"},
		{"tenants file bad line", []string{eu, "--tenants", "@" + badFile}, nil, "--tenants"},
		{"unknown fault", []string{"--region", "eu=127.0.0.1:7101", "--fault", "127.0.0.1:7101=crash"}, nil, "--fault"},
		{"fault on no router", []string{eu, "--fault", "127.0.0.1:7999=down"}, nil, "--fault"},
		{"bad cors", []string{eu, "--http-cors", "example.com"}, nil, "--http-cors"},
		{"bad keepalive", []string{eu, "--http-keepalive", "soon"}, nil, "--http-keepalive"},
		{"zero keepalive", []string{eu, "--http-keepalive", "0s"}, nil, "--http-keepalive"},
		{"bad log level", []string{eu, "--log-level", "loud"}, nil, "--log-level"},
		{"items not a number", []string{eu, "--items", "many"}, nil, "--items"},
		{"items a fraction", []string{eu, "--items=1.5"}, nil, "--items"},
		{"items empty", []string{eu, "--items="}, nil, "--items"},
		{"items negative", []string{eu, "--items", "-1"}, nil, "--items"},
		{"items too many", []string{eu, "--items", "10001"}, nil, "--items"},
		{"items bad env", []string{eu}, map[string]string{"FENEC_STANDIN_ITEMS": "some"}, "--items"},
		{"unknown flag", []string{eu, "--regions", "x"}, nil, "--regions"},
		{"missing value", []string{eu, "--tenants"}, nil, "--tenants"},
		{"bad env", nil, map[string]string{"FENEC_STANDIN_REGION": "eu=nope"}, "--region"},
		{"bad env, second value", nil, map[string]string{"FENEC_STANDIN_REGION": "eu=127.0.0.1:0;us"}, "--region"},
		// An entry's environment configures no stand-in: --region is still missing.
		{"an entry's variable is not read", nil, map[string]string{"FENEC_ENTRY_REGION": "eu=127.0.0.1:0"}, "--region"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			env := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			code := run(context.Background(), tt.args, env, &stdout, &stderr)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.flag+":") {
				t.Errorf("stderr = %q, want one line naming %s", stderr.String(), tt.flag)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

func TestParseArgs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tenants")
	os.WriteFile(file, []byte("# the directory\nacme = eu  # a comment\n\nglobex=us\n"), 0o600)
	env := map[string]string{
		"FENEC_STANDIN_REGION":      "eu=127.0.0.1:0,127.0.0.1:0;us=127.0.0.1:0",
		"FENEC_STANDIN_ENTRY_TOKEN": "from-env",
		"FENEC_STANDIN_LOG_LEVEL":   "debug",
	}
	opts, err := parseArgs([]string{"--tenants", "@" + file, "-http-cors=*", "--log-level", "warn"},
		func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.regions) != 2 || opts.regions[0].Name != "eu" || len(opts.regions[0].Addrs) != 2 || opts.regions[1].Name != "us" {
		t.Errorf("regions = %+v", opts.regions)
	}
	if len(opts.tenants) != 2 || opts.tenants["acme"] != "eu" || opts.tenants["globex"] != "us" {
		t.Errorf("tenants = %v", opts.tenants)
	}
	if opts.token != "from-env" || opts.cors != "*" || opts.logLevel.String() != "warn" || opts.keepAlive != 15*time.Second {
		t.Errorf("options = %+v", opts)
	}
	if opts.items != 1 || opts.config().Items != 1 {
		t.Errorf("items = %d, want the default 1", opts.items)
	}
	for _, tt := range []struct {
		args []string
		env  string
		want int
	}{
		{[]string{"--items", "0"}, "", 0},
		{[]string{"--items=10000"}, "", 10000},
		{nil, "5", 5},
		{[]string{"--items", "2"}, "5", 2}, // the command line wins
	} {
		env := func(k string) (string, bool) {
			if k == "FENEC_STANDIN_ITEMS" && tt.env != "" {
				return tt.env, true
			}
			return "", false
		}
		opts, err := parseArgs(append([]string{"--region", "eu=127.0.0.1:0"}, tt.args...), env)
		if err != nil || opts.items != tt.want {
			t.Errorf("args %q env %q: items %v, %v, want %d", tt.args, tt.env, opts, err, tt.want)
		}
	}
}

// The help fits 100 columns, and every fault mode the code knows (standin.FaultModes, which
// ParseFault reads) is in the help with its phrase and in the README with a curl line to set
// it, as is every flag with its environment variable: the three cannot drift.
func TestHelpAndREADMEListEveryFaultModeAndFlag(t *testing.T) {
	help := usage()
	for i, line := range strings.Split(strings.TrimSuffix(help, "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > helpWidth {
			t.Errorf("--help line %d is %d columns, want at most %d: %q", i+1, n, helpWidth, line)
		}
	}
	if !strings.Contains(help, readme) {
		t.Errorf("--help does not point to %s", readme)
	}
	if _, err := os.Stat(filepath.Join("..", "..", readme)); err != nil {
		t.Errorf("--help points to %s: %v", readme, err)
	}
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	modes := standin.FaultModes()
	if len(modes) == 0 {
		t.Fatal("standin.FaultModes is empty")
	}
	helpLine := func(syntax string) string {
		for _, line := range strings.Split(help, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == syntax {
				return line
			}
		}
		return ""
	}
	for _, m := range modes {
		line := helpLine(m.Syntax)
		if line == "" || !strings.Contains(strings.Join(strings.Fields(help), " "), m.Syntax+" "+m.Summary) {
			t.Errorf("--help does not list fault mode %s with %q:\n%s", m.Syntax, m.Summary, help)
		}
		if !strings.Contains(doc, "| `"+m.Syntax+"` |") {
			t.Errorf("README.md's table of fault modes has no row for %s", m.Syntax)
		}
		set := regexp.MustCompile(`(?m)^curl .*-d mode=` + regexp.QuoteMeta(strings.Replace(m.Syntax, "<ms>", "", 1)) + `[0-9]*[ ']`)
		if !set.MatchString(doc) {
			t.Errorf("README.md has no curl line setting fault mode %s", m.Syntax)
		}
	}
	if !regexp.MustCompile(`(?m)^curl .*-d mode=ok `).MatchString(doc) {
		t.Error("README.md has no curl line clearing a fault (mode=ok)")
	}
	newFlagSet().fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(doc, "`--"+f.Name+" ") || !strings.Contains(doc, "`"+envName(f.Name)+"`") {
			t.Errorf("README.md's table of flags has no --%s with %s", f.Name, envName(f.Name))
		}
	})
}

func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, noEnv, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--region", "FENEC_STANDIN_REGION", "--tenants", "--entry-token", "FENEC_STANDIN_ENTRY_TOKEN",
		"--http-cors", "--http-keepalive", "--log-level", "--fault", "--items", "FENEC_STANDIN_ITEMS"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("--help does not mention %s:\n%s", want, stdout.String())
		}
	}
}

// readRouters reads the routers run prints on stdout; it fails the test if they are not all
// there within 10s.
func readRouters(t *testing.T, r io.Reader, n int) []map[string]string {
	t.Helper()
	type result struct {
		routers []map[string]string
		err     error
	}
	got := make(chan result, 1)
	go func() { // reads until n lines or EOF; the test's end closes r
		sc := bufio.NewScanner(r)
		var routers []map[string]string
		for len(routers) < n && sc.Scan() {
			var m map[string]string
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				got <- result{err: fmt.Errorf("stdout line %q: %w", sc.Text(), err)}
				return
			}
			routers = append(routers, m)
		}
		if len(routers) != n {
			got <- result{err: fmt.Errorf("read %d routers, want %d (%v)", len(routers), n, sc.Err())}
			return
		}
		got <- result{routers: routers}
	}()
	select {
	case res := <-got:
		if res.err != nil {
			t.Fatal(res.err)
		}
		return res.routers
	case <-time.After(10 * time.Second):
		t.Fatalf("fewer than %d router lines on stdout within 10s", n)
		return nil
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr testutil.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--region", "eu=127.0.0.1:0,127.0.0.1:0", "--region", "us=127.0.0.1:0",
			"--tenants", "acme=eu", "--entry-token", "very-secret-token", "--log-level", "debug"}, noEnv, pw, &stderr)
		pw.Close()
	}()
	routers := readRouters(t, pr, 3)
	if routers[2]["region"] != "us" || !strings.HasPrefix(routers[2]["url"], "http://127.0.0.1:") {
		t.Errorf("routers = %v", routers)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Post(routers[2]["url"]+"/t/acme/items", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 || resp.Header.Get("Fenec-Shard") != "1" {
		t.Errorf("write: %d %v", resp.StatusCode, resp.Header)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d, want 0; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	if strings.Contains(stderr.String(), "very-secret-token") {
		t.Error("the entry token was logged")
	}
	if !strings.Contains(stderr.String(), `"message":"request"`) {
		t.Errorf("no debug request line in the log:\n%s", stderr.String())
	}
}

// A stand-in started with --items answers GET of a seeded item 200 at once, in the tenant's
// home region and relayed from another; without seeded items (--items 0) it is 404.
func TestRunSeedsItems(t *testing.T) {
	for _, tt := range []struct {
		items  string
		seeded []string // ids answered 200
		absent []string // ids answered 404
	}{
		{"", []string{"1"}, []string{"2", "0"}}, // the default
		{"3", []string{"1", "2", "3"}, []string{"4"}},
		{"0", nil, []string{"1"}},
	} {
		t.Run("items="+tt.items, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			args := []string{"--region", "eu=127.0.0.1:0,127.0.0.1:0", "--region", "us=127.0.0.1:0",
				"--tenants", "acme=eu,globex=us", "--log-level", "disabled"}
			if tt.items != "" {
				args = append(args, "--items", tt.items)
			}
			pr, pw := io.Pipe()
			var stderr testutil.LogBuffer
			done := make(chan int, 1)
			go func() {
				done <- run(ctx, args, noEnv, pw, &stderr)
				pw.Close()
			}()
			defer func() {
				cancel()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Error("run did not return after cancel")
				}
			}()
			routers := readRouters(t, pr, 3)
			go io.Copy(io.Discard, pr)
			client := &http.Client{Timeout: 5 * time.Second}
			get := func(u, tenant, id string) (int, http.Header, map[string]any) {
				t.Helper()
				hr, _ := http.NewRequestWithContext(ctx, http.MethodGet, u+"/t/"+tenant+"/items/"+id, nil)
				hr.Header.Set("Fenec-Home", "1")
				resp, err := client.Do(hr)
				if err != nil {
					t.Fatalf("GET %s item %s at %s: %v", tenant, id, u, err)
				}
				defer resp.Body.Close()
				var m map[string]any
				json.NewDecoder(resp.Body).Decode(&m)
				return resp.StatusCode, resp.Header, m
			}
			for _, tn := range []struct{ tenant, home string }{{"acme", "eu"}, {"globex", "us"}} {
				for _, r := range routers {
					relayed := r["region"] != tn.home
					for _, id := range tt.seeded {
						status, h, m := get(r["url"], tn.tenant, id)
						if status != 200 || m["id"] != id || m["region"] != tn.home || h.Get("Fenec-Home") != tn.home ||
							(h.Get("Standin-Relayed-By") != "") != relayed {
							t.Errorf("GET %s item %s at %s (%s): %d %v %v, want 200 from %s (relayed: %v)",
								tn.tenant, id, r["addr"], r["region"], status, h, m, tn.home, relayed)
						}
					}
					for _, id := range tt.absent {
						if status, h, _ := get(r["url"], tn.tenant, id); status != 404 || h.Get("Fenec-Home") != tn.home {
							t.Errorf("GET %s item %s at %s: %d %v, want 404 with Fenec-Home %s", tn.tenant, id, r["addr"], status, h, tn.home)
						}
					}
				}
			}
		})
	}
}

func TestBinaryStopsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "fenec-standin")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--region", "eu=127.0.0.1:0", "--tenants", "acme=eu")
	stdout, _ := cmd.StdoutPipe()
	var stderr testutil.LogBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	routers := readRouters(t, stdout, 1)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(routers[0]["url"] + "/_standin/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10s after SIGTERM; stderr:\n%s", stderr.String())
	}

	// Bad configuration: exit 2, one line.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--region", "eu=127.0.0.1:0", "--tenants", "acme=us").CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("bad config: still running after 10s (output %q)", out)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || strings.Count(string(out), "\n") != 1 || !strings.Contains(string(out), "--tenants") {
		t.Errorf("bad config: %v, output %q", err, out)
	}
}
