package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/dnstest"
	"github.com/fenec/fenec-entry/internal/testutil"
	"github.com/fenec/fenec-entry/standin"
)

// load sends reads through an entry from a few clients until stop, and counts every request
// that was not a router's answer (a transport error, or an answer without Fenec-Shard).
type load struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	failures   []string
	cancel     context.CancelFunc
	done       sync.WaitGroup
}

func startLoad(t *testing.T, base string, tenants ...string) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel}
	client := &http.Client{Timeout: 10 * time.Second}
	for w := range 4 {
		l.done.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				tenant := tenants[(w+i)%len(tenants)]
				req, _ := http.NewRequestWithContext(ctx, "GET", base+"/t/"+tenant+"/items/1", nil)
				resp, err := client.Do(req)
				if ctx.Err() != nil {
					return
				}
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err != nil || resp.Header.Get("Fenec-Shard") != "1" {
					l.failed.Add(1)
					l.mu.Lock()
					if len(l.failures) < 10 {
						l.failures = append(l.failures, fmt.Sprintf("%s: %v %v", tenant, err, resp))
					}
					l.mu.Unlock()
					continue
				}
				l.ok.Add(1)
			}
		})
	}
	t.Cleanup(l.stop)
	return l
}

// stop ends the load and waits for its clients.
func (l *load) stop() {
	l.cancel()
	l.done.Wait()
}

func (l *load) check(t *testing.T) {
	t.Helper()
	l.stop()
	if n := l.failed.Load(); n != 0 {
		t.Errorf("%d of %d requests failed under the change: %v", n, n+l.ok.Load(), l.failures)
	}
	if l.ok.Load() < 50 {
		t.Errorf("only %d requests answered: the load did not run", l.ok.Load())
	}
}

// seenAfter counts the requests router got from outside (not relayed) after seq.
func seenAfter(sc *standin.Cluster, router string, seq uint64) int {
	n := 0
	for _, s := range sc.Seen() {
		if s.Seq > seq && s.Router == router && s.From == "" {
			n++
		}
	}
	return n
}

func lastSeq(sc *standin.Cluster) uint64 {
	s := sc.Seen()
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1].Seq
}

func writeConfig(t *testing.T, path string, lines ...string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // as editors and config management do
		t.Fatal(err)
	}
}

