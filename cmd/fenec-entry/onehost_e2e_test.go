package main

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
	"github.com/fenec/fenec-entry/standin"
)

// listening returns the sockets pid listens on: "tcp:<port>" for a TCP listener, "udp:<port>"
// for an unconnected UDP socket, read from /proc (Linux).
func listening(t *testing.T, pid int) []string {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var out []string
	for _, tab := range []struct{ file, proto, state string }{
		{"tcp", "tcp", "0A"}, {"tcp6", "tcp", "0A"}, {"udp", "udp", "07"}, {"udp6", "udp", "07"},
	} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, tab.file))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != tab.state || !inodes[f[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			port, _ := strconv.ParseUint(hexPort, 16, 16)
			out = append(out, fmt.Sprintf("%s:%d", tab.proto, port))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// oneRouter starts one stand-in router for region eu (tenant acme), closed when t ends.
func oneRouter(t *testing.T) *standin.Cluster {
	t.Helper()
	sc, err := standin.Start(standin.Config{
		Regions: []standin.Region{{Name: "eu", Addrs: []string{"127.0.0.1:0"}}},
		Tenants: map[string]string{"acme": "eu"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	return sc
}

// TestTwoEntriesOnOneHost pins docs/REFERENCE.md, "Configuration": two entries on one host, given
// distinct values of the contract's ports and nothing else (no --node: both take the hostname, with
// their gossip port), start, join and list as two members, and neither opens a listener the
// table does not name.
func TestTwoEntriesOnOneHost(t *testing.T) {
	sc, key := oneRouter(t), base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	type ports struct{ listen, admin, gossip, rpc string }
	mk := func() ports { return ports{freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)} }
	p1, p2 := mk(), mk()
	start := func(p ports, join string) *clusterEntry {
		args := []string{"--routers", "eu=" + sc.URLs("eu")[0], "--listen", p.listen, "--admin-listen", p.admin,
			"--gossip-bind", p.gossip, "--rpc-addr", p.rpc}
		if join != "" {
			args = append(args, "--join", join)
		}
		return startClusterEntry(t, args, cleanEnv("FENEC_ENTRY_GOSSIP_KEY="+key))
	}
	a := start(p1, "")
	b := start(p2, p1.gossip)
	host, _ := os.Hostname()
	for _, e := range []*clusterEntry{a, b} {
		testutil.Eventually(t, 10*time.Second, "two alive members at "+e.admin, func() bool {
			s := e.status(t)
			return len(s.Members) == 2 && s.memberState(host+"-"+portOf(p1.gossip)) == "alive" &&
				s.memberState(host+"-"+portOf(p2.gossip)) == "alive"
		})
	}
	for i, e := range []*clusterEntry{a, b} {
		p := []ports{p1, p2}[i]
		want := []string{"tcp:" + portOf(p.listen), "tcp:" + portOf(p.admin), "tcp:" + portOf(p.gossip),
			"tcp:" + portOf(p.rpc), "udp:" + portOf(p.gossip)}
		slices.Sort(want)
		if got := listening(t, e.cmd.Process.Pid); !slices.Equal(got, want) {
			t.Errorf("entry %d listens on %v, want exactly %v (the contract's ports)", i+1, got, want)
		}
	}
}

// TestNameConflictEndToEnd pins the --node row: two entries holding one name; one says so at
// error with both addresses, and its /status.json and /metrics say gossip is down while its
// serf is shut down.
func TestNameConflictEndToEnd(t *testing.T) {
	sc, key := oneRouter(t), base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	start := func(join string) *clusterEntry {
		args := []string{"--routers", "eu=" + sc.URLs("eu")[0], "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
			"--gossip-bind", "127.0.0.1:0", "--rpc-addr", "127.0.0.1:0", "--node", "twin"}
		if join != "" {
			args = append(args, "--join", join)
		}
		return startClusterEntry(t, args, cleanEnv("FENEC_ENTRY_GOSSIP_KEY="+key))
	}
	a := start("")
	b := start(a.gossip)
	seen, last := false, ""
	defer func() {
		if !seen {
			t.Logf("last look: %s", last)
		}
	}()
	testutil.Eventually(t, 20*time.Second, "an entry that says, everywhere at once, that gossip is down", func() bool {
		for _, e := range []*clusterEntry{a, b} {
			st := e.status(t)
			_, _, metrics := httpGet(t, "http://"+e.admin+"/metrics")
			_, _, ready := httpGet(t, "http://"+e.admin+"/readyz")
			up := ""
			for _, l := range strings.Split(metrics, "\n") {
				if strings.HasPrefix(l, "fenec_entry_gossip_up ") {
					up = l
				}
			}
			last = fmt.Sprintf("%s | %q | up %v, %q, %d members", up, ready, st.GossipUp, st.GossipState, len(st.Members))
			if !st.GossipUp && st.GossipState == "shutdown" && len(st.Members) == 0 &&
				up == "fenec_entry_gossip_up 0" && ready == "ready; gossip down\n" {
				seen = true
			}
		}
		return seen
	})
	found := false
	for _, e := range []*clusterEntry{a, b} {
		for _, l := range e.stderr() {
			if strings.Contains(l, `"level":"error"`) && strings.Contains(l, `"node":"twin"`) &&
				strings.Contains(l, `"other_addr":"127.0.0.1:`) && strings.Contains(l, `"addr":"127.0.0.1:`) {
				found = true
			}
		}
	}
	if !found {
		t.Error("no entry logged the conflict at error with both addresses")
	}
}

// serfKeys runs the stock CLI's `serf keys` through one entry's RPC.
func serfKeys(t *testing.T, rpc, auth string, args ...string) string {
	t.Helper()
	out, err := serfCLI(t, append([]string{"keys", "-rpc-addr", rpc, "-rpc-auth", auth}, args...)...)
	if err != nil {
		t.Fatalf("serf keys %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestKeyRotationEndToEnd is the key rotation of docs/REFERENCE.md with real processes and the
// stock CLI: three entries under traffic rotate from key A to key B (serf keys -install,
// -use, -remove through one entry's RPC); no home is lost; an entry started with only B joins
// and gets the table; one with only A can neither join nor teach a home.
func TestKeyRotationEndToEnd(t *testing.T) {
	const tenants = 40
	dir := map[string]string{}
	regions := []string{"eu", "us"}
	for i := range tenants + 1 {
		dir[fmt.Sprintf("t%02d", i)] = regions[i%2]
	}
	sc, err := standin.Start(standin.Config{
		Regions: []standin.Region{{Name: "eu", Addrs: []string{"127.0.0.1:0"}}, {Name: "us", Addrs: []string{"127.0.0.1:0"}}},
		Tenants: dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	routers := "eu=" + sc.URLs("eu")[0] + ";us=" + sc.URLs("us")[0]
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	keyA, keyB := b64(strings.Repeat("A", 32)), b64(strings.Repeat("B", 32))
	const auth = "rotation-rpc-auth"
	rpcA := freeAddr(t)
	start := func(name, key, join, rpc string) *clusterEntry {
		args := []string{"--routers", routers, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
			"--gossip-bind", "127.0.0.1:0", "--rpc-addr", rpc, "--node", name}
		if join != "" {
			args = append(args, "--join", join)
		}
		return startClusterEntry(t, args, cleanEnv("FENEC_ENTRY_GOSSIP_KEY="+key, "FENEC_ENTRY_RPC_AUTH="+auth))
	}
	a := start("a", keyA, "", rpcA)
	b := start("b", keyA, a.gossip, "127.0.0.1:0")
	c := start("c", keyA, a.gossip, "127.0.0.1:0")
	three := []*clusterEntry{a, b, c}
	for _, e := range three {
		testutil.Eventually(t, 10*time.Second, "three members at "+e.admin, func() bool {
			s := e.status(t)
			return s.memberState("a") == "alive" && s.memberState("b") == "alive" && s.memberState("c") == "alive"
		})
	}

	// Traffic all along: each tenant first heard at a random entry, some again later.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent atomic.Int64
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			e := three[rng.IntN(3)]
			tn := fmt.Sprintf("t%02d", min(i/3, tenants-1)) // a new tenant every third request
			if status, _, _ := httpGet(t, "http://"+e.client+"/t/"+tn+"/items/1"); status < 500 {
				sent.Add(1)
			}
		}
	})
	time.Sleep(500 * time.Millisecond)
	serfKeys(t, rpcA, auth, "-install", keyB)
	time.Sleep(500 * time.Millisecond)
	serfKeys(t, rpcA, auth, "-use", keyB)
	time.Sleep(500 * time.Millisecond)
	serfKeys(t, rpcA, auth, "-remove", keyA)
	if out := serfKeys(t, rpcA, auth, "-list"); strings.Contains(out, keyA) || !strings.Contains(out, keyB) {
		t.Errorf("serf keys -list after the rotation:\n%s", out)
	}
	testutil.Eventually(t, 15*time.Second, "every tenant heard", func() bool { return sent.Load() >= 3*tenants })
	close(stop)
	wg.Wait()

	// No home lost: every entry holds every tenant, the same table.
	testutil.Eventually(t, 5*time.Second, "the same full table at every entry", func() bool {
		d := a.status(t).Homes
		for _, e := range three {
			if s := e.status(t).Homes; s.Held != tenants || s.Digest != d.Digest {
				return false
			}
		}
		return true
	})

	// An entry holding only B joins and holds the table when ready.
	d := start("d", keyB, a.gossip, "127.0.0.1:0")
	testutil.Eventually(t, 6*time.Second, "d ready", func() bool { return d.status(t).Ready })
	if s := d.status(t); s.Homes.Held != tenants || s.Homes.Digest != a.status(t).Homes.Digest || s.memberState("a") != "alive" {
		t.Errorf("d (key B only) ready with %d homes, a %s; want the whole table", s.Homes.Held, s.memberState("a"))
	}

	// One holding only A cannot join, nor teach a home.
	e := start("e", keyA, a.gossip, "127.0.0.1:0")
	httpGet(t, "http://"+e.client+fmt.Sprintf("/t/t%02d/items/1", tenants)) // a tenant nobody has heard of
	time.Sleep(3 * time.Second)                                             // bounded: what must not happen
	if s := e.status(t); s.memberState("a") != "" || len(s.Members) != 1 {
		t.Errorf("e (key A only) lists %+v, want itself alone", s.Members)
	}
	for _, x := range []*clusterEntry{a, b, c, d} {
		if s := x.status(t); s.Homes.Held != tenants || s.memberState("e") != "" {
			t.Errorf("%s: %d homes, e %q: the entry holding only the removed key reached it", x.admin, s.Homes.Held, s.memberState("e"))
		}
	}
}
