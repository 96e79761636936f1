package standin

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestMove(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	if err := c.Move("acme", "us"); err != nil {
		t.Fatal(err)
	}
	a := do(t, client, req{method: "POST", url: c.url("eu", 0) + "/t/acme/items", header: map[string]string{hdrHome: "1"}})
	if a.status != 201 || a.header.Get(hdrHome) != "us" || a.json(t)["region"] != "us" {
		t.Errorf("write after the move: %d %q %s, want applied at us", a.status, a.header.Get(hdrHome), a.body)
	}
	if l := c.Ledger(); len(l) != 1 || l[0].Region != "us" {
		t.Errorf("ledger = %+v, want the write at us", l)
	}
	if err := c.Move("acme", "mars"); err == nil {
		t.Error("Move to an unknown region succeeded")
	}
	if err := c.Move("newco", "ap"); err != nil || c.Directory()["newco"] != "ap" {
		t.Errorf("Move of a new tenant: %v, directory %v", err, c.Directory())
	}
}

func TestAdminAPI(t *testing.T) {
	c := startCluster(t, func(cfg *Config) { cfg.EntryToken = "tok" })
	client := newClient(t)
	admin := c.url("eu", 0) + "/_standin/"
	get := func(path string, v any) {
		t.Helper()
		a := do(t, client, req{url: admin + path})
		if a.status != 200 {
			t.Fatalf("GET %s: %d %s", path, a.status, a.body)
		}
		mustUnmarshal(t, a.body, v)
	}
	post := func(path string, q url.Values) answer {
		t.Helper()
		return do(t, client, req{method: "POST", url: admin + path + "?" + q.Encode()})
	}

	var health map[string]any
	get("health", &health)
	if health["ok"] != true || health["region"] != "eu" {
		t.Errorf("health = %v", health)
	}

	// One router's admin sets another's fault.
	us1 := c.addrOf("us", 1)
	if a := post("fault", url.Values{"router": {us1}, "mode": {"slow=10"}}); a.status != 200 || a.json(t)["fault"] != "slow=10" {
		t.Errorf("set fault: %d %s", a.status, a.body)
	}
	if f := c.Router(us1).Fault(); f != (Fault{Mode: FaultSlow, SlowMS: 10}) {
		t.Errorf("fault of %s = %+v", us1, f)
	}
	var routers []routerInfo
	get("routers", &routers)
	if len(routers) != 5 || routers[3].Addr != us1 || routers[3].Fault != "slow=10" || routers[0].Fault != "ok" {
		t.Errorf("routers = %+v", routers)
	}
	for _, bad := range []url.Values{{"mode": {"crash"}}, {"mode": {""}}, {"router": {"127.0.0.1:1"}, "mode": {"ok"}}} {
		if a := post("fault", bad); a.status < 400 {
			t.Errorf("fault %v: %d, want an error", bad, a.status)
		}
	}

	if a := post("move", url.Values{"tenant": {"acme"}, "home": {"ap"}}); a.status != 200 {
		t.Errorf("move: %d %s", a.status, a.body)
	}
	if a := post("move", url.Values{"tenant": {"acme"}, "home": {"mars"}}); a.status != 400 {
		t.Errorf("move to mars: %d, want 400", a.status)
	}
	var dir map[string]string
	get("directory", &dir)
	if dir["acme"] != "ap" {
		t.Errorf("directory = %v", dir)
	}

	for range 3 {
		do(t, client, req{method: "POST", url: c.url("eu", 1) + "/t/acme/items"})
	}
	var ledger []Apply
	get("ledger", &ledger)
	if len(ledger) != 3 || ledger[0].Region != "ap" {
		t.Errorf("ledger = %+v", ledger)
	}
	get("ledger?since=2", &ledger)
	if len(ledger) != 1 {
		t.Errorf("ledger?since=2 has %d entries, want 1", len(ledger))
	}
	var seen []Seen
	get("seen", &seen)
	if len(seen) != 6 { // 3 at eu, relayed to ap
		t.Fatalf("seen has %d records, want 6", len(seen))
	}
	get("seen?since="+jsonString(seen[3].Seq), &seen)
	if len(seen) != 2 {
		t.Errorf("seen?since has %d records, want 2", len(seen))
	}
	var marks MarkCounts
	get("marks", &marks)
	if marks.Absent != 3 {
		t.Errorf("marks = %+v, want 3 absent", marks)
	}

	if a := post("reset", nil); a.status != 200 {
		t.Fatalf("reset: %d %s", a.status, a.body)
	}
	if len(c.Ledger()) != 0 || len(c.Seen()) != 0 || c.ClientMarks() != (MarkCounts{}) || c.Router(us1).Fault() != (Fault{}) {
		t.Errorf("after reset: ledger %d, seen %d, marks %+v, fault %+v", len(c.Ledger()), len(c.Seen()), c.ClientMarks(), c.Router(us1).Fault())
	}
	do(t, client, req{url: c.url("eu", 1) + "/t/globex/items/x"})
	if s := c.Seen(); len(s) == 0 || s[0].Seq <= 6 {
		t.Errorf("Seq restarted after reset: %+v", s)
	}

	if a := do(t, client, req{url: admin + "reset"}); a.status != 405 {
		t.Errorf("GET reset: %d, want 405", a.status)
	}
	if a := do(t, client, req{url: admin + "nope"}); a.status != 404 {
		t.Errorf("unknown admin path: %d, want 404", a.status)
	}
	if n := len(c.Seen()); n != 2 {
		t.Errorf("admin requests were recorded: %d records, want 2", n)
	}
}

