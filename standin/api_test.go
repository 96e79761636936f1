package standin

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

func TestWritesAppliedOnceInTheHomeRegion(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1_800_000_000, 0))
	c := startCluster(t, func(cfg *Config) { cfg.Clock = clk })
	client := newClient(t)
	var urls []string
	for _, r := range []string{"eu", "us", "ap"} {
		urls = append(urls, c.URLs(r)...)
	}
	var ids []string
	for i, u := range urls {
		rid := "rid-" + strconv.Itoa(i)
		a := do(t, client, req{method: "POST", url: u + "/t/acme/items", body: "hello", header: map[string]string{hdrReqID: rid}})
		m := a.json(t)
		if a.status != 201 || m["tenant"] != "acme" || m["region"] != "eu" || m["body"] != 5.0 || m["id"] == "" {
			t.Fatalf("POST at %s: %d %s, want 201 applied in eu", u, a.status, a.body)
		}
		ids = append(ids, m["id"].(string))
	}
	ledger := c.Ledger()
	if len(ledger) != len(urls) {
		t.Fatalf("ledger has %d writes, want %d: %+v", len(ledger), len(urls), ledger)
	}
	euRouters := []string{c.addrOf("eu", 0), c.addrOf("eu", 1)}
	for i, ap := range ledger {
		if ap.Tenant != "acme" || ap.Region != "eu" || !slices.Contains(euRouters, ap.Router) ||
			ap.RequestID != "rid-"+strconv.Itoa(i) || ap.ItemID != ids[i] || ap.Method != "POST" || !ap.At.Equal(clk.Now()) {
			t.Errorf("ledger[%d] = %+v", i, ap)
		}
	}
	// The item is readable from any region.
	a := do(t, client, req{url: c.url("ap", 0) + "/t/acme/items/" + ids[0]})
	if a.status != 200 || a.json(t)["id"] != ids[0] {
		t.Errorf("GET item: %d %s", a.status, a.body)
	}
}

func TestItemWrites(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	base := c.url("us", 0) + "/t/acme/items/"
	for _, tt := range []struct {
		method string
		status int
		after  int // status of a GET after it
	}{
		{"PUT", 200, 200},
		{"PATCH", 200, 200},
		{"DELETE", 200, 404},
	} {
		a := do(t, client, req{method: tt.method, url: base + "k1", body: "ab"})
		if a.status != tt.status || a.json(t)["id"] != "k1" || a.json(t)["region"] != "eu" {
			t.Errorf("%s: %d %s", tt.method, a.status, a.body)
		}
		if got := do(t, client, req{url: base + "k1"}).status; got != tt.after {
			t.Errorf("GET after %s: %d, want %d", tt.method, got, tt.after)
		}
	}
	var methods []string
	for _, ap := range c.Ledger() {
		if ap.ItemID != "k1" || ap.Region != "eu" {
			t.Errorf("ledger entry %+v", ap)
		}
		methods = append(methods, ap.Method)
	}
	if !slices.Equal(methods, []string{"PUT", "PATCH", "DELETE"}) {
		t.Errorf("ledger methods %v", methods)
	}
	if a := do(t, client, req{method: "POST", url: base + "k1"}); a.status != 405 {
		t.Errorf("POST on an item: %d, want 405", a.status)
	}
}

func TestIdempotencyKeyDedupes(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	key := map[string]string{hdrIdemKey: "k-1"}
	first := do(t, client, req{method: "POST", url: c.url("eu", 0) + "/t/acme/items", body: "x", header: key})
	again := do(t, client, req{method: "POST", url: c.url("us", 1) + "/t/acme/items", body: "x", header: key})
	if first.status != 201 || first.header.Get(hdrReplay) != "" {
		t.Errorf("first: %d replayed %q", first.status, first.header.Get(hdrReplay))
	}
	if again.status != first.status || string(again.body) != string(first.body) || again.header.Get(hdrReplay) != "true" {
		t.Errorf("repeat: %d %s replayed %q, want the first answer replayed", again.status, again.body, again.header.Get(hdrReplay))
	}
	// The same key for another tenant is another write.
	other := do(t, client, req{method: "POST", url: c.url("eu", 0) + "/t/globex/items", header: key})
	if other.status != 201 || other.header.Get(hdrReplay) != "" {
		t.Errorf("other tenant: %d replayed %q", other.status, other.header.Get(hdrReplay))
	}
	if l := c.Ledger(); len(l) != 2 || l[0].Key != "k-1" || l[1].Tenant != "globex" {
		t.Errorf("ledger = %+v, want one write per tenant", l)
	}
}

