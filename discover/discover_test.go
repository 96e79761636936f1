package discover

import (
	"context"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/internal/dnstest"
	"github.com/fenec/fenec-entry/internal/testutil"
)

func TestParseSource(t *testing.T) {
	good := map[string]Source{
		"dns+http://eu.app.internal:7000":              {KindAddr, "http", "eu.app.internal", "7000"},
		"dns+https://eu.app.internal.:443":             {KindAddr, "https", "eu.app.internal", "443"},
		"srv+http://_http._tcp.routers.service.consul": {KindSRV, "http", "_http._tcp.routers.service.consul", ""},
		"srv+https://routers.service.consul/":          {KindSRV, "https", "routers.service.consul", ""},
		"dns+http://localhost:1":                       {KindAddr, "http", "localhost", "1"},
		"DNS+HTTP://EU.example:80":                     {KindAddr, "http", "EU.example", "80"},
	}
	for raw, want := range good {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !IsSource(u) {
			t.Errorf("%s: not taken for a source", raw)
		}
		got, err := ParseSource(u)
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", raw, got, err, want)
		}
		if err == nil && !strings.EqualFold(got.String(), strings.TrimSuffix(strings.Replace(raw, ".:", ":", 1), "/")) {
			t.Errorf("%s: String() = %s", raw, got)
		}
	}
	bad := map[string]string{
		"dns+http://eu.app.internal":                   "NAME:PORT",
		"dns+http://eu.app.internal:0":                 "1 to 65535",
		"dns+http://eu.app.internal:99999":             "1 to 65535",
		"srv+http://routers.consul:7000":               "no port",
		"dns+ftp://eu:1":                               "scheme",
		"dns+http://u:p@eu:1":                          "user information",
		"dns+http://eu:1/api":                          "no path",
		"dns+http://10.0.0.1:7000":                     "an address",
		"srv+http://[::1]":                             "an address",
		"dns+http://bad..name:1":                       "label",
		"dns+http://b%21d:1":                           "",
		"srv+http://" + strings.Repeat("a", 64) + ".x": "1 to 63",
		"foo+http://eu:1":                              "scheme",
	}
	for raw, want := range bad {
		u, err := url.Parse(raw)
		if err != nil {
			continue // not even a URL: the caller's error
		}
		if _, err := ParseSource(u); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", raw, err, want)
		}
	}
}

func newTestDiscoverer(t *testing.T, srv *dnstest.Server, onChange func()) (*Discoverer, *testutil.LogBuffer, *prometheus.Registry) {
	t.Helper()
	logs := &testutil.LogBuffer{}
	lg := zerolog.New(logs)
	reg := prometheus.NewRegistry()
	d := New(Config{Resolver: NewResolver(srv.Addr), Timeout: 500 * time.Millisecond, Interval: 20 * time.Millisecond,
		Logger: &lg, Registerer: reg, OnChange: onChange})
	return d, logs, reg
}

func addrs(ts []Target) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Addr)
	}
	return out
}

