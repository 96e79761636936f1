package status

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The /status page: Status rendered by html/template (which escapes every value: member
// names, tags and router URLs come from peers and flags), one embedded file, no external
// asset and no script. It reloads itself every statusRefresh.

//go:embed templates/status.html
var statusHTML string

const statusRefresh = 5 // seconds, the page's <meta http-equiv="refresh">

var statusTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"num":  formatCount,
	"rate": formatRate,
	"pct":  formatPercent,
	"subf": func(a, b float64) float64 { return max(a-b, 0) },
	"bps":  formatBytesPerSec,
}).Parse(statusHTML))

// WritePage writes s as the /status page. The page is rendered whole before it is written,
// so a template error is a 500 and the error returned (for the caller's log), not half a page.
func WritePage(w http.ResponseWriter, s Status) error {
	var buf bytes.Buffer
	if err := Render(&buf, s); err != nil {
		http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	h.Set("X-Content-Type-Options", "nosniff")
	_, err := w.Write(buf.Bytes())
	return err
}

// WriteJSON writes s as /status.json: indented, never cached.
func WriteJSON(w http.ResponseWriter, s Status) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(s)
}

// Render writes the /status page of s to buf.
func Render(buf *bytes.Buffer, s Status) error {
	return statusTemplate.Execute(buf, newStatusView(s))
}

// statusView is what the template shows: the Status and what is derived from it for people
// (durations, counts, badge classes). Times are relative to Status.At.
type statusView struct {
	S             Status
	Refresh       int
	State         badge // ready, not ready, draining
	Uptime        string
	Started       string
	At            string
	Members       []memberView
	Alive         int
	Counted       int    // members alive, failed or of an unknown state: not those that left or are leaving cleanly
	Departed      string // "1 left · 1 leaving": the clean exits, not counted
	Regions       []regionView
	RegionOK      int
	RouterSummary string // "4 up · 1 failing · 1 not asked yet"
	Marks         []markView
	HomesPct      float64 // held / capacity, in percent
	LocalPct      float64
	Traffic       *trafficView
	LatRegions    []string // the matrix's columns: the configured regions
	LatRows       []latRow // one row a member (this entry alone when gossip is off)
	ClosestWhy    string   // why Closest is first, beside this entry's row of the matrix
}

// latRow is one PoP's row of the latency matrix.
type latRow struct {
	Pop, Name string
	Self      bool
	Cells     []latCell
}

type latCell struct {
	MS    string
	Known bool
	Best  bool // the row's lowest
}

type badge struct{ Class, Text string }

type memberView struct {
	MemberStatus
	Badge        badge
	Self         bool
	OtherVersion bool // another version than this entry's
}

type regionView struct {
	Name    string
	Badge   badge
	Note    string   // what the mark means for its requests
	Summary string   // "1 up · 1 failing"
	Names   []string // DNS names of its routers
	Routers []routerView
}

type routerView struct {
	RouterStatus
	Badge badge
	Ago   string
}

type markView struct {
	MarkStatus
	Ago  string // since the failure
	Left string // until reads ask the region first again; "" once they do
}

type trafficView struct {
	GossipTraffic
	Window string
}

// Badge classes: ok (green), warn (amber), bad (red), off (grey).
var (
	memberBadges = map[string]string{"alive": "ok", "leaving": "warn", "left": "off", "failed": "bad"}
	routerBadges = map[string]string{"up": "ok", "failing": "bad", "unknown": "off"}
)

