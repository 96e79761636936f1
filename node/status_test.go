package node

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/gossip"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/testutil"
	"github.com/fenec/fenec-entry/proxy"
	"github.com/fenec/fenec-entry/status"
)

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
	if row := testutil.TableRow(t, page, down.URL); !strings.Contains(row, "failing") {
		t.Errorf("the closed router's row:\n%s", row)
	}

	_, body := get(t, client, admin+"/status.json")
	var s status.Status
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
	"TestStatusPageChromium copies its screenshot of /status at 1280 px to this PNG file, and the one at 390 px beside it (NAME-390.png; make screenshot)")

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
// version), regions eu (two routers up), us (one router resetting: failing) and ap (its only
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
	// A router that takes a request and closes without an answer: its last outcome is the
	// page's longest code, may_have_reached.
	resets := func(region string) string {
		return newRouter(t, region, func(w http.ResponseWriter, _ *http.Request) {
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
		}).URL
	}
	regions := map[string][]string{
		"eu": {newRouter(t, "eu", nil).URL, newRouter(t, "eu", nil).URL},
		"us": {resets("us"), newRouter(t, "us", nil).URL},
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
	// syd's join is done once it knows the others too (fra learns of syd first, in the middle of
	// the join's exchange): a leave before that reaches no one, and fra would see syd fail.
	testutil.Eventually(t, 15*time.Second, "four alive members at entry-fra and entry-syd", func() bool {
		return members(fra, "alive") == 4 && members(syd, "alive") == 4
	})
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
	// iad's latency tag comes from its probe rounds, every 5 s, each bounded by 5 s: on a
	// loaded machine the first round's probes can time out, and the tag waits for a later one
	// (it failed twice within 15 s while other simulations ran).
	testutil.Eventually(t, 30*time.Second, "entry-iad's latency row at entry-fra", func() bool {
		for _, m := range fra.Status().Members {
			if m.Name == "entry-iad" && len(m.LatencyMS) > 0 {
				return true
			}
		}
		return false
	})

	url := "http://" + fra.AdminAddr().String() + "/status"
	dom := string(runChromium(t, chromium, "--dump-dom", url))
	for _, want := range []string{"entry-fra", "entry-iad", "entry-sin", "entry-syd", `id="region-eu"`,
		`id="region-us"`, `id="region-ap"`, ">left<", ">failing<", ">marked · unreachable from here<", "never_made", "may_have_reached", `id="latency"`, "td class=\"num mono best\"",
		"homes travel: straight to every member"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the DOM Chromium built lacks %q", want)
		}
	}

	// The page fits a phone (390 px) and a desktop window (1280 px): nothing reaches past the
	// window's right edge or out of its table cell, and no table header is printed over another.
	for _, size := range []struct{ w, h int }{{390, 844}, {1280, 900}} {
		if bad := layoutAt(t, chromium, url, size.w, size.h); bad != "" {
			t.Errorf("at %d px: %s", size.w, bad)
		}
	}

	var data []byte
	for _, size := range []struct{ w, h int }{{390, 844}, {1280, 900}} {
		out := filepath.Join(t.TempDir(), "status.png")
		runChromium(t, chromium, "--screenshot="+out, fmt.Sprintf("--window-size=%d,%d", size.w, size.h), url)
		png1, err := os.ReadFile(out)
		if err != nil {
			t.Fatalf("no screenshot at %d px: %v", size.w, err)
		}
		if len(png1) < 20<<10 {
			t.Errorf("screenshot at %d px is %d bytes: too small for the page", size.w, len(png1))
		}
		img, err := png.Decode(bytes.NewReader(png1))
		if err != nil {
			t.Fatalf("screenshot at %d px: %v", size.w, err)
		}
		if b := img.Bounds(); b.Dx() != size.w || b.Dy() != size.h {
			t.Errorf("screenshot is %v, want %dx%d", b, size.w, size.h)
		}
		if colours := countColours(img); colours < 8 {
			t.Errorf("screenshot at %d px has %d colours: the page did not render", size.w, colours)
		}
		if size.w == 390 && *statusScreenshot != "" {
			phone := strings.TrimSuffix(*statusScreenshot, ".png") + "-390.png"
			if err := os.WriteFile(phone, png1, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", phone)
		}
		data = png1 // the last, 1280 px, is docs/status.png
	}
	if *statusScreenshot != "" {
		if err := os.WriteFile(*statusScreenshot, data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", *statusScreenshot)
	}
}

// layoutAt renders the page at url in a window w by h px and returns what is wrong with its
// layout ("" if nothing): the page wider than the window, the elements past its right edge,
// the table cells whose content overflows them, and the table headers whose text overlaps
// another's in the same row (or spills out of its own cell). The page (its CSS inline) is
// served again from a test server, in an iframe of w by h px (headless Chromium makes no
// window narrower than 500 px, a phone's is 390), and measured from the page around it with
// getBoundingClientRect.
func layoutAt(t *testing.T, chromium, url string, w, h int) string {
	t.Helper()
	_, page := get(t, http.DefaultClient, url)
	const probe = `<script>addEventListener("load", () => {
  const win = document.getElementById("page").contentWindow, document_ = document, w = win.innerWidth, past = [], heads_ = [];
  { const document = win.document;
  const name = e => e.tagName.toLowerCase() + (e.className ? "." + e.className : "") + " '" + e.textContent.trim().slice(0, 20) + "'";
  for (const e of document.querySelectorAll("body *")) {
    const r = e.getBoundingClientRect();
    if (r.width > 0 && (r.right > w + 1 || r.left < -1)) past.push(name(e) + " past the edge (" + Math.round(r.left) + "-" + Math.round(r.right) + ")");
    if ((e.tagName == "TH" || e.tagName == "TD") && e.scrollWidth > e.clientWidth + 1)
      past.push(name(e) + " overflows its cell");
  }
  // An outcome code (may_have_reached, never_made) is one word: never broken across lines.
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let t = walk.nextNode(); t; t = walk.nextNode()) {
    for (const m of t.data.matchAll(/[a-z]+(?:_[a-z]+)+/g)) {
      const range = document.createRange();
      range.setStart(t, m.index);
      range.setEnd(t, m.index + m[0].length);
      const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (lines.size > 1) past.push("'" + m[0] + "' broken across " + lines.size + " lines");
    }
  }
  const overlap = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
  for (const tr of document.querySelectorAll("thead tr")) {
    const heads = [];
    for (const th of tr.children) {
      const box = th.getBoundingClientRect();
      if (box.width == 0 || box.height == 0) continue; // not shown at this width
      const range = document.createRange();
      range.selectNodeContents(th);
      const text = range.getBoundingClientRect();
      if (text.left < box.left - 0.5 || text.right > box.right + 0.5) heads_.push(name(th) + " spills out of its header cell");
      heads.push({th, text});
    }
    for (let i = 0; i < heads.length; i++)
      for (let j = i + 1; j < heads.length; j++)
        if (overlap(heads[i].text, heads[j].text)) heads_.push(name(heads[i].th) + " overlaps " + name(heads[j].th));
  }
  past.unshift(...heads_); // the headers first: they are what a reader cannot read
  if (w != WIDTH) past.unshift("the page's window is " + w + " px wide, not WIDTH");
  document_.body.dataset.fit = document.documentElement.scrollWidth <= w && past.length == 0 ? "yes" :
    "scrollWidth " + document.documentElement.scrollWidth + " in a window of " + w + "; " + past.slice(0, 10).join("; ");
  }
});</script>`
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/page" {
			io.WriteString(rw, page)
			return
		}
		fmt.Fprintf(rw, `<!DOCTYPE html><html><body style="margin:0"><iframe id="page" src="/page" width="%d" height="%d" style="border:0; display:block"></iframe>%s</body></html>`,
			w, h, strings.ReplaceAll(probe, "WIDTH", strconv.Itoa(w)))
	}))
	defer srv.Close()
	dom := string(runChromium(t, chromium, fmt.Sprintf("--window-size=%d,%d", max(w, 500)+20, h+20), "--virtual-time-budget=3000", "--dump-dom", srv.URL))
	_, after, ok := strings.Cut(dom, `data-fit="`)
	if !ok {
		t.Fatalf("the probe did not run: %.300s", dom)
	}
	fit, _, _ := strings.Cut(after, `"`)
	if fit == "yes" {
		return ""
	}
	return html.UnescapeString(fit)
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

