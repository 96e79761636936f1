package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/testutil"
)

func (rt *router) isClosed() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.closed
}

// routingWith returns the env's routing with edit applied to a copy of its regions.
func (e *testEnv) routingWith(edit func(r *Routing)) Routing {
	r := e.h.Routing()
	r.Regions = slices.Clone(r.Regions)
	for i := range r.Regions {
		r.Regions[i].Routers = slices.Clone(r.Regions[i].Routers)
	}
	edit(&r)
	return r
}

func (e *testEnv) setRouting(r Routing) {
	e.t.Helper()
	if err := e.h.SetRouting(r); err != nil {
		e.t.Fatalf("SetRouting: %v", err)
	}
}

// answered reports whether a router answered r (whatever the status).
func answered(r result) bool { return r.header.Get("Fenec-Shard") == "1" }

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A router dropped from a region takes no new request, and its idle connections are closed;
// a router kept keeps its pooled connection and its state.
func TestSetRoutingRouters(t *testing.T) {
	e := newEnv(t)
	e.learn("acme")
	e.do("GET", "/t/acme/items/0", nil, "") // straight to eu's router 0, whose connection is pooled
	old := e.h.rt.Load().byID[0].routers
	testutil.Eventually(t, 2*time.Second, "eu router 0's connection pooled", func() bool { return old[0].idleCount() == 1 })

	// Keep router 0 only: it keeps its connection.
	e.setRouting(e.routingWith(func(r *Routing) { r.Regions[0].Routers = r.Regions[0].Routers[:1] }))
	now := e.h.rt.Load().byID[0].routers
	if len(now) != 1 || now[0] != old[0] || now[0].idleCount() != 1 {
		t.Fatalf("router 0 not kept with its connection: %v", now)
	}
	if !old[1].isClosed() {
		t.Error("the dropped router 1 still pools connections")
	}

	// Now router 1 only: router 0's idle connection closes, every request goes to router 1.
	r1 := mustParse(t, "http://"+e.router("eu", 1))
	e.setRouting(e.routingWith(func(r *Routing) { r.Regions[0].Routers = []*url.URL{r1} }))
	if old[0].idleCount() != 0 || !old[0].isClosed() {
		t.Error("the dropped router 0 kept its idle connection")
	}
	before := len(e.seenAt("eu", 0))
	for range 4 {
		if r := e.do("GET", "/t/acme/items/0", nil, ""); !answered(r) {
			t.Fatalf("after the change: %d %s", r.status, r.body)
		}
	}
	if got := len(e.seenAt("eu", 0)) - before; got != 0 {
		t.Errorf("the removed router got %d requests", got)
	}
	if got := len(e.seenAt("eu", 1)); got != 4 {
		t.Errorf("router 1 got %d requests, want 4", got)
	}
	if st := e.h.RouterStatus(); len(st) != 3 || st[0].Router != "http://"+e.router("eu", 1) {
		t.Errorf("RouterStatus after the change: %+v", st)
	}
}

// A stream open on a router that a change removes keeps flowing to its end; the next request
// goes to the routers of the new routing.
func TestSetRoutingInFlightFinishes(t *testing.T) {
	e := newEnv(t)
	e.learn("acme")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/t/acme/events?tick=50", nil)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	streamAt := e.sc.Seen()[len(e.sc.Seen())-1].Router
	idx := 0
	if streamAt == e.router("eu", 0) {
		idx = 1
	}
	other := mustParse(t, "http://"+e.router("eu", idx))
	e.setRouting(e.routingWith(func(r *Routing) { r.Regions[0].Routers = []*url.URL{other} }))

	br := bufio.NewReader(resp.Body)
	ticks := 0
	for ticks < 5 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream to the removed router ended after %d ticks: %v", ticks, err)
		}
		if strings.HasPrefix(line, "data: ") {
			ticks++
		}
	}
	if r := e.do("GET", "/t/acme/items/0", nil, ""); !answered(r) {
		t.Fatalf("request after the change: %d", r.status)
	}
	if last := e.sc.Seen()[len(e.sc.Seen())-1]; last.Router != other.Host {
		t.Errorf("the next request went to %s, want %s", last.Router, other.Host)
	}
}

