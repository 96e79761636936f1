//go:build chaos

package chaos

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// homeSpread is the bound of docs/REFERENCE.md, "Homes", for a home to reach every other entry on
// one network (3 s), with slack for a loaded 2-core machine.
const homeSpread = 5 * time.Second

// outsiderWait bounds the look at an entry that must not join: more than one --join retry
// (5 s) and a gossip round.
const outsiderWait = 7 * time.Second

// 6. Rotate the gossip key under load with the stock CLI through A's RPC (--rpc-auth set):
// serf keys -install B, -use B, -remove A. After each step a tenant heard nowhere yet is
// learned at one entry and must reach the other two; a home moves between -use and -remove.
// Then C is restarted (SIGTERM, clients sending to it through its drain) with only key B in
// its environment: it rejoins and holds the table when ready. An entry started with only key A cannot join, nor teach the cluster a home.
func TestChaos6KeyRotation(t *testing.T) {
	h := newHarness(t, "key-rotation", scenarioSeed(606))
	general, late, unheard := tenants[:8], tenants[8:11], tenants[11]
	mover := general[4] // t05, homed in us
	h.warmup(general)
	tr := h.startTraffic(h.seed, clients, general)
	time.Sleep(2 * time.Second)
	a, b, c := h.entry("a"), h.entry("b"), h.entry("c")

	keys := func(via *entryProc, args ...string) string {
		start := time.Now()
		out, err := h.serfKeys(via, args...)
		if err != nil {
			t.Fatal(err)
		}
		h.logf("serf keys %s via %s's RPC: %v", redact(strings.Join(args, " ")), via.name, time.Since(start).Round(10*time.Millisecond))
		return out
	}
	// learn makes e hear a tenant no entry holds yet; every entry must hold it, and the tables
	// agree by digest, within homeSpread.
	learn := func(e *entryProc, tenant, after string) {
		if r := h.rec.probe(e, tenant, "learn"); !r.Shard || r.Status >= 500 || r.Err != "" {
			t.Errorf("learning %s at %s after %s: %s", tenant, e.name, after, r.outcome())
			return
		}
		if a, took := h.waitAgree(homeSpread, tenant+" learned at "+e.name+" after "+after); a.ok {
			h.logf("after %s: %s learned at %s reached every entry in %v (%s)", after, tenant, e.name, took.Round(10*time.Millisecond), a.line)
		}
	}

	rotating := time.Now()
	keys(a, "-install", gossipKeyB)
	learn(a, late[0], "-install B")
	keys(a, "-use", gossipKeyB)
	learn(b, late[1], "-use B")
	newHome := "eu"
	h.move(mover, newHome)
	h.logf("moved %s to %s", mover, newHome)
	time.Sleep(time.Second) // the traffic relearns it at every entry, with the new key
	keys(a, "-remove", gossipKeyA)
	learn(c, late[2], "-remove A")
	h.logf("rotated in %v", time.Since(rotating).Round(100*time.Millisecond))

	// What every entry holds now: B alone, through another entry's RPC; and the RPC asks for
	// the token.
	list := keys(b, "-list")
	if strings.Contains(list, gossipKeyA) || !strings.Contains(list, gossipKeyB) {
		t.Errorf("serf keys -list via b after the rotation: want key B only, got:\n%s", redact(list))
	}
	if out, err := h.serfKeysAuth(b, "", "-list"); err == nil {
		t.Errorf("serf keys -list via b without -rpc-auth succeeded (--rpc-auth is set):\n%s", redact(out))
	}

	// C restarted by its operator with its environment saying key B only. Clients go on
	// sending to C through its drain: every request it accepts must be answered.
	stopping := time.Now()
	if !c.stop(10 * time.Second) {
		t.Errorf("C did not exit within 10 s of SIGTERM (killed)")
	} else if code := c.exitCode(); code != 0 {
		t.Errorf("C exited %d after SIGTERM, want 0 (see %s)", code, c.logPath)
	}
	// From its exit until the cluster is whole again clients avoid C: it must be ready
	// holding the table its peers gave it under key B, not homes its own clients taught it.
	tr.setAvoid("c", true)
	h.logf("C stopped (SIGTERM) under load: exit %d after %v", c.exitCode(), time.Since(stopping).Round(10*time.Millisecond))
	c.setKey(gossipKeyB)
	c.start(t)
	var atReady statusDoc
	took, ok := h.waitStatus(c, 10*time.Second, "C (key B only) ready", func(s statusDoc) bool {
		atReady = s
		return s.Ready
	})
	peer, _ := a.status()
	h.logf("C (key B only) ready %v after its start, holding %d homes, digest %s (a: %d, %s)", took.Round(10*time.Millisecond),
		atReady.Homes.Held, atReady.Homes.Digest, peer.Homes.Held, peer.Homes.Digest)
	if want := len(h.learned()); ok && atReady.Homes.Held != want {
		t.Errorf("C (key B only) reported ready holding %d homes, want the table's %d", atReady.Homes.Held, want)
	}
	rejoin := h.waitCluster(15 * time.Second)
	rejoined := time.Now()
	h.logf("every entry sees three alive members %v after C was ready", rejoin.Round(10*time.Millisecond))
	w := h.watchConvergence()
	tr.setAvoid("c", false)

	h.outsiderCannotJoin(unheard)
	time.Sleep(2 * time.Second)
	tr.stop()
	h.finish(w, repairMax+rejoinSlack, func(s *summary) {
		servedC := 0
		for _, r := range h.rec.records() {
			if r.Entry == "c" && r.Start.After(rejoined) && r.Err == "" && r.Shard && r.Status < 500 {
				servedC++
			}
		}
		h.logf("C (key B only) served %d requests after it rejoined", servedC)
		if servedC == 0 {
			s.fail("C (key B only) served nothing after it rejoined")
		}
	})
}