// The status says how homes travel: straight to every member in a small cluster, and nothing
// while gossip is off.
func TestStatusSaysHowHomesTravel(t *testing.T) {
	eu := newRouter(t, "eu", nil)
	alone, _ := startNode(t, testConfig(t, "eu", eu.URL))
	if r := alone.Status().Relays; r != nil {
		t.Errorf("gossip off, and the status says homes travel %+v", *r)
	}
	c := testConfig(t, "eu", eu.URL)
	c.GossipKey = SecretBytes("0123456789abcdef0123456789abcdef")
	c.GossipBind, c.RPCAddr = "127.0.0.1:0", "127.0.0.1:0"
	n, _ := startNode(t, c)
	testutil.Eventually(t, 10*time.Second, "gossip up", func() bool { return n.Status().GossipUp })
	r := n.Status().Relays
	if r == nil || r.On || r.Groups != 0 || r.Group != 0 {
		t.Errorf("one entry, and the status says homes travel %+v, want straight to every member", r)
	}
}

// The status's table digest is made again only when the homes held changed, and is then the
// digest of the table as it is.
func TestStatusDigestOnlyOnAChange(t *testing.T) {
	calls := 0
	digestOf = func(tb *homes.Table) string { calls++; return gossip.TableDigest(tb) }
	t.Cleanup(func() { digestOf = gossip.TableDigest })
	table, err := homes.New(homes.Config{Regions: []string{"eu", "us"}, Origin: "n"})
	if err != nil {
		t.Fatal(err)
	}
	var d tableDigest
	empty := d.of(table)
	if d.of(table) != empty || calls != 1 {
		t.Errorf("unchanged table: %d digests made, want 1", calls)
	}
	table.Learn("acme", 1)
	if got := d.of(table); got == empty || got != gossip.TableDigest(table) || calls != 2 {
		t.Errorf("after a learn: digest %s (table's %s), %d made, want the new one made once more",
			got, gossip.TableDigest(table), calls)
	}
	d.of(table)
	if calls != 2 {
		t.Errorf("%d digests made for two looks at one table", calls)
	}
}
