package node

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fenec/fenec-entry/gossip"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/proxy"
)

// adminHandler serves the admin listener (--admin-listen):
//
//	/metrics      Prometheus text format
//	/healthz      200 while the process runs
//	/readyz       200 once started, while SetReady(true) holds and not draining; else 503.
//	              The body of a 200 says "ready; gossip down" while gossip is enabled and not
//	              up: requests are served from the entry's own table, so it stays in service.
//	/status       Status as an HTML page (status_page.go)
//	/status.json  Status as JSON
func (n *Node) adminHandler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		Registry:          reg,
		EnableOpenMetrics: false,
		ErrorHandling:     promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case n.draining.Load():
			writeText(w, http.StatusServiceUnavailable, "draining\n")
		case !n.isReady():
			writeText(w, http.StatusServiceUnavailable, "not ready\n")
		case n.cfg.gossipEnabled() && !n.gossipUp():
			// Requests are served (from this entry's own table); the cluster part is down.
			writeText(w, http.StatusOK, "ready; gossip down\n")
		default:
			writeText(w, http.StatusOK, "ready\n")
		}
	})
	mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(n.Status())
	})
	mux.HandleFunc("GET /status", n.serveStatusPage)
	return mux
}

func writeText(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write([]byte(body))
}

// Status is what /status.json shows: this entry, its regions and routers, its home table and
// the live region marks. Fields will be added (members, router health, gossip traffic);
// none will be removed or renamed without a note in the changelog.
type Status struct {
	Pop       string         `json:"pop"`
	Continent string         `json:"continent"`
	Node      string         `json:"node"`
	Version   string         `json:"version"`
	Started   time.Time      `json:"started,omitzero"`
	Ready     bool           `json:"ready"`
	Draining  bool           `json:"draining"`
	Inflight  int64          `json:"inflight"`
	Regions   []RegionStatus `json:"regions"`
	Homes     HomesStatus    `json:"homes"`
	Marks     []MarkStatus   `json:"marks"`
	Gossip    bool           `json:"gossip"` // false: no --gossip-key and no --insecure-gossip, serving alone
	// GossipUp: serf runs and this entry is a member (fenec_entry_gossip_up). False while
	// gossip is off, after the entry left (a drain), and while serf is shut down (it lost a
	// node name conflict) and being started again; GossipState then says which ("left",
	// "shutdown"; "off" when gossip is off).
	GossipUp    bool           `json:"gossip_up"`
	GossipState string         `json:"gossip_state"`
	Members     []MemberStatus `json:"members"` // every gossip member this entry knows, itself included; none while serf is shut down

	At      time.Time      `json:"at"`                       // when this status was taken
	Traffic *GossipTraffic `json:"gossip_traffic,omitempty"` // nil when gossip is off
}

// MemberStatus is one gossip member as serf sees it.
type MemberStatus struct {
	Name      string `json:"name"`
	Addr      string `json:"addr"`
	State     string `json:"state"` // alive, leaving, left, failed
	Pop       string `json:"pop"`
	Continent string `json:"continent"`
	Version   string `json:"version"`
}

// RegionStatus is one configured region, in --routers order.
type RegionStatus struct {
	Name    string   `json:"name"`
	Routers []string `json:"routers"`
	// Marked: the region's latest failure is newer than its latest clear, so plain writes ask
	// it last until one of its routers answers; MarkedForReads: that failure is also younger
	// than --read-backoff, so reads and keyed writes ask it last too (CONTRACT.md section 4).
	Marked         bool `json:"marked"`
	MarkedForReads bool `json:"marked_for_reads"`
	// RouterStates are the Routers in the same order, with what this entry last saw of each.
	RouterStates []RouterStatus `json:"router_states"`
}

