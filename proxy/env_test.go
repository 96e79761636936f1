package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/testutil"
	"github.com/fenec/fenec-entry/standin"
)

// testEnv is one entry (an httptest server around a Handler) in front of
// real stand-in routers on loopback: eu (two routers) and us (two routers).
type testEnv struct {
	t     *testing.T
	sc    *standin.Cluster
	h     *Handler
	srv   *httptest.Server
	homes *homes.Table
	clock *testutil.Clock // drives the home table's marks, and Config.Clock where a test passes it
	logs  *testutil.LogBuffer
}

type envOpt func(*Config, *standin.Config)

func withEntryToken(tok string) envOpt {
	return func(c *Config, s *standin.Config) { c.EntryToken = tok; s.EntryToken = tok }
}
func withCORS(spec string) envOpt {
	return func(c *Config, s *standin.Config) { c.CORS = spec; s.CORS = spec }
}
func withConfig(f func(*Config)) envOpt { return func(c *Config, _ *standin.Config) { f(c) } }

// testRequestTimeout bounds every request a test makes through an entry's client (a stream
// included), so that a regression fails the test with the request's error instead of
// hanging until go test's timeout.
const testRequestTimeout = 20 * time.Second

// Tenants of the stand-in directory: acme and initech live in eu, globex in us.
var testTenants = map[string]string{"acme": "eu", "initech": "eu", "globex": "us", "umbrella": "us"}

func newEnv(t *testing.T, opts ...envOpt) *testEnv {
	t.Helper()
	scfg := standin.Config{
		Regions: []standin.Region{
			{Name: "eu", Addrs: []string{"127.0.0.1:0", "127.0.0.1:0"}},
			{Name: "us", Addrs: []string{"127.0.0.1:0", "127.0.0.1:0"}},
		},
		Tenants:   testTenants,
		KeepAlive: 200 * time.Millisecond,
	}
	pcfg := Config{DefaultRegion: "us", AnswerTimeout: 2 * time.Second, DialTimeout: time.Second}
	for _, o := range opts {
		o(&pcfg, &scfg)
	}
	sc, err := standin.Start(scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })

	clock := testutil.NewClock(time.Unix(1_800_000_000, 0))
	table, err := homes.New(homes.Config{Regions: []string{"eu", "us"}, Origin: "test", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range scfg.Regions {
		reg := Region{Name: r.Name}
		for _, u := range sc.URLs(r.Name) {
			pu, err := url.Parse(u)
			if err != nil {
				t.Fatal(err)
			}
			reg.Routers = append(reg.Routers, pu)
		}
		pcfg.Regions = append(pcfg.Regions, reg)
	}
	logs := &testutil.LogBuffer{}
	lg := zerolog.New(logs).Level(zerolog.DebugLevel)
	pcfg.Logger = &lg
	pcfg.Homes = table
	h, err := New(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	srv.Client().Timeout = testRequestTimeout
	t.Cleanup(func() { srv.Close(); h.Close() })
	return &testEnv{t: t, sc: sc, h: h, srv: srv, homes: table, clock: clock, logs: logs}
}

// router returns the listen address of router i of region.
func (e *testEnv) router(region string, i int) string {
	u, err := url.Parse(e.sc.URLs(region)[i])
	if err != nil {
		e.t.Fatal(err)
	}
	return u.Host
}

func (e *testEnv) fault(region string, i int, mode string) {
	e.t.Helper()
	f, err := standin.ParseFault(mode)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.sc.SetFault(e.router(region, i), f); err != nil {
		e.t.Fatal(err)
	}
}

type result struct {
	status int
	header http.Header
	body   string
}

func (e *testEnv) do(method, path string, hdr map[string]string, body string) result {
	e.t.Helper()
	var rb io.Reader
	if body != "" {
		rb = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rb)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testRequestTimeout)
	defer cancel()
	resp, err := e.srv.Client().Do(req.WithContext(ctx))
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// seenAt returns the requests a router saw from outside (not relayed to it).
func (e *testEnv) seenAt(region string, i int) []standin.Seen {
	addr := e.router(region, i)
	var out []standin.Seen
	for _, s := range e.sc.Seen() {
		if s.Router == addr {
			out = append(out, s)
		}
	}
	return out
}

// direct counts requests a region's routers got straight from the entry.
func (e *testEnv) direct(region string) int {
	n := 0
	for i := range e.sc.URLs(region) {
		for _, s := range e.seenAt(region, i) {
			if s.From == "" {
				n++
			}
		}
	}
	return n
}

func (e *testEnv) applies(tenant string) []standin.Apply {
	var out []standin.Apply
	for _, a := range e.sc.Ledger() {
		if a.Tenant == tenant {
			out = append(out, a)
		}
	}
	return out
}
