package node

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"image"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec/fenec-entry/gossip"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/testutil"
	"github.com/fenec/fenec-entry/proxy"
)

// fakeStatus is a cluster in every state the page shows: members alive, leaving, left and
// failed (one of another version, one with a name that is HTML), a marked region with a
// failing router, a router never asked, homes of both sources and gossip traffic.
func fakeStatus() Status {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return Status{
		At: at, Pop: "fra", Continent: "EU", Node: "entry-fra", Version: "v1.4.0",
		Started: at.Add(-(3*time.Hour + 12*time.Minute)), Ready: true, Inflight: 1234, Gossip: true,
		GossipUp: true, GossipState: "alive",
		Members: []MemberStatus{
			{Name: "entry-sin", Addr: "10.0.3.1:7946", State: "failed", Pop: "sin", Continent: "AS", Version: "v1.4.0"},
			{Name: "entry-fra", Addr: "10.0.1.1:7946", State: "alive", Pop: "fra", Continent: "EU", Version: "v1.4.0"},
			{Name: "entry-iad", Addr: "10.0.2.1:7946", State: "alive", Pop: "iad", Continent: "NA", Version: "v1.3.9"},
			{Name: "entry-syd", Addr: "10.0.4.1:7946", State: "left", Pop: "syd", Continent: "OC", Version: "v1.4.0"},
			{Name: "<script>alert(1)</script>", Addr: "10.0.5.1:7946", State: "leaving", Pop: "gru", Continent: "SA", Version: "v1.4.0"},
		},
		Regions: []RegionStatus{
			{Name: "eu", Routers: []string{"https://eu-1.example:8443", "https://eu-2.example:8443"},
				RouterStates: []RouterStatus{
					{URL: "https://eu-1.example:8443", State: "up", LastOutcome: "answer", LastStatus: 200, LastAt: at.Add(-2 * time.Second)},
					{URL: "https://eu-2.example:8443", State: "unknown"},
				}},
			{Name: "us", Routers: []string{"https://us-1.example:8443", "https://us-2.example:8443"}, Marked: true, MarkedForReads: true,
				RouterStates: []RouterStatus{
					{URL: "https://us-1.example:8443", State: "failing", LastOutcome: "never_made", LastAt: at.Add(-4 * time.Second), Failures: 17},
					{URL: "https://us-2.example:8443", State: "failing", LastOutcome: "shard_5xx", LastStatus: 503, LastAt: at.Add(-3 * time.Second), Failures: 2},
				}},
		},
		Marks: []MarkStatus{{Region: "us", Observer: "entry-iad", FailedAt: at.Add(-5 * time.Second), ReadsUntil: at.Add(5 * time.Second)}},
		Homes: HomesStatus{Held: 1500, Local: 1000, Gossip: 500, Capacity: 100000, Evicted: 3},
		Traffic: &GossipTraffic{WindowSeconds: 60, SentPerSec: 0.4, ReceivedPerSec: 1.25, DuplicatesPerSec: 2.5, DroppedPerSec: 0,
			Sent: 24, Received: 75, Duplicates: 150},
	}
}

// rowOf returns the table row of the page that contains needle.
func rowOf(t *testing.T, page, needle string) string {
	t.Helper()
	for _, row := range regexp.MustCompile(`(?s)<tr>.*?</tr>`).FindAllString(page, -1) {
		if strings.Contains(row, needle) {
			return row
		}
	}
	t.Fatalf("no table row contains %q", needle)
	return ""
}