func newStatusView(s Status) statusView {
	v := statusView{S: s, Refresh: statusRefresh, At: s.At.UTC().Format("15:04:05 UTC")}
	switch {
	case s.Draining:
		v.State = badge{"bad", "draining"}
	case s.Ready:
		v.State = badge{"ok", "ready"}
	default:
		v.State = badge{"warn", "not ready"}
	}
	if !s.Started.IsZero() {
		v.Uptime = formatDuration(s.At.Sub(s.Started))
		v.Started = s.Started.UTC().Format("2006-01-02 15:04:05 UTC")
	}

	// A member that left (a drain, a clean stop) or is leaving is not one missing: the count
	// of alive members is of the others, and the clean exits are said apart.
	var left, leaving int
	for _, m := range s.Members {
		mv := memberView{MemberStatus: m, Self: m.Name == s.Node, OtherVersion: m.Version != s.Version,
			Badge: badge{classOr(memberBadges, m.State), m.State}}
		switch m.State {
		case "alive":
			v.Alive++
			v.Counted++
		case "left":
			left++
		case "leaving":
			leaving++
		default:
			v.Counted++
		}
		v.Members = append(v.Members, mv)
	}
	var gone []string
	if left > 0 {
		gone = append(gone, fmt.Sprintf("%d left", left))
	}
	if leaving > 0 {
		gone = append(gone, fmt.Sprintf("%d leaving", leaving))
	}
	v.Departed = strings.Join(gone, " · ")
	// This entry first, then by name.
	slices.SortStableFunc(v.Members, func(a, b memberView) int {
		if a.Self != b.Self {
			if a.Self {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})

	v.latency(s)

	marks := map[string][]MarkStatus{}
	for _, m := range s.Marks {
		marks[m.Region] = append(marks[m.Region], m)
		v.Marks = append(v.Marks, markView{MarkStatus: m, Ago: ago(s.At, m.FailedAt), Left: timeLeft(s.At, m.ReadsUntil)})
	}
	var all routerCounts
	for _, r := range s.Regions {
		rv := regionView{Name: r.Name, Badge: badge{"ok", "ok"}, Names: r.Names}
		// A region neither marked nor unreachable from here, none of whose routers answered
		// this entry last, has answered since they failed here: through another region's
		// router (a relayed answer clears the fleet's mark) or to this entry's probe (which
		// clears its own reach and is no router's attempt). Its failing routers are then not
		// red: what failed here has been answered past, and the region is asked in order.
		answeredPast := !r.Marked && !r.UnreachableFromHere
		for _, rs := range r.RouterStates {
			answeredPast = answeredPast && rs.State != "up"
		}
		var rc routerCounts
		for _, rs := range r.RouterStates {
			state, b := rs.State, badge{classOr(routerBadges, rs.State), rs.State}
			if answeredPast && state == "failing" {
				state, b = "answered past", badge{"warn", "failed here"}
			}
			rv.Routers = append(rv.Routers, routerView{RouterStatus: rs, Badge: b, Ago: ago(s.At, rs.LastAt)})
			rc.add(state)
			all.add(state)
		}
		rv.Summary = rc.String()
		switch {
		case r.Marked && r.UnreachableFromHere:
			rv.Badge = badge{"warn", "marked · unreachable from here"}
			rv.Note = markNote(marks[r.Name], r.MarkedForReads) + "; " + unreachableNote
		case r.Marked:
			rv.Badge = badge{"warn", "marked"}
			rv.Note = markNote(marks[r.Name], r.MarkedForReads)
		case r.UnreachableFromHere:
			rv.Badge = badge{"warn", "unreachable from here"}
			rv.Note = unreachableNote
		default:
			v.RegionOK++
			if rc.past > 0 {
				rv.Note = answeredPastNote
			}
		}
		v.Regions = append(v.Regions, rv)
	}
	v.RouterSummary = all.String()

	if c := s.Homes.Capacity; c > 0 {
		v.HomesPct = min(100, 100*float64(s.Homes.Held)/float64(c))
		v.LocalPct = min(v.HomesPct, 100*float64(s.Homes.Local)/float64(c))
	}
	if t := s.Traffic; t != nil {
		tv := &trafficView{GossipTraffic: *t}
		if t.WindowSeconds > 0 {
			tv.Window = formatDuration(time.Duration(t.WindowSeconds * float64(time.Second)))
		}
		v.Traffic = tv
	}
	return v
}

// routerCounts counts routers by state.
type routerCounts struct{ up, failing, past, unknown int }

func (c *routerCounts) add(state string) {
	switch state {
	case "up":
		c.up++
	case "failing":
		c.failing++
	case "answered past": // failing here, its region answered since (newStatusView)
		c.past++
	default:
		c.unknown++
	}
}

func (c routerCounts) String() string {
	parts := []string{fmt.Sprintf("%d up", c.up)}
	if c.failing > 0 {
		parts = append(parts, fmt.Sprintf("%d failing", c.failing))
	}
	if c.past > 0 {
		parts = append(parts, fmt.Sprintf("%d failed here, region answered since", c.past))
	}
	if c.unknown > 0 {
		parts = append(parts, fmt.Sprintf("%d not asked yet", c.unknown))
	}
	return strings.Join(parts, " · ")
}

func classOr(m map[string]string, k string) string {
	if c, ok := m[k]; ok {
		return c
	}
	return "off"
}

// unreachableNote says what this entry's own reach does, beside the fleet's marks.
const unreachableNote = "this entry's own attempt failed: asked last here by every request until this entry reaches a router of it (its probe, at least every read backoff); the other entries are not told"

// answeredPastNote says why a region shown ok has routers whose last attempt here failed.
const answeredPastNote = "its routers failed here, and the region answered since (an answer relayed through another region, or this entry's probe): no mark, asked in order"

// markNote says what a region's latest failure does: plain writes ask it last until one of
// its routers answers; reads and keyed writes for the read backoff after the failure.
func markNote(ms []MarkStatus, forReads bool) string {
	who := ""
	for _, m := range ms {
		if m.Observer != "" {
			who = " (failed at " + m.Observer + ")"
		}
	}
	if forReads {
		return "asked last by every request" + who
	}
	return "asked last by plain writes; reads ask it first again" + who
}

// ago is how long before now t was: "4s ago", "3m ago"; "never" for the zero time.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	if d < time.Second {
		return "just now"
	}
	return formatDuration(d) + " ago"
}

