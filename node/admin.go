package node

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// adminHandler serves the admin listener (--admin-listen):
//
//	/metrics      Prometheus text format
//	/healthz      200 while the process runs
//	/readyz       200 once started, while SetReady(true) holds and not draining; else 503
//	/status.json  Status as JSON
//
// The HTML /status page comes with the operations issue.
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
	Gossip    bool           `json:"gossip"`  // false: no --gossip-key and no --insecure-gossip, serving alone
	Members   []MemberStatus `json:"members"` // every gossip member this entry knows, itself included
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
	Marked  bool     `json:"marked"`
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
}

// MarkStatus is one live region mark.
type MarkStatus struct {
	Region   string    `json:"region"`
	Kind     string    `json:"kind"` // read or write
	Observer string    `json:"observer"`
	Expires  time.Time `json:"expires,omitzero"` // read marks only
}

// Status returns the entry's current status. Safe for concurrent use.
func (n *Node) Status() Status {
	st := n.homes.Stats()
	s := Status{
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
		},
	}
	if t := n.startedAt.Load(); t != nil {
		s.Started = *t
	}
	for _, m := range n.Members() {
		s.Members = append(s.Members, MemberStatus{Name: m.Name, Addr: m.Addr, State: m.State,
			Pop: m.Tags["pop"], Continent: m.Tags["continent"], Version: m.Tags["version"]})
	}
	for i, r := range n.cfg.Routers {
		rs := RegionStatus{Name: r.Name, Marked: n.homes.Marked(i)}
		for _, u := range r.Routers {
			rs.Routers = append(rs.Routers, u.Redacted())
		}
		s.Regions = append(s.Regions, rs)
	}
	for _, m := range n.homes.Marks() {
		if m.Clear {
			continue
		}
		s.Marks = append(s.Marks, MarkStatus{Region: m.Region, Kind: m.Kind.String(), Observer: m.Observer, Expires: m.Expires})
	}
	return s
}