func TestStatusPageRender(t *testing.T) {
	var buf bytes.Buffer
	if err := renderStatus(&buf, fakeStatus()); err != nil {
		t.Fatal(err)
	}
	page := buf.String()

	for _, want := range []string{
		`<meta http-equiv="refresh" content="5">`,
		`<span id="node">entry-fra</span> <span class="badge ok">ready</span>`,
		"PoP <b>fra</b>", "continent <b>EU</b>", "version <b>v1.4.0</b>", "up <b>3h 12m</b>", "<b>1,234</b> in flight",
		"2 <small>of 5 alive</small>",    // members card
		"1 <small>of 2 unmarked</small>", // regions card
		"routers: 1 up · 2 failing · 1 not asked yet", "0 up · 2 failing", "1.5% full",
		"1,500 <small>of 100,000</small>", "local 1,000 · gossip 500",
		"0.40 <small>sent</small> 1.25 <small>received</small>", "2.50 duplicate", "over the last 1m 00s",
		`<div class="region marked" id="region-us">`, `<span class="badge warn">marked</span>`,
		"asked last by every request (failed at entry-iad)",
		"&lt;script&gt;alert(1)&lt;/script&gt;",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>") {
		t.Error("a member name went into the page unescaped")
	}

	// Members: this entry first, each state its colour, another version flagged.
	for name, want := range map[string]string{
		"entry-fra":                             `<span class="badge ok">alive</span>`,
		"entry-iad":                             `<span class="badge ok">alive</span>`,
		"entry-sin":                             `<span class="badge bad">failed</span>`,
		"entry-syd":                             `<span class="badge off">left</span>`,
		"&lt;script&gt;alert(1)&lt;/script&gt;": `<span class="badge warn">leaving</span>`,
	} {
		if row := rowOf(t, page, `<span class="mono">`+name+"</span>"); !strings.Contains(row, want) {
			t.Errorf("member %s: row lacks %q:\n%s", name, want, row)
		}
	}
	if !strings.Contains(rowOf(t, page, `<span class="mono">entry-fra</span>`), "this entry") {
		t.Error("this entry is not flagged as such")
	}
	if row := rowOf(t, page, `<span class="mono">entry-iad</span>`); !strings.Contains(row, `class="mono diff"`) {
		t.Errorf("another version is not flagged:\n%s", row)
	}
	if i, j := strings.Index(page, "entry-fra</span><span class=\"self\">"), strings.Index(page, `<span class="mono">entry-iad</span>`); i < 0 || j < i {
		t.Error("this entry is not listed first")
	}

	// Routers: up, failing with their last answer, never asked.
	for url, wants := range map[string][]string{
		"eu-1.example": {`badge ok">up`, ">answer<", ">200<", "2s ago", ">0<"},
		"eu-2.example": {`badge off">unknown`, "never"},
		"us-1.example": {`badge bad">failing`, ">never_made<", "4s ago", `<span class="fail">17</span>`},
		"us-2.example": {`badge bad">failing`, ">shard_5xx<", ">503<", "3s ago"},
	} {
		row := rowOf(t, page, url)
		for _, w := range wants {
			if !strings.Contains(row, w) {
				t.Errorf("router %s: row lacks %q:\n%s", url, w, row)
			}
		}
	}
	// Marks.
	if row := rowOf(t, page, "entry-iad</td>"); !strings.Contains(row, "5s ago") || !strings.Contains(row, "last for 5s") ||
		!strings.Contains(row, "last until a router answers") {
		t.Errorf("mark row:\n%s", row)
	}
}

func TestStatusPageStates(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Status)
		want   []string
	}{
		{"draining", func(s *Status) { s.Draining, s.Ready = true, false }, []string{`<span class="badge bad">draining</span>`}},
		{"not ready", func(s *Status) { s.Ready = false }, []string{`<span class="badge warn">not ready</span>`}},
		{"gossip off", func(s *Status) { s.Gossip, s.Members, s.Traffic = false, nil, nil },
			[]string{"gossip off", "this entry serves alone", "Gossip is off: no events."}},
		{"gossip down", func(s *Status) { s.GossipUp, s.GossipState, s.Members = false, "shutdown", nil },
			[]string{`<span class="badge bad" id="gossip-down">gossip down</span>`, "serf shutdown: starting a fresh serf",
				"Gossip is down (serf shutdown): no member is listed."}},
		{"left", func(s *Status) { s.GossipUp, s.GossipState = false, "left" },
			[]string{"gossip down", "this entry left the cluster"}},
		{"rates measuring", func(s *Status) { s.Traffic = &GossipTraffic{Sent: 2} }, []string{"measuring"}},
		{"dropping", func(s *Status) { s.Traffic.DroppedPerSec = 3 }, []string{`<span class="fail">3.00 dropped</span>`}},
		{"failing past the read backoff", func(s *Status) {
			s.Regions[1].MarkedForReads = false
			s.Marks[0].FailedAt, s.Marks[0].ReadsUntil = s.At.Add(-time.Minute), s.At.Add(-50*time.Second)
		}, []string{"asked last by plain writes; reads ask it first again (failed at entry-iad)", "1m 00s ago", ">first again<"}},
		{"no marks", func(s *Status) { s.Marks, s.Regions[1].Marked, s.Regions[1].MarkedForReads = nil, false, false },
			[]string{"No live mark", "2 <small>of 2 unmarked</small>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fakeStatus()
			tt.change(&s)
			var buf bytes.Buffer
			if err := renderStatus(&buf, s); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("page lacks %q", w)
				}
			}
		})
	}
}