// Removing a region forgets its homes, and a tenant whose home it was goes where a tenant
// heard nowhere goes; adding it back learns again.
func TestSetRoutingRegionsRemovedAndAdded(t *testing.T) {
	e := newEnv(t)
	e.learn("globex") // us
	e.learn("acme")   // eu
	full := e.h.Routing()
	e.setRouting(e.routingWith(func(r *Routing) { r.Regions = r.Regions[:1]; r.DefaultRegion = "" }))
	if _, ok := e.homes.Lookup("globex"); ok {
		t.Fatal("the removed region's home is still held")
	}
	if _, ok := e.homes.Lookup("acme"); !ok {
		t.Fatal("a kept region's home was forgotten")
	}
	if st := e.homes.Stats(); st.RegionRemoved != 1 {
		t.Errorf("forgotten homes counted %d, want 1", st.RegionRemoved)
	}
	usBefore := e.direct("us")
	unknown := promtest.ToFloat64(e.h.met.m.UnknownHome)
	if r := e.do("GET", "/t/globex/items/0", nil, ""); !answered(r) {
		t.Fatalf("globex through eu: %d %s", r.status, r.body)
	}
	if got := promtest.ToFloat64(e.h.met.m.UnknownHome) - unknown; got != 1 {
		t.Errorf("Fenec-Home naming the removed region counted %v times, want 1", got)
	}
	if e.direct("us") != usBefore {
		t.Error("a request went straight to the removed region")
	}
	if _, ok := e.homes.Lookup("globex"); ok {
		t.Error("a home in a region not configured was learned")
	}

	e.setRouting(full)
	e.do("GET", "/t/globex/items/0", nil, "") // default us: learned again
	if reg, ok := e.homes.Lookup("globex"); !ok || reg != 1 {
		t.Fatalf("globex after us came back: %d, %v", reg, ok)
	}
}

// A region with no router (its DNS names resolved to nothing) is asked after every other and
// fails without an attempt and without a mark; with every other region failing the request
// is answered no_region_reachable.
func TestSetRoutingRegionWithoutRouters(t *testing.T) {
	e := newEnv(t)
	e.learn("acme") // home eu
	e.setRouting(e.routingWith(func(r *Routing) {
		r.Regions[0].Routers = nil
		r.Regions[0].Discovery = true
	}))
	usBefore := e.direct("us")
	if r := e.do("GET", "/t/acme/items/0", nil, ""); !answered(r) || e.direct("us") != usBefore+1 {
		t.Fatalf("acme with eu empty: %d, direct us %d (want relayed by us)", r.status, e.direct("us")-usBefore)
	}
	e.fault("us", 0, "refuse")
	e.fault("us", 1, "refuse")
	r := e.do("GET", "/t/acme/items/0", nil, "")
	if r.status != 502 || errCode(t, r) != codeNoRegionReachable {
		t.Fatalf("every region failed: %d %s", r.status, r.body)
	}
	if e.homes.Marked(0, homes.Lenient) || e.homes.Marked(0, homes.Strict) {
		t.Error("the region with no router was marked")
	}
	if !e.homes.Marked(1, homes.Strict) {
		t.Error("us, whose routers failed, was not marked")
	}
	// Without Discovery a region with no router is a configuration error.
	bad := e.routingWith(func(r *Routing) { r.Regions[0].Routers, r.Regions[0].Discovery = nil, false })
	if err := e.h.SetRouting(bad); err == nil {
		t.Error("a region with neither routers nor discovery was taken")
	}
}

