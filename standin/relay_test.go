package standin

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

func TestRelayAddsFenecRouterAndPassesFenecHome(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	us0 := c.addrOf("us", 0)
	a := do(t, client, req{url: c.url("us", 0) + "/t/acme/echo", header: map[string]string{
		hdrHome: "1", hdrReqID: "rid-1", "Authorization": "Bearer x", "User-Agent": "tester/1",
	}})
	if a.status != 200 || a.header.Get(hdrHome) != "eu" {
		t.Fatalf("relayed echo: %d Fenec-Home %q, want 200 eu", a.status, a.header.Get(hdrHome))
	}
	if got := a.header.Get(hdrRelayedBy); got != us0 {
		t.Errorf("%s = %q, want the relaying router %s", hdrRelayedBy, got, us0)
	}
	var echo echoAnswer
	mustUnmarshal(t, a.body, &echo)
	if echo.Region != "eu" || echo.Headers.Get(hdrRouter) != us0 {
		t.Errorf("home saw region %s Fenec-Router %q, want eu %q", echo.Region, echo.Headers.Get(hdrRouter), us0)
	}
	for k, v := range map[string]string{"Authorization": "Bearer x", "User-Agent": "tester/1", hdrReqID: "rid-1", hdrHome: "1"} {
		if got := echo.Headers.Get(k); got != v {
			t.Errorf("home saw %s %q, want %q", k, got, v)
		}
	}
	testutil.Eventually(t, 5*time.Second, "the records to complete", func() bool {
		return len(seenWhere(c, func(s Seen) bool { return s.End.IsZero() })) == 0
	})
	relayed := seenWhere(c, func(s Seen) bool { return s.Router == us0 })
	if len(relayed) != 1 || !relayed[0].Relayed || c.Router(relayed[0].RelayedTo).Region() != "eu" || relayed[0].Status != 200 {
		t.Errorf("relaying router's record = %+v, want relayed to eu, 200", relayed)
	}
	home := seenWhere(c, func(s Seen) bool { return s.Region == "eu" })
	if len(home) != 1 || home[0].From != us0 || home[0].Relayed {
		t.Errorf("home's record = %+v, want from %s", home, us0)
	}
}

func TestRelayPassesTheAnswerAsIs(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	a := do(t, client, req{method: "PUT", url: c.url("us", 1) + "/t/acme/echo?status=418&set=X-One:1&set=X-One:2&set=Fenec-Verified:yes", body: "12345"})
	if a.status != 418 || !slices.Equal(a.header.Values("X-One"), []string{"1", "2"}) || a.header.Get("Fenec-Verified") != "yes" {
		t.Errorf("relayed answer: %d %v", a.status, a.header)
	}
	var echo echoAnswer
	mustUnmarshal(t, a.body, &echo)
	if echo.Method != "PUT" || echo.BodyLen != 5 || echo.Region != "eu" {
		t.Errorf("home received %+v, want PUT with 5 bytes at eu", echo)
	}
}

func TestRelayRoundRobin(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	seen := map[string]int{}
	for range 4 {
		var echo echoAnswer
		mustUnmarshal(t, do(t, client, req{url: c.url("ap", 0) + "/t/globex/echo"}).body, &echo)
		seen[echo.Router]++
	}
	if seen[c.addrOf("us", 0)] != 2 || seen[c.addrOf("us", 1)] != 2 {
		t.Errorf("home routers answering: %v, want 2 each", seen)
	}
}

func TestRelayTriesTheNextHomeRouterWhenRefused(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	if err := c.SetFault(c.addrOf("eu", 0), Fault{Mode: FaultDown}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 { // whatever router the round robin starts with
		a := do(t, client, req{method: "POST", url: c.url("us", 0) + "/t/acme/items", body: "x"})
		if a.status != 201 || a.json(t)["router"] != c.addrOf("eu", 1) {
			t.Errorf("write %d: %d %s, want 201 from eu router 1", i, a.status, a.body)
		}
	}
	if n := len(c.Ledger()); n != 4 {
		t.Errorf("ledger has %d writes, want 4", n)
	}
}

func TestRelayHomeUnreachable(t *testing.T) {
	tests := []struct {
		name    string
		fault   string
		applied int // writes applied at the home
	}{
		{"down", FaultDown, 0},
		{"answer without Fenec-Shard", FaultUnmarked5xx, 0},
		{"reset after the write ran", FaultResetAfterRequest, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startCluster(t, func(cfg *Config) { cfg.CORS = "*" })
			client := newClient(t)
			for i := range 2 {
				f, _ := ParseFault(tt.fault)
				if err := c.SetFault(c.addrOf("eu", i), f); err != nil {
					t.Fatal(err)
				}
			}
			a := do(t, client, req{method: "POST", url: c.url("us", 0) + "/t/acme/items", body: "x",
				header: map[string]string{hdrHome: "1", "Origin": "https://a.example"}})
			if a.status != 502 || a.header.Get(hdrShard) != "1" || a.header.Get(hdrHome) != "eu" || a.json(t)["error"] != "home_unreachable" {
				t.Errorf("answer %d %v %s, want 502 home_unreachable with Fenec-Shard and Fenec-Home eu", a.status, a.header, a.body)
			}
			if got := a.header.Values("Access-Control-Allow-Origin"); len(got) != 1 {
				t.Errorf("Access-Control-Allow-Origin = %q, want one", got)
			}
			if n := len(c.Ledger()); n != tt.applied {
				t.Errorf("ledger has %d writes, want %d", n, tt.applied)
			}
		})
	}
}

