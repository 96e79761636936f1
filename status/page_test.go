package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
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
			{Name: "entry-fra", Addr: "10.0.1.1:7946", State: "alive", Pop: "fra", Continent: "EU", Version: "v1.4.0",
				LatencyMS: map[string]float64{"eu": 9.5, "us": 88}},
			{Name: "entry-iad", Addr: "10.0.2.1:7946", State: "alive", Pop: "iad", Continent: "NA", Version: "v1.3.9",
				LatencyMS: map[string]float64{"eu": 81, "us": 4.2}},
			{Name: "entry-syd", Addr: "10.0.4.1:7946", State: "left", Pop: "syd", Continent: "OC", Version: "v1.4.0"},
			{Name: "<script>alert(1)</script>", Addr: "10.0.5.1:7946", State: "leaving", Pop: "gru", Continent: "SA", Version: "v1.4.0"},
		},
		Regions: []RegionStatus{
			{Name: "eu", Routers: []string{"https://eu-1.example:8443", "https://eu-2.example:8443"}, LatencyMS: 9.5, Measured: true,
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
		Closest: "eu",
		Marks:   []MarkStatus{{Region: "us", Observer: "entry-iad", FailedAt: at.Add(-5 * time.Second), ReadsUntil: at.Add(5 * time.Second)}},
		Homes:   HomesStatus{Held: 1500, Local: 1000, Gossip: 500, Capacity: 100000, Evicted: 3},
		Traffic: &GossipTraffic{WindowSeconds: 60, SentPerSec: 0.4, ReceivedPerSec: 1.25, DuplicatesPerSec: 2.5, DroppedPerSec: 0,
			Sent: 24, Received: 75, Duplicates: 150},
	}
}