func TestAdminClearsADownRouterFromAnother(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	eu0 := c.addrOf("eu", 0)
	for _, mode := range []string{"down", "ok"} {
		a := do(t, client, req{method: "POST", url: c.url("eu", 1) + "/_standin/fault?router=" + eu0 + "&mode=" + mode})
		if a.status != 200 {
			t.Fatalf("fault %s: %d %s", mode, a.status, a.body)
		}
	}
	if a := do(t, client, req{url: c.url("eu", 0) + "/_standin/health"}); a.status != 200 {
		t.Errorf("router after clearing down: %d", a.status)
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestSeenRing(t *testing.T) {
	var s seenLog
	s.init(3)
	for i := range 5 {
		s.add(Seen{Path: string(rune('a' + i))})
	}
	got := s.since(0)
	if len(got) != 3 || got[0].Seq != 3 || got[2].Seq != 5 || got[0].Path != "c" {
		t.Errorf("ring = %+v, want the last 3", got)
	}
	s.update(1, func(r *Seen) { r.Status = 999 }) // forgotten: no effect
	s.update(4, func(r *Seen) { r.Status = 200 })
	if got := s.since(3); len(got) != 2 || got[0].Status != 200 || got[1].Status != 0 {
		t.Errorf("since(3) = %+v", got)
	}
	s.reset()
	if got := s.since(0); len(got) != 0 {
		t.Errorf("after reset: %+v", got)
	}
	if seq := s.add(Seen{}); seq != 6 {
		t.Errorf("seq after reset = %d, want 6", seq)
	}
}

func TestAdminPutsItsOwnRouterDown(t *testing.T) {
	c := startCluster(t, nil)
	eu0 := c.addrOf("eu", 0)
	for _, mode := range []string{"down", "refuse"} {
		a := do(t, newClient(t), req{method: "POST", url: c.url("eu", 0) + "/_standin/fault?mode=" + mode})
		if a.status != 200 || a.json(t)["fault"] != mode {
			t.Errorf("%s by its own admin: %d %s, want the answer", mode, a.status, a.body)
		}
		if _, err := net.Dial("tcp", eu0); !isRefused(err) {
			t.Errorf("dial after %s: %v, want refused", mode, err)
		}
		if err := c.SetFault(eu0, Fault{}); err != nil {
			t.Fatal(err)
		}
	}
}

// Every admin endpoint the code serves (adminMethods) has a curl line in the README of
// cmd/fenec-standin for each of its methods, so that the two cannot drift.
func TestAdminEndpointsInREADME(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "cmd", "fenec-standin", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	curlURL := regexp.MustCompile(`http://[^/\s']+` + adminPrefix + `([a-z]+)`)
	has := make(map[string]bool) // "GET health", "POST move", ...
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "curl ") {
			continue
		}
		method := http.MethodGet
		if strings.Contains(line, " -d ") || strings.Contains(line, "-X POST") {
			method = http.MethodPost
		}
		for _, m := range curlURL.FindAllStringSubmatch(line, -1) {
			has[method+" "+m[1]] = true
		}
	}
	for path, method := range adminMethods {
		methods := []string{method}
		if method == "" {
			methods = []string{http.MethodGet, http.MethodPost}
		}
		for _, m := range methods {
			if !has[m+" "+path] {
				t.Errorf("README.md has no curl line for %s %s%s", m, adminPrefix, path)
			}
			if !strings.Contains(string(b), "`"+m+" "+adminPrefix+path) {
				t.Errorf("README.md's table does not list %s %s%s", m, adminPrefix, path)
			}
		}
	}
}
