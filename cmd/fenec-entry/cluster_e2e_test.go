package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
	"github.com/fenec/fenec-entry/standin"
)

// The multi-process gossip tests: real fenec-entry processes joined in one encrypted serf
// cluster on loopback, in front of stand-in routers (docs/REFERENCE.md, "Homes" and "Cluster and
// operations").

type clusterEntry struct {
	*entry
	client, admin, gossip string
}

// startClusterEntry starts an entry with gossip and waits for its start lines.
func startClusterEntry(t *testing.T, args, env []string) *clusterEntry {
	t.Helper()
	ce := &clusterEntry{entry: startEntry(t, args, env)}
	ce.client, ce.admin = ce.started(t)
	ce.gossip = ce.gossipAddr(t)
	return ce
}

// gossipAddr waits for the gossip start line and returns its memberlist address.
func (e *entry) gossipAddr(t *testing.T) (addr string) {
	t.Helper()
	testutil.EventuallyEvery(t, 10*time.Second, 20*time.Millisecond, "the gossip start line", func() bool {
		for _, l := range e.stderr() {
			var line struct {
				Message string `json:"message"`
				Addr    string `json:"addr"`
			}
			if json.Unmarshal([]byte(l), &line) == nil && line.Message == "gossip: started" {
				addr = line.Addr
				return true
			}
		}
		return false
	})
	return addr
}