func TestFormat(t *testing.T) {
	for in, want := range map[any]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", int64(-1234): "-1,234", uint64(100000): "100,000"} {
		if got := formatCount(in); got != want {
			t.Errorf("formatCount(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[time.Duration]string{0: "0s", 45 * time.Second: "45s", 185 * time.Second: "3m 05s",
		2*time.Hour + 10*time.Minute: "2h 10m", 76 * time.Hour: "3d 4h"} {
		if got := formatDuration(in); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]string{0: "0", 0.004: "<0.01", 0.4: "0.40", 12.34: "12.3", 340.2: "340"} {
		if got := formatRate(in); got != want {
			t.Errorf("formatRate(%v) = %q, want %q", in, got, want)
		}
	}
}

// trafficCounters are the gossip counters, as package gossip registers them.
type trafficCountersForTest struct {
	sent, recv, directSent, invalid prometheus.Counter
	direct, dropped                 *prometheus.CounterVec
}

func trafficRegistry() (*prometheus.Registry, trafficCountersForTest) {
	reg := prometheus.NewRegistry()
	c := trafficCountersForTest{
		sent:       prometheus.NewCounter(prometheus.CounterOpts{Name: "fenec_entry_gossip_events_sent_total", Help: "h"}),
		recv:       prometheus.NewCounter(prometheus.CounterOpts{Name: "fenec_entry_gossip_events_received_total", Help: "h"}),
		directSent: prometheus.NewCounter(prometheus.CounterOpts{Name: "fenec_entry_gossip_direct_packets_sent_total", Help: "h"}),
		invalid:    prometheus.NewCounter(prometheus.CounterOpts{Name: "fenec_entry_gossip_events_invalid_total", Help: "h"}),
		direct: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fenec_entry_gossip_direct_packets_received_total", Help: "h"},
			[]string{"result"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fenec_entry_gossip_events_dropped_total", Help: "h"},
			[]string{"reason"}),
	}
	reg.MustRegister(c.sent, c.recv, c.directSent, c.invalid, c.direct, c.dropped)
	return reg, c
}

// TestTrafficCountersExist pins that every counter the status page sums is one package
// gossip registers (a renamed metric would silently read 0).
func TestTrafficCountersExist(t *testing.T) {
	reg := prometheus.NewRegistry()
	table, _ := homes.New(homes.Config{Regions: []string{"eu"}, Origin: "n"})
	if _, err := gossip.New(gossip.Config{NodeName: "n", Insecure: true, Table: table, Regions: []string{"eu"},
		Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	for name := range trafficCounters {
		if !have[name] {
			t.Errorf("the status page sums %s, which gossip does not register", name)
		}
	}
}

func TestTrafficRates(t *testing.T) {
	reg, c := trafficRegistry()
	start := time.Unix(1_800_000_000, 0)
	var tr trafficRates

	// Just after the start: totals, no rates.
	c.sent.Add(1)
	if g := tr.rates(reg, start.Add(500*time.Millisecond), start); g.WindowSeconds != 0 || g.Sent != 1 {
		t.Errorf("at 0.5 s: %+v, want no window and 1 sent", g)
	}
	// Since the start, when every counter was 0: serf events and direct packets both count.
	c.sent.Add(4)
	c.directSent.Add(5)
	c.recv.Add(5)
	c.direct.WithLabelValues("new").Add(15)
	c.direct.WithLabelValues("duplicate").Add(30)
	c.direct.WithLabelValues("invalid").Add(1)
	c.invalid.Add(1)
	c.dropped.WithLabelValues("send").Add(1)
	c.dropped.WithLabelValues("recv_queue_full").Add(1)
	c.dropped.WithLabelValues("direct_write").Add(1)
	g := tr.rates(reg, start.Add(10*time.Second), start)
	if g.WindowSeconds != 10 || g.SentPerSec != 1 || g.ReceivedPerSec != 2 || g.DuplicatesPerSec != 3 ||
		g.DroppedPerSec != 0.5 || g.Dropped != 5 || g.Received != 20 || g.Duplicates != 30 {
		t.Errorf("at 10 s: %+v", g)
	}
	// Looked at every 5 s for two minutes, 1 event sent a second: the window is the last minute.
	now := start.Add(10 * time.Second)
	for range 24 {
		now = now.Add(5 * time.Second)
		c.sent.Add(5)
		g = tr.rates(reg, now, start)
	}
	if g.WindowSeconds != 60 || g.SentPerSec != 1 || g.ReceivedPerSec != 0 || g.DroppedPerSec != 0 {
		t.Errorf("after two minutes of looks: %+v, want 1 sent/s over 60 s", g)
	}
	// A pause of ten minutes: the rate is over the pause, since the last look.
	c.sent.Add(60)
	g = tr.rates(reg, now.Add(10*time.Minute), start)
	if g.WindowSeconds != 600 || g.SentPerSec != 0.1 {
		t.Errorf("after a pause: %+v, want 0.1 sent/s over 600 s", g)
	}
	// Not started: totals only.
	if g := new(trafficRates).rates(reg, now, time.Time{}); g.WindowSeconds != 0 || g.Sent != 190 {
		t.Errorf("not started: %+v", g)
	}
}

// TestStatusPageServed: a node without gossip serves /status as HTML, and /status.json
// carries the routers' state.
func TestStatusPageServed(t *testing.T) {
	up := newRouter(t, "eu", nil)
	down := newRouter(t, "us", nil)
	down.Close()
	n, _ := startNode(t, testConfig(t, "eu", up.URL, "us", down.URL))
	n.homes.Learn("globex", 1) // us: asked first, never_made, then eu answers
	client := &http.Client{Timeout: 5 * time.Second}
	base, admin := "http://"+n.ClientAddr().String(), "http://"+n.AdminAddr().String()
	get(t, client, base+"/t/globex/items/1")

	resp, page := get(t, client, admin+"/status")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("/status = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	for _, w := range []string{"entry-test", `id="region-eu"`, `id="region-us"`, "never_made", "Gossip is off"} {
		if !strings.Contains(page, w) {
			t.Errorf("/status lacks %q", w)
		}
	}
	if row := rowOf(t, page, down.URL); !strings.Contains(row, "failing") {
		t.Errorf("the closed router's row:\n%s", row)
	}

	_, body := get(t, client, admin+"/status.json")
	var s Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Regions) != 2 || len(s.Regions[1].RouterStates) != 1 {
		t.Fatalf("/status.json regions: %+v", s.Regions)
	}
	if rs := s.Regions[1].RouterStates[0]; rs.State != "failing" || rs.LastOutcome != "never_made" || rs.Failures != 1 {
		t.Errorf("us router: %+v", rs)
	}
	if rs := s.Regions[0].RouterStates[0]; rs.State != "up" || rs.LastStatus != 200 {
		t.Errorf("eu router: %+v", rs)
	}
	if !s.Regions[1].Marked || s.Traffic != nil || s.At.IsZero() {
		t.Errorf("/status.json: marked %v, traffic %+v, at %v", s.Regions[1].Marked, s.Traffic, s.At)
	}
}

// aheadClock is the real clock, advanced by the test: timers and sockets keep real time,
// and the status page sees time pass at once.
type aheadClock struct{ ahead atomic.Int64 }

func (c *aheadClock) Now() time.Time          { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *aheadClock) advance(d time.Duration) { c.ahead.Add(int64(d)) }

var statusScreenshot = flag.String("status-screenshot", "",
	"TestStatusPageChromium copies its screenshot of /status to this PNG file (make screenshot)")

// chromiumFlags run Debian's chromium headless, as root in a container, with nothing
// fetched from the network but the page.
func chromiumFlags(t *testing.T) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--user-data-dir=" + t.TempDir()}
}

func runChromium(t *testing.T, chromium string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, append(chromiumFlags(t), args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// TestStatusPageChromium renders /status of a real entry in headless Chromium: four entries
// in one encrypted gossip cluster on loopback (one of them drained: left; one of another
// version), regions eu (two routers up), us (one router down: failing) and ap (its only
// router down: marked). It checks the DOM Chromium built and the screenshot it took.
func TestStatusPageChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed, and CI must check /status in a browser (.ci/run installs it)")
		}
		t.Skip("chromium is not installed (apt-get install -y chromium): /status is not checked in a browser")
	}
	closed := func(region string) string {
		s := newRouter(t, region, nil)
		s.Close()
		return s.URL
	}
	regions := map[string][]string{
		"eu": {newRouter(t, "eu", nil).URL, newRouter(t, "eu", nil).URL},
		"us": {closed("us"), newRouter(t, "us", nil).URL},
		"ap": {closed("ap")},
	}
	var routers []string
	for _, name := range []string{"eu", "us", "ap"} {
		for _, u := range regions[name] {
			routers = append(routers, name, u)
		}
	}
	clock := &aheadClock{}
	entry := func(name, pop, continent, version string, join ...string) *Node {
		c := testConfig(t, routers...)
		c.Clock = clock
		c.Routers = mergeRegions(c.Routers)
		c.Node, c.Pop, c.Continent, c.Version = name, pop, continent, version
		c.GossipKey = SecretBytes("0123456789abcdef0123456789abcdef")
		c.GossipBind, c.RPCAddr = "127.0.0.1:0", "127.0.0.1:0"
		c.Join = join
		n, _ := startNode(t, c)
		return n
	}
	fra := entry("entry-fra", "fra", "EU", "v1.4.0")
	seed := fra.getCluster().Addr()
	iad := entry("entry-iad", "iad", "NA", "v1.4.0", seed)
	entry("entry-sin", "sin", "AS", "v1.3.9", seed)
	syd := entry("entry-syd", "syd", "OC", "v1.4.0", seed)
	members := func(n *Node, state string) int {
		k := 0
		for _, m := range n.Status().Members {
			if m.State == state {
				k++
			}
		}
		return k
	}
	testutil.Eventually(t, 15*time.Second, "four alive members at entry-fra", func() bool { return members(fra, "alive") == 4 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := syd.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "entry-syd left at entry-fra", func() bool { return members(fra, "left") == 1 })

	// Traffic at entry-fra: homes learned here (gossiped to the others), a failing router
	// of us, and ap marked.
	client := &http.Client{Timeout: 5 * time.Second}
	base := "http://" + fra.ClientAddr().String()
	for _, tenant := range []string{"acme", "initech", "hooli", "piedpiper"} {
		get(t, client, base+"/t/"+tenant+"/items/1")
	}
	fra.homes.Learn("globex", 1) // us
	get(t, client, base+"/t/globex/items/1")
	fra.homes.Learn("umbrella", 2) // ap
	get(t, client, base+"/t/umbrella/items/1")
	testutil.Eventually(t, 5*time.Second, "homes gossiped to entry-iad", func() bool { return iad.Status().Homes.Gossip >= 4 })
	clock.advance(1100 * time.Millisecond) // the gossip rates need a window of a second

	url := "http://" + fra.AdminAddr().String() + "/status"
	dom := string(runChromium(t, chromium, "--dump-dom", url))
	for _, want := range []string{"entry-fra", "entry-iad", "entry-sin", "entry-syd", `id="region-eu"`,
		`id="region-us"`, `id="region-ap"`, ">left<", ">failing<", ">marked<", "never_made"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the DOM Chromium built lacks %q", want)
		}
	}

	out := filepath.Join(t.TempDir(), "status.png")
	runChromium(t, chromium, "--screenshot="+out, "--window-size=1280,900", url)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	if len(data) < 20<<10 {
		t.Errorf("screenshot is %d bytes: too small for the page", len(data))
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 900 {
		t.Errorf("screenshot is %v, want 1280x900", b)
	}
	if colours := countColours(img); colours < 8 {
		t.Errorf("screenshot has %d colours: the page did not render", colours)
	}
	if *statusScreenshot != "" {
		if err := os.WriteFile(*statusScreenshot, data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", *statusScreenshot)
	}
}

// mergeRegions joins regions of the same name (testConfig makes one per router), in order.
func mergeRegions(in []proxy.Region) []proxy.Region {
	var out []proxy.Region
	at := map[string]int{}
	for _, r := range in {
		if i, ok := at[r.Name]; ok {
			out[i].Routers = append(out[i].Routers, r.Routers...)
			continue
		}
		at[r.Name] = len(out)
		out = append(out, r)
	}
	return out
}

// countColours counts the distinct colours of img, up to 64.
func countColours(img image.Image) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y && len(seen) < 64; y += 3 {
		for x := b.Min.X; x < b.Max.X && len(seen) < 64; x += 3 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
		}
	}
	return len(seen)
}
