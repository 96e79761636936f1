package node

import (
	"bufio"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
	"github.com/fenec/fenec-entry/standin"
)

// attemptsAt sums fenec_entry_attempts_total{region=...} in n's /metrics: every attempt at a
// router of the region, whatever its outcome.
func attemptsAt(t *testing.T, n *Node, region string) int {
	t.Helper()
	resp, err := http.Get("http://" + n.AdminAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	prefix := `fenec_entry_attempts_total{class="`
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) || !strings.Contains(line, `region="`+region+`"}`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return int(sum)
}

func metricsText(t *testing.T, n *Node) string {
	t.Helper()
	resp, err := http.Get("http://" + n.AdminAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func unreachableFromHere(n *Node, region string) bool {
	for _, r := range n.Status().Regions {
		if r.Name == region {
			return r.UnreachableFromHere
		}
	}
	return false
}

// Two entries on one host in one cluster, fra and ams, in front of stand-in routers for eu and
// us; fra reaches eu's router through a link the test cuts, ams directly. With the link
// refused, fra pays the failed attempt once and then sends every eu tenant through us (whose
// router relays home), though ams's answers clear eu's mark in the fleet; ams keeps asking eu
// first. After the heal, fra's own probe (every --read-backoff) reaches eu and fra asks it first
// again within --read-backoff and one probe. /status.json and /metrics say it at fra only.
func TestOwnReachTwoEntries(t *testing.T) {
	sc, err := standin.Start(standin.Config{
		Regions: []standin.Region{{Name: "eu", Addrs: []string{"127.0.0.1:0"}}, {Name: "us", Addrs: []string{"127.0.0.1:0"}}},
		Tenants: map[string]string{"acme": "eu"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	euURL, usURL := sc.URLs("eu")[0], sc.URLs("us")[0]
	eu, _ := url.Parse(euURL)
	link := testutil.NewLink(t, eu.Host)

	const backoff = time.Second
	entry := func(name string, euRouter string, join ...string) *Node {
		c := testConfig(t, "eu", euRouter, "us", usURL)
		c.Node, c.Pop = name, strings.TrimPrefix(name, "entry-")
		c.DefaultRegion = "us"
		c.ReadBackoff = backoff
		c.GossipKey = SecretBytes("0123456789abcdef0123456789abcdef")
		c.GossipBind, c.RPCAddr = "127.0.0.1:0", "127.0.0.1:0"
		c.Join = join
		n, _ := startNode(t, c)
		return n
	}
	ams := entry("entry-ams", euURL)
	fra := entry("entry-fra", "http://"+link.Addr, ams.getCluster().Addr())
	testutil.Eventually(t, 15*time.Second, "two alive members at both", func() bool {
		return len(ams.Members()) == 2 && len(fra.Members()) == 2
	})
	client := &http.Client{Timeout: 10 * time.Second}
	read := func(n *Node) int {
		t.Helper()
		resp, err := client.Get("http://" + n.ClientAddr().String() + "/t/acme/items/0")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Header.Get("Fenec-Shard") != "1" {
			t.Fatalf("read at %s: %d without Fenec-Shard", n.cfg.Node, resp.StatusCode)
		}
		return resp.StatusCode
	}
	read(fra) // learns acme's home, eu (through us: the default region), and gossips it
	testutil.Eventually(t, 10*time.Second, "acme's home at ams", func() bool {
		_, ok := ams.homes.Lookup("acme")
		return ok
	})
	read(ams)

	link.Set(t, testutil.LinkRefused)
	fraEU := attemptsAt(t, fra, "eu")
	read(fra) // into the cut: refused, then through us
	if attemptsAt(t, fra, "eu") == fraEU || !unreachableFromHere(fra, "eu") {
		t.Fatalf("fra's first read after the cut: eu attempts %d -> %d, unreachable from here %v; want asked and unreachable",
			fraEU, attemptsAt(t, fra, "eu"), unreachableFromHere(fra, "eu"))
	}
	if unreachableFromHere(ams, "eu") {
		t.Fatal("eu unreachable from ams: the reach was shared")
	}
	if v := scrapeLabeled(metricsText(t, fra), "fenec_entry_region_unreachable", "region", "eu"); v != 1 {
		t.Errorf("fra's fenec_entry_region_unreachable{region=\"eu\"} = %v, want 1", v)
	}
	if v := scrapeLabeled(metricsText(t, ams), "fenec_entry_region_unreachable", "region", "eu"); v != 0 {
		t.Errorf("ams's fenec_entry_region_unreachable{region=\"eu\"} = %v, want 0", v)
	}

	// While the cut holds, past several read backoffs and probes: fra never asks eu, ams asks it
	// first (all but at most one read, the one the fleet mark of fra's failure may reorder).
	fraEU, amsEU := attemptsAt(t, fra, "eu"), attemptsAt(t, ams, "eu")
	const reads = 6
	for range reads {
		read(fra)
		read(ams)
		time.Sleep(backoff / 2) // real time: the node's probes run on the system clock
	}
	if n := attemptsAt(t, fra, "eu"); n != fraEU {
		t.Errorf("fra asked eu %d times during the cut after its first failure; want 0 (asked last)", n-fraEU)
	}
	if n := attemptsAt(t, ams, "eu") - amsEU; n < reads-1 {
		t.Errorf("ams asked eu first in %d of %d reads during fra's cut; want all but at most one", n, reads)
	}
	if !unreachableFromHere(fra, "eu") {
		t.Fatal("fra's reach ended during the cut (another entry's answers, or a probe into the cut)")
	}

	link.Set(t, testutil.LinkUp)
	healed := time.Now()
	took := testutil.Eventually(t, backoff+5*time.Second, "eu reached from fra again", func() bool { return !unreachableFromHere(fra, "eu") })
	if limit := backoff + time.Second; took > limit {
		t.Errorf("eu reached from fra again %v after the heal; want within --read-backoff (%v) and one probe", took, backoff)
	}
	fraEU = attemptsAt(t, fra, "eu")
	read(fra)
	if attemptsAt(t, fra, "eu") != fraEU+1 {
		t.Errorf("fra did not ask eu first after the heal (%v ago)", time.Since(healed))
	}
}