type statusDoc struct {
	Version     string `json:"version"`
	Ready       bool   `json:"ready"`
	GossipUp    bool   `json:"gossip_up"`
	GossipState string `json:"gossip_state"`
	Homes       struct {
		Held   int    `json:"held"`
		Gossip int    `json:"gossip"`
		Digest string `json:"digest"`
	} `json:"homes"`
	Regions []struct {
		Name   string `json:"name"`
		Marked bool   `json:"marked"`
	} `json:"regions"`
	Members []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"members"`
}

func (c *clusterEntry) status(t *testing.T) statusDoc {
	t.Helper()
	return statusAt(t, c.admin)
}

func (s statusDoc) memberState(name string) string {
	for _, m := range s.Members {
		if m.Name == name {
			return m.State
		}
	}
	return ""
}

// freeAddr returns a loopback address with a free port for a process the test starts. The
// port is below Linux's ephemeral range (32768-60999): a port the kernel picks for ":0" is
// in that range, and any test's outgoing connection may take it again between the pick and
// the entry's bind (TestGossipCluster failed so: "--rpc-addr: address already in use").
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		return addr
	}
	t.Fatal("no free port below the ephemeral range")
	return ""
}

// serfCLI runs the stock serf CLI (go tool serf: a tool of go.mod) with args, and returns
// its output. It gives up after a minute (the first run builds the tool) and names that.
func serfCLI(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"tool", "serf"}, args...)...)
	cmd.WaitDelay = 2 * time.Second // go tool's child may hold the output open
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("no answer within a minute: %w", ctx.Err())
	}
	return out, err
}

// TestGossipCluster runs four entries in phases, each a subtest; a failed phase ends the
// test (the later ones build on it).
func TestGossipCluster(t *testing.T) {
	sc, err := standin.Start(standin.Config{
		Regions: []standin.Region{
			{Name: "eu", Addrs: []string{"127.0.0.1:0", "127.0.0.1:0"}},
			{Name: "us", Addrs: []string{"127.0.0.1:0"}},
		},
		Tenants: map[string]string{"acme": "eu", "globex": "us"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	routers := "eu=" + strings.Join(sc.URLs("eu"), ",") + ";us=" + strings.Join(sc.URLs("us"), ",")
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	const (
		plantedToken  = "PLANTED-ENTRY-TOKEN-7f3a"
		plantedRPC    = "PLANTED-RPC-AUTH-91c2"
		plantedAuth   = "Bearer PLANTED-AUTHORIZATION-5d1e"
		plantedCookie = "session=PLANTED-COOKIE-c0de"
		plantedBody   = "PLANTED-BODY-b0d7"
	)
	var all []*entry
	rpcAddr := map[string]string{"a": freeAddr(t), "b": "127.0.0.1:0", "c": "127.0.0.1:0", "d": "127.0.0.1:0"}

	parent := t // entries live for the whole test, whatever phase starts them
	start := func(name string, join string) *clusterEntry {
		args := []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
			"--gossip-bind", "127.0.0.1:0", "--rpc-addr", rpcAddr[name],
			"--node", name, "--pop", name, "--continent", "NA", "--routers", routers, "--drain", "200ms"}
		if join != "" {
			args = append(args, "--join", join)
		}
		ce := startClusterEntry(parent, args, cleanEnv("FENEC_ENTRY_GOSSIP_KEY="+key, "FENEC_ENTRY_LOG_LEVEL=debug",
			"FENEC_ENTRY_ENTRY_TOKEN="+plantedToken, "FENEC_ENTRY_RPC_AUTH="+plantedRPC))
		all = append(all, ce.entry)
		return ce
	}
	a := start("a", "")
	b := start("b", a.gossip)
	c := start("c", a.gossip)
	var d *clusterEntry
	for _, e := range []*clusterEntry{a, b, c} {
		testutil.Eventually(t, 10*time.Second, "three alive members at every entry", func() bool {
			s := e.status(t)
			n := 0
			for _, m := range s.Members {
				if m.State == "alive" {
					n++
				}
			}
			return n == 3 && s.Ready
		})
	}

	euDirect := func() int {
		n := 0
		eu := map[string]bool{}
		for _, u := range sc.URLs("eu") {
			pu, _ := url.Parse(u)
			eu[pu.Host] = true
		}
		for _, s := range sc.Seen() {
			if eu[s.Router] && s.From == "" {
				n++
			}
		}
		return n
	}

	if !t.Run("serf members lists the entries", func(t *testing.T) {
		// The stock serf CLI lists the entries with their tags (go tool serf: a tool of go.mod).
		out, err := serfCLI(t, "members", "-rpc-addr", rpcAddr["a"], "-rpc-auth", plantedRPC)
		if err != nil {
			t.Fatalf("serf members: %v\n%s", err, out)
		}
		for _, name := range []string{"a", "b", "c"} {
			found := false
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(line)
				if len(f) >= 4 && f[0] == name && f[2] == "alive" && strings.Contains(f[3], "role=entry") &&
					strings.Contains(f[3], "pop="+name) && strings.Contains(f[3], "continent=NA") {
					found = true
				}
			}
			if !found {
				t.Errorf("serf members does not list %s alive with its tags:\n%s", name, out)
			}
		}
	}) {
		return
	}

	if !t.Run("a home learned at A is used at B and C", func(t *testing.T) {
		// Learned at A (acme lives in eu; the PoP's continent sends it to us first, which relays).
		if status, _, _ := httpGet(t, "http://"+a.client+"/t/acme/items/1"); status != 404 || euDirect() != 0 {
			t.Fatalf("first request at A: %d, eu asked directly %d times; want a relay by us", status, euDirect())
		}
		learned := time.Now()
		for _, e := range []*clusterEntry{b, c} {
			testutil.Eventually(t, 3*time.Second, "home reaches "+e.client, func() bool { return e.status(t).Homes.Gossip >= 1 })
		}
		took := time.Since(learned)
		t.Logf("home learned at A held by B and C after %v", took)
		if took > time.Second {
			t.Errorf("home took %v to reach B and C, want within a second", took)
		}
		if da, db, dc := a.status(t).Homes.Digest, b.status(t).Homes.Digest, c.status(t).Homes.Digest; da == "" || da != db || da != dc {
			t.Errorf("table digests differ once the home is everywhere: a %s b %s c %s", da, db, dc)
		}
		before := euDirect()
		for _, e := range []*clusterEntry{b, c} {
			httpGet(t, "http://"+e.client+"/t/acme/items/1")
		}
		if got := euDirect() - before; got != 2 {
			t.Errorf("B and C sent %d of 2 requests straight to eu", got)
		}
	}) {
		return
	}

	if !t.Run("a joiner holds the table when ready", func(t *testing.T) {
		// A fourth entry started later holds the table before it reports ready.
		d = start("d", a.gossip)
		testutil.Eventually(t, 6*time.Second, "D ready", func() bool { return d.status(t).Ready })
		if s := d.status(t); s.Homes.Held < 1 {
			t.Errorf("D ready with %d homes, want the table (acme)", s.Homes.Held)
		}
	}) {
		return
	}

	if !t.Run("a mark made at A reaches B", func(t *testing.T) {
		// A mark made at A reorders regions at B: eu fails at A, B asks us first.
		for _, u := range sc.URLs("eu") {
			pu, _ := url.Parse(u)
			f, _ := standin.ParseFault("refuse")
			if err := sc.SetFault(pu.Host, f); err != nil {
				t.Fatal(err)
			}
		}
		httpGet(t, "http://"+a.client+"/t/acme/items/1")
		testutil.Eventually(t, 3*time.Second, "eu marked at B", func() bool {
			for _, r := range b.status(t).Regions {
				if r.Name == "eu" && r.Marked {
					return true
				}
			}
			return false
		})
	}) {
		return
	}

	// Requests carrying secrets, through every entry.
	for _, e := range []*clusterEntry{a, b, d} {
		req, _ := http.NewRequest("POST", "http://"+e.client+"/t/globex/items", strings.NewReader(plantedBody))
		req.Header.Set("Authorization", plantedAuth)
		req.Header.Set("Cookie", plantedCookie)
		if resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req); err == nil {
			resp.Body.Close()
		}
	}

	if !t.Run("SIGTERM: the others see it left", func(t *testing.T) {
		// SIGTERM: the others see the entry left.
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 3*time.Second, "A sees C left", func() bool { return a.status(t).memberState("c") == "left" })
		if status := c.exitStatus(t, 15*time.Second); status != 0 {
			t.Errorf("C exit status %d, want 0", status)
		}
	}) {
		return
	}

	if !t.Run("no secret in any log line", func(t *testing.T) {
		// No secret reaches a log line, in the whole run of every entry (at debug).
		lines := 0
		for _, e := range all {
			for _, l := range e.stderr() {
				lines++
				for _, s := range []string{plantedToken, plantedRPC, "PLANTED-AUTHORIZATION", "PLANTED-COOKIE", plantedBody, key} {
					if strings.Contains(l, s) {
						t.Errorf("a log line carries %q: %s", s, l)
					}
				}
			}
		}
		if lines < 50 {
			t.Errorf("only %d log lines at debug: the secret check read too little", lines)
		}
	}) {
		return
	}

}

// statusAt reads /status.json from an admin address.
func statusAt(t *testing.T, admin string) statusDoc {
	t.Helper()
	_, _, body := httpGet(t, "http://"+admin+"/status.json")
	var s statusDoc
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("status.json: %v: %s", err, body)
	}
	return s
}

// metricAt is the value of the metric line that starts with name (with its labels).
func metricAt(t *testing.T, admin, name string) float64 {
	t.Helper()
	_, _, body := httpGet(t, "http://"+admin+"/metrics")
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return f
		}
	}
	return 0
}