// RouterStatus is one router as this entry last saw it (proxy.Handler.RouterStatus).
type RouterStatus struct {
	URL string `json:"url"` // as in RegionStatus.Routers
	// State is "up" (its last attempt got an answer), "failing" (it did not) or "unknown"
	// (not asked since this entry started).
	State string `json:"state"`
	// LastOutcome is the last attempt's class: answer, home_5xx, shard_5xx, never_made or
	// may_have_reached (CONTRACT.md section 4); "" before any.
	LastOutcome string    `json:"last_outcome,omitempty"`
	LastStatus  int       `json:"last_status,omitempty"` // the last answer's status; 0: no answer head
	LastAt      time.Time `json:"last_at,omitzero"`      // when the last attempt ended
	Failures    int       `json:"failures"`              // failed attempts since it last answered
}

// HomesStatus is the home table's Stats.
type HomesStatus struct {
	Held          int    `json:"held"`
	Local         int    `json:"local"`
	Gossip        int    `json:"gossip"`
	Capacity      int    `json:"capacity"`
	Evicted       uint64 `json:"evicted"`
	FeedDropped   uint64 `json:"feed_dropped"`
	UnknownRegion uint64 `json:"unknown_region"`
	// Digest is an order-independent digest of the homes held (gossip.TableDigest): entries
	// whose tables agree show the same one.
	Digest string `json:"digest"`
}

// MarkStatus is the latest failure of a failing region (one whose latest failure is newer
// than its latest clear).
type MarkStatus struct {
	Region   string    `json:"region"`
	Observer string    `json:"observer"`  // the entry that saw it fail
	FailedAt time.Time `json:"failed_at"` // on the observer's clock, no later than its arrival here
	// ReadsUntil is when reads and keyed writes ask the region first again (FailedAt plus
	// --read-backoff); plain writes ask it last until a router of it answers.
	ReadsUntil time.Time `json:"reads_until"`
}

// Status returns the entry's current status. Safe for concurrent use.
func (n *Node) Status() Status {
	st := n.homes.Stats()
	s := Status{
		At:        n.cfg.Clock.Now(),
		Pop:       n.cfg.Pop,
		Continent: n.cfg.Continent,
		Node:      n.cfg.Node,
		Version:   n.version(),
		Ready:     n.isReady() && !n.draining.Load(),
		Draining:  n.draining.Load(),
		Inflight:  n.proxy.Inflight(),
		Regions:   []RegionStatus{},
		Marks:     []MarkStatus{},
		Gossip:    n.cfg.gossipEnabled(),
		Members:   []MemberStatus{},
		Homes: HomesStatus{
			Held: st.Homes, Local: st.Local, Gossip: st.Gossip, Capacity: n.cfg.Homes,
			Evicted: st.Evicted, FeedDropped: st.FeedDropped, UnknownRegion: st.UnknownRegion,
			Digest: gossip.TableDigest(n.homes),
		},
	}
	if t := n.startedAt.Load(); t != nil {
		s.Started = *t
	}
	s.GossipState = "off"
	if g := n.getCluster(); g != nil {
		s.GossipUp, s.GossipState = g.Up(), g.State()
	}
	for _, m := range n.Members() {
		s.Members = append(s.Members, MemberStatus{Name: m.Name, Addr: m.Addr, State: m.State,
			Pop: m.Tags["pop"], Continent: m.Tags["continent"], Version: m.Tags["version"]})
	}
	states := n.proxy.RouterStatus() // regions and routers in n.cfg.Routers order
	for i, r := range n.cfg.Routers {
		rs := RegionStatus{Name: r.Name, Marked: n.homes.Marked(i, homes.Strict),
			MarkedForReads: n.homes.Marked(i, homes.Lenient)}
		for _, u := range r.Routers {
			rs.Routers = append(rs.Routers, u.Redacted())
			var st proxy.RouterState
			if len(states) > 0 {
				st, states = states[0], states[1:]
			}
			rs.RouterStates = append(rs.RouterStates, routerStatus(u.Redacted(), st))
		}
		s.Regions = append(s.Regions, rs)
	}
	if s.Gossip {
		s.Traffic = n.traffic.rates(n.reg, s.At, s.Started)
	}
	for _, m := range n.homes.FailingMarks() {
		s.Marks = append(s.Marks, MarkStatus{Region: m.Region, Observer: m.Observer, FailedAt: m.At, ReadsUntil: m.ReadsUntil})
	}
	return s
}