func TestStatusPageRender(t *testing.T) {
	var buf bytes.Buffer
	if err := Render(&buf, fakeStatus()); err != nil {
		t.Fatal(err)
	}
	page := buf.String()

	for _, want := range []string{
		`<meta http-equiv="refresh" content="5">`,
		`<span id="node">entry-fra</span> <span class="badge ok">ready</span>`,
		"PoP <b>fra</b>", "continent <b>EU</b>", "version <b>v1.4.0</b>", "up <b>3h 12m</b>", "<b>1,234</b> in flight",
		"2 <small>of 3 alive</small>", // members card: syd left and gru leaving are not counted, sin failed is
		"this entry included; 1 left · 1 leaving cleanly, not counted", "2 alive of 3 · 1 left · 1 leaving",
		"1 <small>of 2 asked in order</small>", // regions card
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
		if row := testutil.TableRow(t, page, `<span class="mono">`+name+"</span>"); !strings.Contains(row, want) {
			t.Errorf("member %s: row lacks %q:\n%s", name, want, row)
		}
	}
	if !strings.Contains(testutil.TableRow(t, page, `<span class="mono">entry-fra</span>`), "this entry") {
		t.Error("this entry is not flagged as such")
	}
	if row := testutil.TableRow(t, page, `<span class="mono">entry-iad</span>`); !strings.Contains(row, `class="mono diff"`) {
		t.Errorf("another version is not flagged:\n%s", row)
	}
	if i, j := strings.Index(page, "entry-fra</span><span class=\"self\">"), strings.Index(page, `<span class="mono">entry-iad</span>`); i < 0 || j < i {
		t.Error("this entry is not listed first")
	}

	// Latency: this entry's row from its own regions, the others' from their tags, each row's
	// lowest marked; failed and left members have no row.
	lat := page[strings.Index(page, `<section id="latency">`):]
	lat = lat[:strings.Index(lat, "</section>")]
	for _, want := range []string{
		`first for a tenant heard nowhere whose continent is not mapped: <span class="mono">eu</span>, the lowest from here`,
		`<th class="num">eu</th><th class="num">us</th>`,
	} {
		if !strings.Contains(lat, want) {
			t.Errorf("latency section lacks %q:\n%s", want, lat)
		}
	}
	fraRow := testutil.TableRow(t, lat, `<span class="muted mono">entry-fra</span>`)
	if !strings.Contains(fraRow, `<td class="num mono best">9.5</td>`) || !strings.Contains(fraRow, `<span class="muted">—</span>`) ||
		!strings.Contains(fraRow, "this entry") {
		t.Errorf("this entry's latency row:\n%s", fraRow)
	}
	iadRow := testutil.TableRow(t, lat, `<span class="muted mono">entry-iad</span>`)
	if !strings.Contains(iadRow, `<td class="num mono">81</td>`) || !strings.Contains(iadRow, `<td class="num mono best">4.2</td>`) {
		t.Errorf("entry-iad's latency row:\n%s", iadRow)
	}
	if strings.Contains(lat, "entry-sin") || strings.Contains(lat, "entry-syd") {
		t.Error("a failed or left member has a latency row")
	}

	// Routers: up, failing with their last answer, never asked.
	for url, wants := range map[string][]string{
		"eu-1.example": {`badge ok">up`, ">answer<", ">200<", "2s ago", ">0<"},
		"eu-2.example": {`badge off">unknown`, "never"},
		"us-1.example": {`badge bad">failing`, ">never_made<", "4s ago", `<span class="fail">17</span>`},
		"us-2.example": {`badge bad">failing`, ">shard_5xx<", ">503<", "3s ago"},
	} {
		row := testutil.TableRow(t, page, url)
		for _, w := range wants {
			if !strings.Contains(row, w) {
				t.Errorf("router %s: row lacks %q:\n%s", url, w, row)
			}
		}
	}
	// Marks.
	if row := testutil.TableRow(t, page, "entry-iad</td>"); !strings.Contains(row, "5s ago") || !strings.Contains(row, "last for 5s") ||
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
		{"direct homes", func(s *Status) { s.Relays = &RelayStatus{DirectBytes: 13_200} },
			[]string{"homes travel: straight to every member, 13,200 B/s (through relays above 20,000 B/s, straight again below 10,000 B/s)"}},
		{"relays", func(s *Status) { s.Relays = &RelayStatus{On: true, Groups: 10, Group: 9} },
			[]string{"homes travel: through relays: 10 groups, this entry's of 9, to which it relays its share of the other groups' homes"}},
		{"a member left cleanly", func(s *Status) {
			s.Members = []MemberStatus{{Name: "entry-fra", State: "alive"}, {Name: "entry-iad", State: "alive"}, {Name: "entry-syd", State: "left"}}
		}, []string{"2 <small>of 2 alive</small>", "1 left cleanly, not counted"}},
		{"the default region, a lower one not clearly closer", func(s *Status) {
			s.Regions = append(s.Regions, RegionStatus{Name: "ap", LatencyMS: 8.5, Measured: true})
		}, []string{`<td class="num mono best">8.5</td>`, `not mapped: <span class="mono">eu</span>, the default region: ap is lower from here, but not clearly`}},
		{"nothing measured yet", func(s *Status) { s.Regions[0].Measured = false },
			[]string{`<span class="mono">eu</span>, the default region: no region is measured from here yet`}},
		{"a failing router in a region answered since", func(s *Status) {
			// ap's only router failed here, and an answer relayed through eu cleared ap's mark:
			// the region is ok, and its router is not shown red beside it.
			s.Regions = append(s.Regions, RegionStatus{Name: "ap", Routers: []string{"https://ap-1.example:8443"},
				RouterStates: []RouterStatus{{URL: "https://ap-1.example:8443", State: "failing", LastOutcome: "may_have_reached",
					LastStatus: 502, LastAt: s.At.Add(-8 * time.Second), Failures: 1}}})
		}, []string{`<span class="badge ok">ok</span> <span class="note">its routers failed here, and the region answered since`,
			`<span class="badge warn">failed here</span>`, "0 up · 1 failed here, region answered since",
			"routers: 1 up · 2 failing · 1 failed here, region answered since · 1 not asked yet"}},
		{"no marks", func(s *Status) { s.Marks, s.Regions[1].Marked, s.Regions[1].MarkedForReads = nil, false, false },
			[]string{"No live mark", "2 <small>of 2 asked in order</small>"}},
		{"unreachable from here, beside no mark", func(s *Status) {
			s.Marks, s.Regions[1].Marked, s.Regions[1].MarkedForReads = nil, false, false
			s.Regions[0].UnreachableFromHere = true
		}, []string{`<div class="region marked" id="region-eu">`, `<span class="badge warn">unreachable from here</span>`,
			"asked last here by every request until this entry reaches a router of it", "1 <small>of 2 asked in order</small>"}},
		{"unreachable from here, beside the fleet's mark", func(s *Status) { s.Regions[1].UnreachableFromHere = true },
			[]string{`<span class="badge warn">marked · unreachable from here</span>`,
				"asked last by every request (failed at entry-iad); this entry"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fakeStatus()
			tt.change(&s)
			var buf bytes.Buffer
			if err := Render(&buf, s); err != nil {
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
	for in, want := range map[float64]string{0: "0 B/s", 13_200.4: "13,200 B/s", 999.5: "1,000 B/s"} {
		if got := formatBytesPerSec(in); got != want {
			t.Errorf("formatBytesPerSec(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]string{0: "0", 0.004: "<0.01", 0.4: "0.40", 12.34: "12.3", 340.2: "340"} {
		if got := formatRate(in); got != want {
			t.Errorf("formatRate(%v) = %q, want %q", in, got, want)
		}
	}
}