func TestRelayedRequestIsNotRelayedAgain(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	a := do(t, client, req{method: "POST", url: c.url("us", 0) + "/t/acme/items", body: "x",
		header: map[string]string{hdrRouter: c.addrOf("ap", 0), hdrHome: "1"}})
	if a.status != 502 || a.header.Get(hdrShard) != "1" || a.header.Get(hdrHome) != "eu" || a.json(t)["error"] != "not_home" {
		t.Errorf("answer %d %v %s, want 502 not_home with Fenec-Shard and Fenec-Home eu", a.status, a.header, a.body)
	}
	if n := len(seenWhere(c, func(s Seen) bool { return s.Region == "eu" })); n != 0 {
		t.Errorf("home saw %d requests, want 0", n)
	}
	if n := len(c.Ledger()); n != 0 {
		t.Errorf("ledger has %d writes, want 0", n)
	}
}

func TestRelayPropagatesCancellation(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hr, _ := http.NewRequestWithContext(ctx, "GET", c.url("us", 0)+"/t/acme/events", nil)
	resp, err := client.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	nextEvent(t, readEvents(resp.Body), "open", isEvent("open"))
	cancel()
	testutil.Eventually(t, 5*time.Second, "the home to see the stream end", func() bool {
		s := seenWhere(c, func(s Seen) bool { return s.Region == "eu" && !s.End.IsZero() })
		return len(s) == 1 && s[0].ClientGone
	})
	testutil.Eventually(t, 5*time.Second, "the relaying router to see the client go", func() bool {
		s := seenWhere(c, func(s Seen) bool { return s.Region == "us" && !s.End.IsZero() })
		return len(s) == 1 && s[0].ClientGone && s[0].Relayed
	})
}

// A remote region (Region.Remote) is served by another cluster: this one listens for none of
// its routers, lists none of them, and relays its tenants' requests to them, as two stand-ins,
// one per region, do in the lab's WAN.
func TestRelayToRemoteRegion(t *testing.T) {
	home, err := Start(Config{
		Regions: []Region{{Name: "eu", Addrs: []string{"127.0.0.1:0"}}},
		Tenants: map[string]string{"acme": "eu"}, Items: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { home.Close() })
	euAddr := home.Routers()[0].Addr()
	away, err := Start(Config{
		Regions: []Region{
			{Name: "eu", Addrs: []string{euAddr}, Remote: true},
			{Name: "us", Addrs: []string{"127.0.0.1:0"}},
		},
		Tenants: map[string]string{"acme": "eu"}, Items: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { away.Close() })
	if got := away.URLs("eu"); len(got) != 0 {
		t.Errorf("URLs of the remote region = %v, want none", got)
	}
	if n := len(away.Routers()); n != 1 {
		t.Errorf("%d routers, want 1 (the remote region's are not this cluster's)", n)
	}
	client := newClient(t)
	a := do(t, client, req{url: away.URLs("us")[0] + "/t/acme/items/1", header: map[string]string{hdrHome: "1"}})
	if a.status != 200 || a.header.Get(hdrHome) != "eu" || a.header.Get(hdrRelayedBy) != away.Routers()[0].Addr() {
		t.Fatalf("relayed to the remote region: %d Fenec-Home %q relayed by %q", a.status, a.header.Get(hdrHome), a.header.Get(hdrRelayedBy))
	}
	testutil.Eventually(t, 5*time.Second, "the relay's record", func() bool {
		r := seenWhere(away, func(s Seen) bool { return s.Relayed && s.RelayedTo == euAddr && !s.End.IsZero() })
		return len(r) == 1
	})
	if r := seenWhere(home, func(s Seen) bool { return s.From == away.Routers()[0].Addr() }); len(r) != 1 {
		t.Errorf("the home cluster saw %+v, want one request relayed from %s", r, away.Routers()[0].Addr())
	}
}

func TestRemoteRegionConfig(t *testing.T) {
	for name, regions := range map[string][]Region{
		"all remote":  {{Name: "eu", Addrs: []string{"127.0.0.1:7101"}, Remote: true}},
		"remote port": {{Name: "eu", Addrs: []string{"127.0.0.1:0"}}, {Name: "us", Addrs: []string{"127.0.0.1:0"}, Remote: true}},
	} {
		cfg := Config{Regions: regions}
		var ce *ConfigError
		if err := cfg.Validate(); !errors.As(err, &ce) || ce.Field != "Regions" {
			t.Errorf("%s: Validate = %v, want a Regions error", name, err)
		}
	}
}
