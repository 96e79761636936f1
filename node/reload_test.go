package node

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/dnstest"
	"github.com/fenec/fenec-entry/internal/testutil"
	"github.com/fenec/fenec-entry/proxy"
)

// fakeReloader hands Reload the next Config a test sets, as cmd's reloader would from the file.
type fakeReloader struct {
	mu      sync.Mutex
	cfg     Config
	restart []string
	err     error
	calls   int
}

func (f *fakeReloader) set(c Config, restart []string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cfg, f.restart, f.err = c, restart, err
}

func (f *fakeReloader) called() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeReloader) reload() (Config, []string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.cfg, f.restart, f.err
}

func regionOf(t *testing.T, name string, raw ...string) proxy.Region {
	t.Helper()
	r := proxy.Region{Name: name}
	for _, s := range raw {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		r.Routers = append(r.Routers, u)
	}
	return r
}

// body of the router that answered: "hello from <region>".
func via(t *testing.T, c *http.Client, base, path string) string {
	t.Helper()
	_, body := get(t, c, base+path)
	return body
}

// A reload applies routers, placement, token, CORS and read backoff at once; a region it
// removes is asked no more and its homes are forgotten.
func TestReloadApplies(t *testing.T) {
	eu, us, ap := newRouter(t, "eu", nil), newRouter(t, "us", nil), newRouter(t, "ap", nil)
	cfg := testConfig(t, "eu", eu.URL, "us", us.URL)
	fr := &fakeReloader{}
	cfg.Reloader = fr.reload
	var levels []string
	cfg.SetLogLevel = func(l string) { levels = append(levels, l) }
	n, _ := startNode(t, cfg)
	client := &http.Client{Timeout: 5 * time.Second}
	base := "http://" + n.ClientAddr().String()
	if got := via(t, client, base, "/t/acme/x"); got != "hello from eu" {
		t.Fatalf("before: %q", got)
	}

	next := cfg
	next.Routers = []proxy.Region{regionOf(t, "ap", ap.URL), regionOf(t, "us", us.URL)} // eu removed, ap added first
	next.DefaultRegion = "ap"
	next.CORS = "https://app.example"
	next.ReadBackoff = 3 * time.Second
	next.LogLevel = "debug"
	fr.set(next, []string{"listen"}, nil)
	res, err := n.Reload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"routers", "continents", "default-region", "cors", "read-backoff", "log-level"}
	if !slices.Equal(res.Changed, want) || !slices.Equal(res.NeedRestart, []string{"listen"}) || res.Forgotten != 1 {
		t.Errorf("result %+v, want changed %v, needs_restart [listen], 1 home forgotten", res, want)
	}
	if got := via(t, client, base, "/t/other/x"); got != "hello from ap" {
		t.Errorf("a tenant heard nowhere after the reload: %q, want the new default ap", got)
	}
	if got := via(t, client, base, "/t/acme/x"); got != "hello from ap" {
		t.Errorf("acme, whose home eu was removed: %q, want ap", got)
	}
	if _, ok := n.homes.RegionID("eu"); ok {
		t.Error("the removed region is still in the home table")
	}
	req, _ := http.NewRequest("OPTIONS", base+"/t/acme/x", nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("preflight after CORS was reloaded: %d %v", resp.StatusCode, resp.Header)
	}
	if !slices.Equal(levels, []string{"debug"}) {
		t.Errorf("SetLogLevel calls %v, want [debug]", levels)
	}
	// The read backoff: a failure now counts for reads 3 s, not 10.
	id, _ := n.homes.RegionID("us")
	n.homes.Mark(id)
	if ms := n.homes.FailingMarks(); len(ms) != 1 || ms[0].ReadsUntil.Sub(ms[0].At) != 3*time.Second {
		t.Errorf("read backoff after the reload: %+v, want 3s", ms)
	}
	st := n.Status()
	if len(st.Regions) != 2 || st.Regions[0].Name != "ap" || st.Regions[0].Routers[0] != strings.TrimSuffix(ap.URL, "/") {
		t.Errorf("status regions after the reload: %+v", st.Regions)
	}
}