func src(t *testing.T, raw string) Source {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSource(u)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestResolveAddrsAndSRV(t *testing.T) {
	srv := dnstest.Start(t)
	srv.SetAddrs("eu.routers.test", "127.0.0.12", "127.0.0.11", "::1")
	srv.SetSRV("_r._tcp.us.test", dnstest.SRV{Target: "r1.us.test", Port: 7001}, dnstest.SRV{Target: "r2.us.test", Port: 7002})
	srv.SetAddrs("r1.us.test", "127.0.0.21")
	srv.SetAddrs("r2.us.test", "127.0.0.22")
	d, _, _ := newTestDiscoverer(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.SetSources(ctx, []string{"eu", "us"}, map[string][]Source{
		"eu": {src(t, "dns+https://eu.routers.test:7000")},
		"us": {src(t, "srv+http://_r._tcp.us.test")},
	})
	found := d.Found()
	if got, want := addrs(found["eu"]), []string{"127.0.0.11:7000", "127.0.0.12:7000", "[::1]:7000"}; !slices.Equal(got, want) {
		t.Errorf("eu: %v, want %v", got, want)
	}
	if found["eu"][0].Name != "eu.routers.test" || found["eu"][0].Scheme != "https" {
		t.Errorf("eu target %+v: want the name it was found by and https", found["eu"][0])
	}
	us := found["us"]
	if got, want := addrs(us), []string{"127.0.0.21:7001", "127.0.0.22:7002"}; !slices.Equal(got, want) {
		t.Errorf("us: %v, want %v", got, want)
	}
	if us[1].Name != "r2.us.test" {
		t.Errorf("an SRV target's name is %q, want r2.us.test", us[1].Name)
	}
}

// A name that fails (SERVFAIL, no answer, NXDOMAIN) keeps its last good answer, logged once
// per change and counted; a new answer replaces it and calls OnChange.
func TestFailingNameKeepsLastAnswer(t *testing.T) {
	srv := dnstest.Start(t)
	srv.SetAddrs("eu.routers.test", "127.0.0.11", "127.0.0.12")
	var changes atomic.Int64
	d, logs, _ := newTestDiscoverer(t, srv, func() { changes.Add(1) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d.SetSources(ctx, []string{"eu"}, map[string][]Source{"eu": {src(t, "dns+http://eu.routers.test:7000")}})
	want := []string{"127.0.0.11:7000", "127.0.0.12:7000"}

	for _, fail := range []func(){func() { srv.Fail("eu.routers.test") }, func() { srv.Silence("eu.routers.test") }} {
		fail()
		for range 3 {
			if d.Refresh(ctx) {
				t.Error("a failed lookup changed the routers")
			}
		}
		if got := addrs(d.Found()["eu"]); !slices.Equal(got, want) {
			t.Fatalf("after failed lookups: %v, want the last good %v", got, want)
		}
		srv.SetAddrs("eu.routers.test", "127.0.0.11", "127.0.0.12")
		d.Refresh(ctx)
	}
	if n := strings.Count(logs.String(), "failed to resolve: its last good answer is kept"); n != 2 {
		t.Errorf("%d failure lines for two failing spells of three lookups each, want 2:\n%s", n, logs)
	}
	if n := strings.Count(logs.String(), `"routers_kept":2`); n != 2 {
		t.Errorf("%d failure lines say 2 routers are kept, want 2:\n%s", n, logs)
	}
	if n := strings.Count(logs.String(), "resolves again"); n != 2 {
		t.Errorf("%d recovery lines, want 2", n)
	}
	if got := promtest.ToFloat64(d.met.lookups.WithLabelValues("error")); got != 6 {
		t.Errorf("errors counted %v, want 6", got)
	}

	go d.Run(ctx)
	srv.SetAddrs("eu.routers.test", "127.0.0.13")
	testutil.Eventually(t, 5*time.Second, "the new answer and OnChange", func() bool {
		return changes.Load() >= 1 && slices.Equal(addrs(d.Found()["eu"]), []string{"127.0.0.13:7000"})
	})
	if !strings.Contains(logs.String(), `"added":["127.0.0.13:7000"]`) || !strings.Contains(logs.String(), `"removed":["127.0.0.11:7000","127.0.0.12:7000"]`) {
		t.Errorf("the change is not logged with what was added and removed:\n%s", logs)
	}
}

// A name that fails from its first lookup has no answer to keep: its warning says so, and
// not that an answer is kept; its first answer is logged as the first.
func TestNameNeverResolvedSaysSo(t *testing.T) {
	srv := dnstest.Start(t)
	srv.Fail("eu.routers.test")
	d, logs, _ := newTestDiscoverer(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d.SetSources(ctx, []string{"eu"}, map[string][]Source{"eu": {src(t, "dns+http://eu.routers.test:7000")}})
	for range 2 {
		d.Refresh(ctx)
	}
	if got := d.Found()["eu"]; len(got) != 0 {
		t.Fatalf("routers %v from a name that never resolved", got)
	}
	out := logs.String()
	if strings.Contains(out, "last good answer") {
		t.Errorf("a name that never resolved is said to keep its last good answer:\n%s", out)
	}
	want := "router name failed to resolve: no answer yet, the region has no router from this name until one"
	if n := strings.Count(out, want); n != 1 || !strings.Contains(out, `"routers_kept":0`) {
		t.Errorf("%d lines %q (with routers_kept 0), want 1:\n%s", n, want, out)
	}
	srv.SetAddrs("eu.routers.test", "127.0.0.11")
	d.Refresh(ctx)
	if got := addrs(d.Found()["eu"]); !slices.Equal(got, []string{"127.0.0.11:7000"}) {
		t.Errorf("routers %v once the name resolves, want 127.0.0.11:7000", got)
	}
	if !strings.Contains(logs.String(), "router name resolves: its first answer") || strings.Contains(logs.String(), "resolves again") {
		t.Errorf("the first answer is not logged as the first:\n%s", logs)
	}
}

// A name listed again keeps its answer without a lookup; one no longer listed is dropped; a
// new one is resolved before SetSources returns.
func TestSetSourcesKeepsAndResolvesNew(t *testing.T) {
	srv := dnstest.Start(t)
	srv.SetAddrs("a.test", "127.0.0.1")
	srv.SetAddrs("b.test", "127.0.0.2")
	d, _, _ := newTestDiscoverer(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, b := src(t, "dns+http://a.test:1"), src(t, "dns+http://b.test:1")
	d.SetSources(ctx, []string{"eu"}, map[string][]Source{"eu": {a}})
	q := srv.Queries()
	d.SetSources(ctx, []string{"eu", "us"}, map[string][]Source{"eu": {a}, "us": {b}})
	if got := srv.Queries() - q; got != 2 { // b's A and AAAA; a not asked again
		t.Errorf("%d queries for one new name, want 2", got)
	}
	found := d.Found()
	if !slices.Equal(addrs(found["eu"]), []string{"127.0.0.1:1"}) || !slices.Equal(addrs(found["us"]), []string{"127.0.0.2:1"}) {
		t.Errorf("found %v", found)
	}
	d.SetSources(ctx, []string{"us"}, map[string][]Source{"us": {b}})
	if _, ok := d.Found()["eu"]; ok {
		t.Error("a region no longer listed is still found")
	}
}

// At most MaxTargets routers per name; the rest are counted.
func TestMaxTargets(t *testing.T) {
	srv := dnstest.Start(t)
	var many []string
	for i := range 70 {
		many = append(many, "127.0.1."+strconv.Itoa(i+1))
	}
	srv.SetAddrs("big.test", many...)
	d, _, reg := newTestDiscoverer(t, srv, nil)
	if n, _ := promtest.GatherAndCount(reg, "fenec_entry_dns_lookups_total"); n != 2 {
		t.Errorf("lookups metric has %d series, want ok and error", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.SetSources(ctx, []string{"eu"}, map[string][]Source{"eu": {src(t, "dns+http://big.test:1")}})
	if n := len(d.Found()["eu"]); n != DefaultMaxTargets {
		t.Errorf("%d routers kept, want %d", n, DefaultMaxTargets)
	}
	if got := promtest.ToFloat64(d.met.dropped); got != 6 {
		t.Errorf("dropped %v, want 6", got)
	}
}
