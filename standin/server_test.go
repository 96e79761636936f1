package standin

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

func TestFenecShardOnEveryAnswer(t *testing.T) {
	c := startCluster(t, func(cfg *Config) { cfg.CORS = "*" })
	client := newClient(t)
	if err := c.SetFault(c.addrOf("ap", 0), Fault{Mode: FaultMarked5xxNoHome}); err != nil {
		t.Fatal(err)
	}
	eu, us := c.url("eu", 0), c.url("us", 0)
	tests := []struct {
		name   string
		req    req
		status int
	}{
		{"echo", req{url: eu + "/t/acme/echo"}, 200},
		{"echo status", req{url: eu + "/t/acme/echo?status=500"}, 500},
		{"write", req{method: "POST", url: eu + "/t/acme/items", body: "x"}, 201},
		{"relayed", req{url: us + "/t/acme/echo"}, 200},
		{"missing item", req{url: eu + "/t/acme/items/nope"}, 404},
		{"unknown path", req{url: eu + "/t/acme/nope"}, 404},
		{"unknown tenant", req{url: eu + "/t/nobody/echo"}, 404},
		{"outside /t/", req{url: eu + "/favicon.ico"}, 404},
		{"empty tenant", req{url: eu + "/t//echo"}, 400},
		{"method", req{method: "DELETE", url: eu + "/t/acme/items"}, 405},
		{"bad wait", req{method: "POST", url: eu + "/t/acme/items", header: map[string]string{"Fenec-Wait": "soon"}}, 400},
		{"not home", req{url: us + "/t/acme/echo", header: map[string]string{"Fenec-Router": "10.0.0.1:1"}}, 502},
		{"preflight", req{method: "OPTIONS", url: eu + "/t/acme/items", header: map[string]string{
			"Origin": "https://a.example", "Access-Control-Request-Method": "POST"}}, 204},
		{"marked 5xx", req{url: c.url("ap", 0) + "/t/initech/echo"}, 503},
		{"relay to a failing home", req{url: eu + "/t/initech/echo"}, 503},
		{"admin", req{url: eu + "/_standin/health"}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := do(t, client, tt.req)
			if a.status != tt.status {
				t.Errorf("status = %d, want %d (%s)", a.status, tt.status, a.body)
			}
			if got := a.header.Values(hdrShard); len(got) != 1 || got[0] != "1" {
				t.Errorf("Fenec-Shard = %q, want [1]", got)
			}
		})
	}
	// The router's own 502 when the home cannot be reached.
	for i := range 2 {
		if err := c.SetFault(c.addrOf("us", i), Fault{Mode: FaultDown}); err != nil {
			t.Fatal(err)
		}
	}
	a := do(t, client, req{url: eu + "/t/globex/echo"})
	if a.status != 502 || a.header.Get(hdrShard) != "1" {
		t.Errorf("home down: %d Fenec-Shard %q, want 502 with Fenec-Shard", a.status, a.header.Get(hdrShard))
	}
}

func TestFenecHomeOnlyWhenAsked(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	eu, us := c.url("eu", 0), c.url("us", 0)
	tests := []struct {
		name string
		url  string
		home string // the Fenec-Home expected when asked
	}{
		{"local", eu + "/t/acme/echo", "eu"},
		{"relayed", us + "/t/acme/echo", "eu"},
		{"refusal", eu + "/t/acme/items/nope", "eu"},
		{"refusal relayed", us + "/t/acme/nope", "eu"},
		{"bad request", eu + "/t/acme/echo?status=abc", "eu"},
		{"unknown tenant", eu + "/t/nobody/echo", ""},
		{"outside /t/", eu + "/", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked := do(t, client, req{url: tt.url, header: map[string]string{hdrHome: "1"}})
			if got := asked.header.Values(hdrHome); tt.home == "" && len(got) != 0 || tt.home != "" && (len(got) != 1 || got[0] != tt.home) {
				t.Errorf("asked: Fenec-Home = %q, want %q", got, tt.home)
			}
			for _, h := range []map[string]string{nil, {hdrHome: "eu"}, {hdrHome: "0"}} {
				if got := do(t, client, req{url: tt.url, header: h}).header.Values(hdrHome); len(got) != 0 {
					t.Errorf("request Fenec-Home %q: answer Fenec-Home = %q, want none", h[hdrHome], got)
				}
			}
		})
	}
}