// A bad configuration is refused whole: nothing of it applies, the old one serves.
func TestReloadRefusedKeepsOld(t *testing.T) {
	eu, us := newRouter(t, "eu", nil), newRouter(t, "us", nil)
	cfg := testConfig(t, "eu", eu.URL)
	fr := &fakeReloader{}
	cfg.Reloader = fr.reload
	n, logs := startNode(t, cfg)
	client := &http.Client{Timeout: 5 * time.Second}
	base := "http://" + n.ClientAddr().String()

	bad := cfg
	bad.Routers = []proxy.Region{regionOf(t, "us", us.URL)}
	bad.DefaultRegion = "eu" // not a region any more: refused
	bad.CORS = "*"
	fr.set(bad, nil, nil)
	_, err := n.Reload(context.Background())
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Flag != "default-region" {
		t.Fatalf("Reload = %v, want a ConfigError naming default-region", err)
	}
	if got := via(t, client, base, "/t/acme/x"); got != "hello from eu" {
		t.Errorf("after a refused reload: %q, want the old eu", got)
	}
	if n.proxy.Routing().CORS != "" {
		t.Error("part of a refused reload applied (CORS)")
	}
	if !strings.Contains(logs.String(), "reload refused") {
		t.Error("a refused reload is not logged")
	}
	fr.set(Config{}, nil, &ConfigError{Flag: "config", Msg: "f: line 2: FENEC_ENTRY_ROUTERS: bad"})
	if _, err := n.Reload(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "--config: f: line 2: ") {
		t.Errorf("the reloader's error: %v", err)
	}
}