// outsiderCannotJoin starts an entry "x" holding only the removed key A, with --join the
// three entries, and asks it for tenant, which no entry holds: for outsiderWait it must list
// itself alone, no entry may list it, and no entry may learn the tenant's home. x is not one
// of h.entries (the invariants do not count it) and is stopped before the end.
func (h *harness) outsiderCannotJoin(tenant string) {
	t := h.t
	x := h.newEntryProc("x", "EU")
	var join []string
	for _, e := range h.entries {
		join = append(join, e.gossip)
	}
	h.setArgs(x, join, gossipKeyA)
	x.start(t)
	defer x.kill()
	held := map[string]int{}
	for _, e := range h.entries {
		st, _ := e.status()
		held[e.name] = st.Homes.Held
	}
	if _, ok := h.waitStatus(x, 10*time.Second, "x (key A only) serving", func(s statusDoc) bool { return s.Ready }); !ok {
		return
	}
	// Not recorded: the invariants must not count x's answer as a home the cluster learned.
	resp, err := (&http.Client{Timeout: clientTimeout}).Get("http://" + x.listen + "/t/" + tenant + "/items/0")
	if err != nil {
		t.Errorf("x (key A only): GET %s: %v", tenant, err)
	} else {
		resp.Body.Close()
		h.logf("x (key A only) started with --join a, b, c; it served %s alone: %d", tenant, resp.StatusCode)
	}
	deadline := time.Now().Add(outsiderWait)
	for time.Now().Before(deadline) {
		if st, err := x.status(); err == nil && (len(st.Members) != 1 || st.member("x") != "alive") {
			t.Errorf("x (key A only) lists members %+v: it joined with a removed key", st.Members)
			return
		}
		for _, e := range h.entries {
			st, err := e.status()
			if err != nil {
				continue
			}
			if m := st.member("x"); m != "" {
				t.Errorf("%s lists x (key A only) %s: it joined with a removed key", e.name, m)
				return
			}
			if st.Homes.Held != held[e.name] {
				t.Errorf("%s holds %d homes, %d before x (key A only) heard %s: x taught it a home", e.name, st.Homes.Held, held[e.name], tenant)
				return
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	h.logf("x (key A only) stayed alone for %v: a, b and c list no x and hold no home of %s", outsiderWait, tenant)
}