func TestPathDecodedOnce(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	eu, us := c.url("eu", 0), c.url("us", 0)
	asked := map[string]string{hdrHome: "1"}

	// An escaped slash ends the tenant: acme, path /echo.
	a := do(t, client, req{url: eu + "/t/acme%2Fecho"})
	if m := a.json(t); a.status != 200 || m["tenant"] != "acme" || m["rest"] != "/echo" {
		t.Errorf("/t/acme%%2Fecho: %d %s, want the echo of tenant acme", a.status, a.body)
	}
	// Tenant acme, path /_replication: not the API, but acme's (Fenec-Home says so).
	a = do(t, client, req{url: eu + "/t/acme%2F_replication", header: asked})
	if a.status != 404 || a.header.Get(hdrHome) != "eu" || a.json(t)["error"] != "not_found" {
		t.Errorf("/t/acme%%2F_replication: %d %q %s, want 404 not_found with Fenec-Home eu", a.status, a.header.Get(hdrHome), a.body)
	}
	a = do(t, client, req{url: eu + "/t/acme/%5Fecho"})
	if a.status != 404 || a.json(t)["error"] != "not_found" {
		t.Errorf("/t/acme/%%5Fecho: %d %s, want 404 not_found (path /_echo)", a.status, a.body)
	}
	// Decoded once only: %252F is a literal "%2F" in the tenant.
	a = do(t, client, req{url: eu + "/t/acme%252Fecho"})
	if a.status != 404 || a.json(t)["error"] != "unknown_tenant" {
		t.Errorf("/t/acme%%252Fecho: %d %s, want 404 unknown_tenant", a.status, a.body)
	}
	// A relay passes the path as the client escaped it.
	a = do(t, client, req{url: us + "/t/acme%2Fecho?x=%2F"})
	if m := a.json(t); a.status != 200 || m["raw_path"] != "/t/acme%2Fecho?x=%2F" || m["region"] != "eu" {
		t.Errorf("relayed: %d %s, want raw_path /t/acme%%2Fecho?x=%%2F at eu", a.status, a.body)
	}
	for _, bad := range []string{"/t/", "/t//echo", "/t/acme%00/echo", "/t/" + strings.Repeat("a", 256) + "/echo"} {
		a = do(t, client, req{url: eu + bad})
		if a.status != 400 || a.json(t)["error"] != "bad_path" {
			t.Errorf("%.40s: %d %s, want 400 bad_path", bad, a.status, a.body)
		}
	}
	if n := len(seenWhere(c, func(s Seen) bool { return s.Region != "eu" && s.Path != "/t/acme/echo" })); n != 0 {
		t.Errorf("%d requests relayed from eu, want none", n)
	}
}

func TestCloseIsIdempotentAndCloses(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	addr := c.addrOf("eu", 0)
	// A stream in flight must not keep Close waiting.
	resp, err := client.Get(c.url("us", 0) + "/t/acme/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Nor a held write, nor a relay to a blackholed home.
	if err := c.SetFault(c.addrOf("ap", 0), Fault{Mode: FaultBlackhole}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []req{
		{method: "POST", url: c.url("eu", 1) + "/t/acme/items", header: map[string]string{hdrWait: "30"}},
		{url: c.url("us", 1) + "/t/initech/echo"},
	} {
		go doErr(context.Background(), client, r)
	}
	testutil.Eventually(t, 5*time.Second, "the requests in flight", func() bool { return len(c.Seen()) == 5 })
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for the requests in flight")
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial after Close: %v, want connection refused", err)
	}
	if err := c.SetFault(addr, Fault{}); !errors.Is(err, ErrClosed) {
		t.Errorf("SetFault after Close: %v, want ErrClosed", err)
	}
}

func TestStartRefusesBadConfig(t *testing.T) {
	ok := []Region{{Name: "eu", Addrs: []string{"127.0.0.1:0"}}}
	tests := []struct {
		name  string
		cfg   Config
		field string
	}{
		{"no region", Config{}, "Regions"},
		{"no address", Config{Regions: []Region{{Name: "eu"}}}, "Regions"},
		{"bad address", Config{Regions: []Region{{Name: "eu", Addrs: []string{"127.0.0.1"}}}}, "Regions"},
		{"duplicate region", Config{Regions: append(ok, ok...)}, "Regions"},
		{"unknown home", Config{Regions: ok, Tenants: map[string]string{"acme": "us"}}, "Tenants"},
		{"bad tenant", Config{Regions: ok, Tenants: map[string]string{"a/b": "eu"}}, "Tenants"},
		{"bad cors", Config{Regions: ok, CORS: "example.com"}, "CORS"},
		{"negative keepalive", Config{Regions: ok, KeepAlive: -1}, "KeepAlive"},
		{"negative items", Config{Regions: ok, Items: -1}, "Items"},
		{"too many items", Config{Regions: ok, Items: MaxItems + 1}, "Items"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Start(tt.cfg)
			if err == nil {
				c.Close()
				t.Fatal("Start succeeded")
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field {
				t.Errorf("err = %v, want a ConfigError on %s", err, tt.field)
			}
		})
	}
	// A listen failure leaves nothing listening.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := Start(Config{Regions: []Region{{Name: "eu", Addrs: []string{"127.0.0.1:0", ln.Addr().String()}}}})
	if err == nil {
		c.Close()
		t.Fatal("Start on a taken port succeeded")
	}
}

func TestURLsAndRouter(t *testing.T) {
	c := startCluster(t, nil)
	urls := c.URLs("eu")
	if len(urls) != 2 || urls[0] == urls[1] || !strings.HasPrefix(urls[0], "http://127.0.0.1:") {
		t.Fatalf("URLs(eu) = %q", urls)
	}
	rt := c.Router(strings.TrimPrefix(urls[1], "http://"))
	if rt == nil || rt.Region() != "eu" || rt.URL() != urls[1] {
		t.Errorf("Router(%s) = %+v", urls[1], rt)
	}
	if c.URLs("mars") != nil || c.Router("127.0.0.1:1") != nil {
		t.Error("unknown region or router found")
	}
}

func TestChunkedBodyRefused(t *testing.T) {
	c := startCluster(t, nil)
	for _, region := range []string{"eu", "us"} {
		conn, err := net.Dial("tcp", c.addrOf(region, 0))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(testRequestTimeout))
		io.WriteString(conn, "POST /t/acme/items HTTP/1.1\r\nHost: x\r\nFenec-Home: 1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 411 || resp.Header.Get(hdrShard) != "1" || resp.Header.Get(hdrHome) != "eu" {
			t.Errorf("%s: chunked write answered %d %v, want 411 with Fenec-Shard and Fenec-Home", region, resp.StatusCode, resp.Header)
		}
	}
	if n := len(c.Ledger()); n != 0 {
		t.Errorf("ledger has %d writes, want 0", n)
	}
}