// A refused routing changes nothing: not the routing, not the home table's regions.
func TestSetRoutingRefusedKeepsOld(t *testing.T) {
	e := newEnv(t)
	e.learn("globex")
	before := e.h.Routing()
	for name, edit := range map[string]func(*Routing){
		"unknown default":   func(r *Routing) { r.Regions = r.Regions[:1] }, // default us gone
		"repeated region":   func(r *Routing) { r.Regions[1].Name = "eu" },
		"bad scheme":        func(r *Routing) { r.Regions[0].Routers[0] = mustParse(t, "ftp://x:1") },
		"continent unknown": func(r *Routing) { r.Continents = map[string]string{"EU": "ap"} },
		"no regions":        func(r *Routing) { r.Regions = nil },
	} {
		if err := e.h.SetRouting(e.routingWith(edit)); err == nil {
			t.Errorf("%s: taken", name)
		}
	}
	after := e.h.Routing()
	if len(after.Regions) != len(before.Regions) || after.DefaultRegion != before.DefaultRegion {
		t.Errorf("routing changed by refused ones: %+v", after)
	}
	if got := e.homes.Regions(); !slices.Equal(got, []string{"eu", "us"}) {
		t.Errorf("home table regions %v after refusals", got)
	}
	if _, ok := e.homes.Lookup("globex"); !ok {
		t.Error("a home was forgotten by a refused change")
	}
}

// The entry token, CORS, continents and default region take effect from the next request.
func TestSetRoutingTokenCORSPlacement(t *testing.T) {
	e := newEnv(t, withEntryToken("new-token"), withConfig(func(c *Config) { c.EntryToken = "old-token" }))
	mark := func() string {
		e.do("GET", "/t/acme/items/0", nil, "")
		s := e.sc.Seen()
		for i := len(s) - 1; i >= 0; i-- {
			if s[i].From == "" { // from the entry, not relayed
				return s[i].ClientMark
			}
		}
		return "none seen"
	}
	if m := mark(); m != "bad_mark" {
		t.Fatalf("with the old token the router says %q, want bad_mark", m)
	}
	e.setRouting(e.routingWith(func(r *Routing) { r.EntryToken = "new-token"; r.CORS = "https://app.example" }))
	if m := mark(); m != "named" {
		t.Errorf("with the new token the router says %q, want named", m)
	}
	pre := e.do("OPTIONS", "/t/acme/items", map[string]string{"Origin": "https://app.example",
		"Access-Control-Request-Method": "POST"}, "")
	if pre.status != 204 || pre.header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("preflight after CORS was set: %d %v", pre.status, pre.header)
	}
	// The default region moves to eu: a tenant heard nowhere goes there first.
	e.setRouting(e.routingWith(func(r *Routing) { r.DefaultRegion = "eu" }))
	euBefore := e.direct("eu")
	e.do("GET", "/t/umbrella/items/0", nil, "") // home us, never heard
	if e.direct("eu") != euBefore+1 {
		t.Error("a tenant heard nowhere did not go to the new default region first")
	}
}

// A discovered https router is checked against the name it was found by, not its address.
func TestDiscoveredRouterServerName(t *testing.T) {
	certFile, keyFile := testutil.CertFiles(t)
	cert := testutil.WriteCert(t, certFile, keyFile, "router") // localhost and 127.0.0.1
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Fenec-Shard", "1")
		w.Write([]byte("ok"))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(cert)

	e := newEnv(t, withConfig(func(c *Config) { c.RouterTLS = &tls.Config{RootCAs: pool} }))
	at := mustParse(t, srv.URL) // https://127.0.0.1:port
	for _, tc := range []struct {
		name string
		want int
	}{{"localhost", 200}, {"eu.routers.test", 502}} {
		e.setRouting(e.routingWith(func(r *Routing) {
			r.Regions = r.Regions[:1]
			r.DefaultRegion = ""
			r.Regions[0].Routers = nil
			r.Regions[0].Discovery = true
			r.Regions[0].Discovered = []Router{{URL: at, ServerName: tc.name}}
		}))
		if r := e.do("GET", "/_other", nil, ""); r.status != tc.want {
			t.Errorf("certificate for localhost, found by %s: %d, want %d", tc.name, r.status, tc.want)
		}
	}
}