// POST /reload answers what changed, 400 with the error, 409 without --config; SIGHUP
// (ReloadOn) reloads, and without --config changes nothing and keeps serving.
func TestReloadEndpointAndSignal(t *testing.T) {
	eu, us := newRouter(t, "eu", nil), newRouter(t, "us", nil)
	client := &http.Client{Timeout: 5 * time.Second}
	post := func(admin string) (int, map[string]any) {
		resp, err := client.Post(admin+"/reload", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}

	plain := testConfig(t, "eu", eu.URL)
	hup := make(chan struct{}, 1)
	plain.ReloadOn = hup
	n0, logs0 := startNode(t, plain)
	if code, m := post("http://" + n0.AdminAddr().String()); code != 409 || m["error"] != "reload_refused" {
		t.Errorf("without --config: %d %v", code, m)
	}
	hup <- struct{}{}
	testutil.Eventually(t, 5*time.Second, "SIGHUP without --config logged", func() bool {
		return strings.Contains(logs0.String(), "no --config to re-read")
	})
	if got := via(t, client, "http://"+n0.ClientAddr().String(), "/t/a/x"); got != "hello from eu" {
		t.Errorf("after SIGHUP without --config: %q", got)
	}

	cfg := testConfig(t, "eu", eu.URL)
	fr := &fakeReloader{}
	cfg.Reloader = fr.reload
	hup2 := make(chan struct{}, 1)
	cfg.ReloadOn = hup2
	n, _ := startNode(t, cfg)
	admin, base := "http://"+n.AdminAddr().String(), "http://"+n.ClientAddr().String()
	next := cfg
	next.Routers = []proxy.Region{regionOf(t, "us", us.URL)}
	fr.set(next, nil, nil)
	code, m := post(admin)
	if code != 200 || m["status"] != "reloaded" || !slices.Equal(toStrings(m["changed"]), []string{"routers", "continents"}) {
		t.Errorf("POST /reload: %d %v", code, m)
	}
	if got := via(t, client, base, "/t/a/x"); got != "hello from us" {
		t.Errorf("after POST /reload: %q", got)
	}
	fr.set(Config{}, nil, &ConfigError{Flag: "cors", Msg: "bad"})
	if code, m := post(admin); code != 400 || !strings.HasPrefix(m["message"].(string), "--cors: ") {
		t.Errorf("a bad file: %d %v", code, m)
	}
	resp, _ := get(t, client, admin+"/reload")
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /reload: %d, want 405", resp.StatusCode)
	}

	back := cfg
	fr.set(back, nil, nil)
	calls := fr.called()
	hup2 <- struct{}{}
	testutil.Eventually(t, 5*time.Second, "SIGHUP reloads", func() bool {
		return via(t, client, base, "/t/a/x") == "hello from eu"
	})
	if fr.called() <= calls {
		t.Error("the reloader was not called for SIGHUP")
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// A region's routers from DNS: resolved before the entry listens, a router that appears takes
// requests, one that disappears takes no new ones; a failing lookup keeps the last answer.
func TestRoutersFromDNS(t *testing.T) {
	dns := dnstest.Start(t)
	// Two routers on one port, at two loopback addresses.
	var port string
	var routers []*http.Server
	for _, ip := range []string{"127.0.0.21", "127.0.0.22"} {
		addr := ip + ":0"
		if port != "" {
			addr = net.JoinHostPort(ip, port)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("cannot listen on %s: %v", addr, err)
		}
		_, port, _ = net.SplitHostPort(ln.Addr().String())
		ip := ip
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Fenec-Shard", "1")
			w.Write([]byte(ip))
		})}
		go srv.Serve(ln)
		routers = append(routers, srv)
	}
	t.Cleanup(func() {
		for _, s := range routers {
			s.Close()
		}
	})
	dns.SetAddrs("eu.routers.test", "127.0.0.21")

	cfg := testConfig(t)
	cfg.Routers = []proxy.Region{regionOf(t, "eu", "dns+http://eu.routers.test:"+port)}
	cfg.DNSServer = dns.Addr
	cfg.ResolveInterval = MinResolveInterval
	n, logs := startNode(t, cfg)
	client := &http.Client{Timeout: 5 * time.Second}
	base := "http://" + n.ClientAddr().String()
	if got := via(t, client, base, "/t/a/x"); got != "127.0.0.21" {
		t.Fatalf("first request: %q, want the router DNS gave at start", got)
	}

	dns.SetAddrs("eu.routers.test", "127.0.0.21", "127.0.0.22")
	testutil.Eventually(t, 5*time.Second, "the second router in the region", func() bool {
		return len(n.proxy.Routing().Regions[0].Discovered) == 2
	})
	// Routers are asked starting from the one that answered last (docs/REFERENCE.md, Which
	// region, which router), so the new one takes requests once the old one is gone from DNS,
	// though still alive.
	dns.SetAddrs("eu.routers.test", "127.0.0.22")
	testutil.Eventually(t, 5*time.Second, "the first router dropped", func() bool {
		return len(n.proxy.Routing().Regions[0].Discovered) == 1
	})
	for range 10 {
		if got := via(t, client, base, "/t/a/x"); got != "127.0.0.22" {
			t.Fatalf("after 127.0.0.21 left DNS: %q", got)
		}
	}
	dns.Fail("eu.routers.test")
	testutil.Eventually(t, 5*time.Second, "the failing name logged", func() bool {
		return strings.Contains(logs.String(), "failed to resolve")
	})
	if got := via(t, client, base, "/t/a/x"); got != "127.0.0.22" {
		t.Errorf("while DNS fails: %q, want the last good router", got)
	}
	st := n.Status()
	if len(st.Regions) != 1 || !slices.Equal(st.Regions[0].Names, []string{"dns+http://eu.routers.test:" + port}) ||
		len(st.Regions[0].Routers) != 1 {
		t.Errorf("status: %+v", st.Regions)
	}
}