// timeLeft is how long after now t is: "12s"; "" for the zero time or a time passed.
func timeLeft(now, t time.Time) string {
	if d := t.Sub(now); !t.IsZero() && d > 0 {
		return formatDuration(max(d, time.Second))
	}
	return ""
}

// formatDuration shows a duration in its two largest units: 45s, 3m 05s, 2h 10m, 3d 4h.
func formatDuration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// formatCount writes n with thousands separators: 1,234,567.
func formatCount(n any) string {
	var s string
	switch v := n.(type) {
	case int:
		s = strconv.Itoa(v)
	case int64:
		s = strconv.FormatInt(v, 10)
	case uint64:
		s = strconv.FormatUint(v, 10)
	default:
		return fmt.Sprint(n)
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// formatBytesPerSec shows a cost in bytes a second, with its unit: "13,200 B/s".
func formatBytesPerSec(f float64) string {
	return formatCount(int64(math.Round(max(f, 0)))) + " B/s"
}

// formatPercent shows a share in percent: "0%", "<0.1%", "12.5%".
func formatPercent(f float64) string {
	switch {
	case f == 0:
		return "0%"
	case f < 0.1:
		return "<0.1%"
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + "%"
}

// formatRate shows events per second: "0", "0.03", "1.2", "340".
func formatRate(f float64) string {
	switch {
	case f == 0:
		return "0"
	case f < 0.01:
		return "<0.01"
	case f < 10:
		return strconv.FormatFloat(f, 'f', 2, 64)
	case f < 100:
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'f', 0, 64)
}

// latency fills the matrix: this entry's row first, then every other alive member's, by name.
func (v *statusView) latency(s Status) {
	for _, r := range s.Regions {
		v.LatRegions = append(v.LatRegions, r.Name)
	}
	row := func(pop, name string, self bool, ms map[string]float64) latRow {
		lr := latRow{Pop: pop, Name: name, Self: self}
		best := -1
		for i, r := range v.LatRegions {
			c := latCell{}
			if x, ok := ms[r]; ok {
				c.MS, c.Known = strconv.FormatFloat(x, 'f', -1, 64), true
				if best < 0 || x < ms[v.LatRegions[best]] {
					best = i
				}
			}
			lr.Cells = append(lr.Cells, c)
		}
		if best >= 0 {
			lr.Cells[best].Best = true
		}
		return lr
	}
	own := map[string]float64{}
	for _, r := range s.Regions {
		if r.Measured {
			own[r.Name] = r.LatencyMS
		}
	}
	v.LatRows = append(v.LatRows, row(s.Pop, s.Node, true, own))
	v.ClosestWhy = closestWhy(s.Closest, v.LatRegions, v.LatRows[0])
	for _, m := range v.Members {
		if m.Self || m.State != "alive" {
			continue
		}
		v.LatRows = append(v.LatRows, row(m.Pop, m.Name, false, m.LatencyMS))
	}
}

// closestWhy says why closest, the region a tenant heard nowhere goes to first, is first,
// beside this entry's row of the matrix (self): the lowest there, or the default region that
// a lower one does not replace, being not clearly closer (proxy's latBetterRatio and
// latBetterBy: 20 % and 5 ms at least).
func closestWhy(closest string, regions []string, self latRow) string {
	lowest := ""
	for i, c := range self.Cells {
		if c.Best {
			lowest = regions[i]
		}
	}
	switch lowest {
	case "":
		return "the default region: no region is measured from here yet"
	case closest:
		return "the lowest from here"
	}
	return "the default region: " + lowest + " is lower from here, but not clearly (a region replaces the default only at least 20% and 5 ms closer)"
}