// TestReloadUnderLoad, with real processes: SIGHUP and POST /reload re-read --config under
// load with no failed request; the new routers are used and the removed ones are not; a bad
// file is refused and the configuration in force keeps serving.
func TestReloadUnderLoad(t *testing.T) {
	sc, err := standin.Start(standin.Config{
		Regions: []standin.Region{
			{Name: "eu", Addrs: []string{"127.0.0.1:0", "127.0.0.1:0"}},
			{Name: "us", Addrs: []string{"127.0.0.1:0"}},
		},
		Tenants: map[string]string{"acme": "eu", "initech": "eu", "globex": "us"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	eu, us := sc.URLs("eu"), sc.URLs("us")
	euA, euB := strings.TrimPrefix(eu[0], "http://"), strings.TrimPrefix(eu[1], "http://")

	file := filepath.Join(t.TempDir(), "fenec-entry.env")
	writeConfig(t, file, "# the routers", `FENEC_ENTRY_ROUTERS="eu=`+eu[0]+`;us=`+us[0]+`"`, "FENEC_ENTRY_LOG_LEVEL=info")
	e := startEntry(t, []string{"--config", file, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--pop", "ams", "--node", "reload-test"}, cleanEnv())
	client, admin := e.started(t)
	l := startLoad(t, "http://"+client, "acme", "initech", "globex")
	testutil.Eventually(t, 10*time.Second, "load through the entry", func() bool { return l.ok.Load() > 20 })

	// 1. SIGHUP: eu moves from router A to router B.
	writeConfig(t, file, `FENEC_ENTRY_ROUTERS="eu=`+eu[1]+`;us=`+us[0]+`"`, "FENEC_ENTRY_LOG_LEVEL=info")
	if err := e.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the reload logged", func() bool {
		return strings.Contains(strings.Join(e.stderr(), "\n"), `"changed":["routers"]`)
	})
	time.Sleep(300 * time.Millisecond) // requests in flight at the reload finish on A
	seq := lastSeq(sc)
	testutil.Eventually(t, 10*time.Second, "requests reaching router B", func() bool { return seenAfter(sc, euB, seq) > 10 })
	if n := seenAfter(sc, euA, seq); n != 0 {
		t.Errorf("the removed router A got %d requests after the reload", n)
	}

	// 2. POST /reload with a bad file: refused, B keeps serving.
	writeConfig(t, file, `FENEC_ENTRY_ROUTERS="eu=`+eu[0]+`;us=ftp://nowhere"`)
	resp, err := http.Post("http://"+admin+"/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "--config: "+file+": line 1: FENEC_ENTRY_ROUTERS: ") {
		t.Errorf("a bad file: %d %s", resp.StatusCode, body)
	}
	seq = lastSeq(sc)
	testutil.Eventually(t, 10*time.Second, "router B still serving", func() bool { return seenAfter(sc, euB, seq) > 10 })
	if n := seenAfter(sc, euA, seq); n != 0 {
		t.Errorf("a refused reload sent %d requests to router A", n)
	}

	// 3. The process is still the one started (SIGHUP did not kill it), and no request failed.
	select {
	case <-e.waited:
		t.Fatalf("the entry exited: %v", e.err)
	default:
	}
	l.check(t)
}

// TestRoutersFromDNSUnderLoad, with real processes: a region's routers from
// dns+http://NAME:PORT on a DNS server the test runs (--dns-server); routers added and removed
// under load with no failed request, a removed one taking no new request.
func TestRoutersFromDNSUnderLoad(t *testing.T) {
	dns := dnstest.Start(t)
	// Two routers on one port at two loopback addresses, as a DNS name lists machines.
	var sc *standin.Cluster
	var port string
	for try := 0; sc == nil; try++ {
		ln, err := net.Listen("tcp", "127.0.0.31:0")
		if err != nil {
			t.Skipf("no 127.0.0.31 on this machine: %v", err)
		}
		port = portOf(ln.Addr().String())
		ln.Close()
		sc, err = standin.Start(standin.Config{
			Regions: []standin.Region{{Name: "eu", Addrs: []string{"127.0.0.31:" + port, "127.0.0.32:" + port}}},
			Tenants: map[string]string{"acme": "eu", "initech": "eu"},
		})
		if err != nil && try == 10 {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { sc.Close() })
	a, b := "127.0.0.31:"+port, "127.0.0.32:"+port
	dns.SetAddrs("eu.routers.test", "127.0.0.31")

	e := startEntry(t, []string{"--routers", "eu=dns+http://eu.routers.test:" + port, "--dns-server", dns.Addr,
		"--resolve-interval", "1s", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--pop", "ams", "--node", "dns-test"}, cleanEnv())
	client, admin := e.started(t)
	l := startLoad(t, "http://"+client, "acme", "initech")
	testutil.Eventually(t, 10*time.Second, "load through router A", func() bool { return seenAfter(sc, a, 0) > 20 })

	// B appears, then A leaves DNS: every request moves to B, none fails.
	dns.SetAddrs("eu.routers.test", "127.0.0.31", "127.0.0.32")
	testutil.Eventually(t, 10*time.Second, "B on the status page", func() bool {
		_, _, body := httpGet(t, "http://"+admin+"/status.json")
		return strings.Contains(body, "http://"+b)
	})
	dns.SetAddrs("eu.routers.test", "127.0.0.32")
	testutil.Eventually(t, 10*time.Second, "A off the status page", func() bool {
		_, _, body := httpGet(t, "http://"+admin+"/status.json")
		return !strings.Contains(body, "http://"+a)
	})
	time.Sleep(300 * time.Millisecond) // requests in flight to A finish
	seq := lastSeq(sc)
	testutil.Eventually(t, 10*time.Second, "requests reaching B", func() bool { return seenAfter(sc, b, seq) > 10 })
	if n := seenAfter(sc, a, seq); n != 0 {
		t.Errorf("router A, gone from DNS, got %d requests", n)
	}

	// DNS fails: the last answer (B) keeps serving.
	dns.Fail("eu.routers.test")
	testutil.Eventually(t, 10*time.Second, "the failure logged", func() bool {
		return strings.Contains(strings.Join(e.stderr(), "\n"), "failed to resolve")
	})
	seq = lastSeq(sc)
	testutil.Eventually(t, 10*time.Second, "B serving while DNS fails", func() bool { return seenAfter(sc, b, seq) > 10 })
	l.check(t)
}