// Each reloadable setting is taken from the new configuration and reported changed alone:
// a configuration differing in that one setting is named as that flag, and once taken, the
// two hold the same. A setting added to the table without a row here fails.
func TestReloadableTable(t *testing.T) {
	base := testConfig(t, "eu", "http://127.0.0.1:1", "us", "http://127.0.0.1:2")
	change := map[string]func(*Config){
		"routers": func(c *Config) {
			c.Routers = []proxy.Region{regionOf(t, "eu", "http://127.0.0.1:3"), c.Routers[1]}
		},
		"continents":     func(c *Config) { c.Continents = map[string]string{"EU": "us"} },
		"default-region": func(c *Config) { c.DefaultRegion = "us" },
		"cors":           func(c *Config) { c.CORS = "https://app.example" },
		"entry-token":    func(c *Config) { c.EntryToken = "another" },
		"read-backoff":   func(c *Config) { c.ReadBackoff = 42 * time.Second },
		"log-level":      func(c *Config) { c.LogLevel = "warn" },
	}
	if len(change) != len(reloadable) {
		t.Errorf("%d rows here, %d reloadable settings", len(change), len(reloadable))
	}
	for _, r := range reloadable {
		mut, ok := change[r.flag]
		if !ok {
			t.Errorf("no row for reloadable %q", r.flag)
			continue
		}
		next := base
		mut(&next)
		if got := changedSettings(base, next); !slices.Equal(got, []string{r.flag}) {
			t.Errorf("%s changed: reported %q", r.flag, got)
		}
		merged := base
		r.take(&merged, next)
		if got := changedSettings(merged, next); len(got) != 0 {
			t.Errorf("%s taken: still differs in %q", r.flag, got)
		}
	}
}

// POST /reload changes the entry: it is taken from loopback, or with --admin-token as a
// bearer token, and refused (403, the JSON error, counted) otherwise; reading stays open to
// whoever reaches the admin listener.
func TestAdminChangesNeedLoopbackOrToken(t *testing.T) {
	const token = "0123456789abcdef-admin"
	for _, row := range []struct {
		name, remote, auth, token string
		want                      int
	}{
		{"loopback", "127.0.0.1:4000", "", "", 200},
		{"loopback v6", "[::1]:4000", "", "", 200},
		{"loopback mapped", "[::ffff:127.0.0.1]:4000", "", "", 200},
		{"loopback, a token set", "127.0.0.1:4000", "", token, 200},
		{"private network, no token set", "10.0.0.5:4000", "", "", 403},
		{"private network, no token set, one sent", "10.0.0.5:4000", "Bearer " + token, "", 403},
		{"private network, the token", "[fdaa::5]:4000", "Bearer " + token, token, 200},
		{"private network, another token", "10.0.0.5:4000", "Bearer " + token + "x", token, 403},
		{"private network, the token as Basic", "10.0.0.5:4000", "Basic " + token, token, 403},
		{"private network, the token bare", "10.0.0.5:4000", token, token, 403},
	} {
		t.Run(row.name, func(t *testing.T) {
			cfg := testConfig(t, "eu", "http://127.0.0.1:1")
			cfg.AdminToken = Secret(row.token)
			fr := &fakeReloader{}
			fr.set(cfg, nil, nil)
			cfg.Reloader = fr.reload
			n, _ := startNode(t, cfg)
			req := httptest.NewRequest(http.MethodPost, "/reload", nil)
			req.RemoteAddr = row.remote
			if row.auth != "" {
				req.Header.Set("Authorization", row.auth)
			}
			rec := httptest.NewRecorder()
			n.admin.Handler.ServeHTTP(rec, req)
			var body map[string]any
			json.Unmarshal(rec.Body.Bytes(), &body)
			if rec.Code != row.want {
				t.Fatalf("%d %s, want %d", rec.Code, rec.Body, row.want)
			}
			calls := fr.called()
			if row.want == 403 {
				if body["error"] != "forbidden" || calls != 0 {
					t.Errorf("refused: body %v, %d reloads; want the JSON error and none", body, calls)
				}
				m := httptest.NewRecorder()
				n.admin.Handler.ServeHTTP(m, httptest.NewRequest(http.MethodGet, "/metrics", nil))
				if got := scrapeSum(m.Body.String(), "fenec_entry_admin_refused_total"); got != 1 {
					t.Errorf("fenec_entry_admin_refused_total = %v, want 1", got)
				}
			} else if body["status"] != "reloaded" || calls != 1 {
				t.Errorf("taken: body %v, %d reloads", body, calls)
			}
			read := httptest.NewRequest(http.MethodGet, "/status.json", nil)
			read.RemoteAddr = "10.0.0.5:4000"
			rec = httptest.NewRecorder()
			n.admin.Handler.ServeHTTP(rec, read)
			if rec.Code != 200 {
				t.Errorf("GET /status.json from the private network: %d, want 200", rec.Code)
			}
		})
	}
}