func TestIdempotencyKeyConcurrent(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	const n = 16
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// Held, so that the requests overlap; sent to every router.
			u := c.Routers()[i%len(c.Routers())].URL()
			a, err := doErr(context.Background(), client, req{method: "POST", url: u + "/t/acme/items", body: "x",
				header: map[string]string{hdrIdemKey: "same", hdrWait: "0.2"}})
			if err != nil {
				t.Error(err)
			}
			answers[i] = a
		})
	}
	wg.Wait()
	fresh := 0
	for _, a := range answers {
		if a.status != 201 || string(a.body) != string(answers[0].body) {
			t.Errorf("answer %d %s, want %s", a.status, a.body, answers[0].body)
		}
		if a.header.Get(hdrReplay) == "" {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d answers not replayed, want 1", fresh)
	}
	if n := len(c.Ledger()); n != 1 {
		t.Errorf("ledger has %d writes, want 1", n)
	}
}

func TestFenecWaitHoldsTheWrite(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	start := time.Now()
	a := do(t, client, req{method: "POST", url: c.url("us", 0) + "/t/acme/items", header: map[string]string{hdrWait: "0.3"}})
	if a.status != 201 {
		t.Fatalf("held write: %d %s", a.status, a.body)
	}
	if l := c.Ledger(); len(l) != 1 || l[0].At.Sub(start) < 300*time.Millisecond {
		t.Errorf("ledger = %+v, want one write applied after 300ms", l)
	}
	for v, want := range map[string]time.Duration{"": 0, "1": time.Second, "0.25": 250 * time.Millisecond, "31": maxWait, "1e9": maxWait} {
		if got, err := parseWait(v); err != nil || got != want {
			t.Errorf("parseWait(%q) = %v, %v, want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"-1", "soon", "NaN", "Inf"} {
		if _, err := parseWait(v); err == nil {
			t.Errorf("parseWait(%q) accepted", v)
		}
	}
}

func TestFenecWaitClientGoneAppliesNothing(t *testing.T) {
	for _, region := range []string{"eu", "us"} { // at the home, and through a relay
		t.Run(region, func(t *testing.T) {
			c := startCluster(t, nil)
			client := newClient(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := doErr(ctx, client, req{method: "POST", url: c.url(region, 0) + "/t/acme/items", body: "x",
					header: map[string]string{hdrWait: "30", hdrIdemKey: "k"}})
				done <- err
			}()
			testutil.Eventually(t, 5*time.Second, "the held write at the home", func() bool {
				return len(seenWhere(c, func(s Seen) bool { return s.Region == "eu" })) == 1
			})
			cancel()
			if err := <-done; err == nil {
				t.Fatal("cancelled request succeeded")
			}
			testutil.Eventually(t, 5*time.Second, "the home to see the client go", func() bool {
				s := seenWhere(c, func(s Seen) bool { return s.Region == "eu" && !s.End.IsZero() })
				return len(s) == 1 && s[0].ClientGone && s[0].Status == 0
			})
			if n := len(c.Ledger()); n != 0 {
				t.Fatalf("ledger has %d writes, want 0", n)
			}
			// The key was not used up: the next request with it applies.
			a := do(t, client, req{method: "POST", url: c.url(region, 0) + "/t/acme/items", header: map[string]string{hdrIdemKey: "k"}})
			if a.status != 201 || a.header.Get(hdrReplay) != "" || len(c.Ledger()) != 1 {
				t.Errorf("retry: %d replayed %q, ledger %d, want a fresh write", a.status, a.header.Get(hdrReplay), len(c.Ledger()))
			}
		})
	}
}

func TestEcho(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	a := do(t, client, req{method: "PATCH", url: c.url("eu", 1) + "/t/acme/echo?set=Fenec-Home:us&set=X-A:%201&status=503",
		body: "abc", header: map[string]string{"X-Custom": "v"}})
	if a.status != 503 || a.header.Get(hdrShard) != "1" || a.header.Get(hdrHome) != "us" || a.header.Get("X-A") != "1" {
		t.Errorf("echo answer %d %v", a.status, a.header)
	}
	var echo echoAnswer
	mustUnmarshal(t, a.body, &echo)
	want := echoAnswer{Method: "PATCH", Path: "/t/acme/echo", Tenant: "acme", Rest: "/echo", Region: "eu", Router: c.addrOf("eu", 1), BodyLen: 3}
	if echo.Method != want.Method || echo.Path != want.Path || echo.Tenant != want.Tenant || echo.Region != want.Region ||
		echo.Router != want.Router || echo.BodyLen != want.BodyLen || echo.Headers.Get("X-Custom") != "v" {
		t.Errorf("echo = %+v", echo)
	}
	for _, q := range []string{"?status=99", "?status=x", "?set=nocolon", "?set=:v"} {
		if a := do(t, client, req{url: c.url("eu", 0) + "/t/acme/echo" + q}); a.status != http.StatusBadRequest {
			t.Errorf("echo%s: %d, want 400", q, a.status)
		}
	}
}

// Config.Items seeds items 1..N of every tenant in its home region: read from the home and
// relayed from another region, not in the ledger, ids of POSTs after them, seeded again by
// Reset in the home of that moment.
func TestConfigItemsSeeded(t *testing.T) {
	c := startCluster(t, func(cfg *Config) { cfg.Items = 3 })
	client := newClient(t)
	get := func(u, tenant, id string) answer {
		t.Helper()
		return do(t, client, req{url: u + "/t/" + tenant + "/items/" + id, header: map[string]string{hdrHome: "1"}})
	}
	for _, tt := range []struct {
		tenant, home string
		from         []string // routers asked: the home's, then another region's
	}{
		{"acme", "eu", []string{c.url("eu", 0), c.url("eu", 1), c.url("us", 1), c.url("ap", 0)}},
		{"globex", "us", []string{c.url("us", 0), c.url("eu", 0)}},
		{"initech", "ap", []string{c.url("ap", 0), c.url("us", 0)}},
	} {
		for _, u := range tt.from {
			for _, id := range []string{"1", "2", "3"} {
				a := get(u, tt.tenant, id)
				m := a.json(t)
				relayed := a.header.Get(hdrRelayedBy) != ""
				home := c.Router(strings.TrimPrefix(u, "http://")).Region() == tt.home
				if a.status != 200 || m["id"] != id || m["region"] != tt.home || a.header.Get(hdrHome) != tt.home || relayed == home {
					t.Errorf("GET %s item %s at %s: %d %v %s, want 200 from %s (relayed: %v)",
						tt.tenant, id, u, a.status, a.header, a.body, tt.home, !home)
				}
			}
			if a := get(u, tt.tenant, "4"); a.status != 404 {
				t.Errorf("GET %s item 4 at %s: %d, want 404 (3 seeded)", tt.tenant, u, a.status)
			}
		}
	}
	if n := len(c.Ledger()); n != 0 {
		t.Errorf("ledger has %d writes after seeding, want none", n)
	}
	a := do(t, client, req{method: "POST", url: c.url("us", 0) + "/t/acme/items", body: "x"})
	if id := a.json(t)["id"]; a.status != 201 || id != "4" {
		t.Errorf("first POST: %d %s, want 201 with id 4, after the seeded items", a.status, a.body)
	}

	// Reset removes what was written and seeds again, in the home of the moment (a tenant
	// moved in meanwhile included).
	if err := c.Move("acme", "us"); err != nil {
		t.Fatal(err)
	}
	if err := c.Move("newco", "ap"); err != nil {
		t.Fatal(err)
	}
	if a := get(c.url("ap", 0), "newco", "1"); a.status != 404 {
		t.Errorf("GET newco item 1 before a reset: %d, want 404 (moved in after the seeding)", a.status)
	}
	if err := c.Reset(); err != nil {
		t.Fatal(err)
	}
	if a := get(c.url("eu", 0), "acme", "4"); a.status != 404 {
		t.Errorf("GET the POSTed item after Reset: %d, want 404", a.status)
	}
	for _, tt := range [][2]string{{"acme", "us"}, {"newco", "ap"}, {"globex", "us"}} {
		a := get(c.url("eu", 1), tt[0], "3")
		if m := a.json(t); a.status != 200 || m["region"] != tt[1] || a.header.Get(hdrHome) != tt[1] {
			t.Errorf("GET %s item 3 after Reset: %d %s, want 200 seeded in %s", tt[0], a.status, a.body, tt[1])
		}
	}

	// Without Items nothing is seeded: item 1 is 404 until written.
	c0 := startCluster(t, nil)
	if a := do(t, client, req{url: c0.url("eu", 0) + "/t/acme/items/1"}); a.status != 404 {
		t.Errorf("GET item 1 without Items: %d, want 404", a.status)
	}
}
