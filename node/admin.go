package node

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fenec/fenec-entry/gossip"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/proxy"
	"github.com/fenec/fenec-entry/status"
)

// adminHandler serves the admin listener (--admin-listen):
//
//	/metrics      Prometheus text format
//	/healthz      200 while the process runs
//	/readyz       200 once started, holding a peer's table (or none to fetch) and not draining; else 503.
//	              The body of a 200 says "ready; gossip down" while gossip is enabled and not
//	              up: requests are served from the entry's own table, so it stays in service.
//	/status       status.Status as an HTML page (package status)
//	/status.json  status.Status as JSON
//	POST /reload  re-read --config and apply it (Reload): 200 and what changed, 400 and the
//	              error naming the setting (nothing applied), 409 without --config
//
// The admin listener's error codes, in the JSON error the client listener's errors use.
const (
	codeForbidden     = "forbidden"      // a change not from loopback, without --admin-token
	codeReloadRefused = "reload_refused" // a configuration with an error, or no --config
)

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
		status.WriteJSON(w, n.Status())
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		if err := status.WritePage(w, n.Status()); err != nil {
			n.log.Error().Err(err).Msg("admin: rendering /status")
		}
	})
	mux.HandleFunc("POST /reload", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		type refusal struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		if !n.mayChange(r) { // counted, and logged at debug only: anyone could fill a log at warn
			n.adminRefused.Inc()
			n.log.Debug().Str("from", r.RemoteAddr).Msg("admin: a change refused: not from loopback, no admin token")
			w.WriteHeader(http.StatusForbidden)
			json.NewEncoder(w).Encode(refusal{codeForbidden, "changes are taken from loopback, or with --admin-token as Authorization: Bearer <token>"})
			return
		}
		res, err := n.Reload(r.Context())
		switch {
		case err == nil:
			json.NewEncoder(w).Encode(struct {
				Status string `json:"status"`
				ReloadResult
			}{"reloaded", res})
			return
		case n.cfg.Reloader == nil:
			w.WriteHeader(http.StatusConflict)
		default:
			w.WriteHeader(http.StatusBadRequest)
		}
		json.NewEncoder(w).Encode(refusal{codeReloadRefused, err.Error()})
	})
	return mux
}

// mayChange says whether r may change the entry through the admin listener: it comes from
// loopback, or it carries --admin-token as "Authorization: Bearer <token>" (compared in
// constant time). Whoever reaches the listener may read it; a private network is not trusted
// to change it.
func (n *Node) mayChange(r *http.Request) bool {
	if tok := string(n.cfg.AdminToken); tok != "" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if ok && subtle.ConstantTimeCompare([]byte(got), []byte(tok)) == 1 {
			return true
		}
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

func writeText(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write([]byte(body))
}

// Status returns the entry's current status. Safe for concurrent use.
func (n *Node) Status() status.Status {
	st := n.homes.Stats()
	s := status.Status{
		At:        n.cfg.Clock.Now(),
		Pop:       n.cfg.Pop,
		Continent: n.cfg.Continent,
		Node:      n.cfg.Node,
		Version:   n.version(),
		Ready:     n.isReady() && !n.draining.Load(),
		Draining:  n.draining.Load(),
		Inflight:  n.proxy.Inflight(),
		Regions:   []status.RegionStatus{},
		Marks:     []status.MarkStatus{},
		Gossip:    n.cfg.gossipEnabled(),
		Members:   []status.MemberStatus{},
		Homes: status.HomesStatus{
			Held: st.Homes, Local: st.Local, Gossip: st.Gossip, Capacity: n.cfg.Homes,
			Evicted: st.Evicted, FeedDropped: st.FeedDropped, UnknownRegion: st.UnknownRegion,
			Digest: n.digest.of(n.homes),
		},
	}
	if t := n.startedAt.Load(); t != nil {
		s.Started = *t
	}
	s.GossipState = "off"
	if g := n.getCluster(); g != nil {
		s.GossipUp, s.GossipState = g.Up(), g.State()
		if s.GossipUp {
			r := g.Relays()
			s.Relays = &status.RelayStatus{On: r.On, DirectBytes: r.DirectBytes, Groups: r.Groups, Group: r.Group}
		}
	}
	lat := n.proxy.Latencies()
	own := map[string]float64{}
	for _, l := range lat {
		if l.Measured {
			own[l.Region] = msOf(l.Estimate)
		}
	}
	for _, m := range n.Members() {
		ms := status.MemberStatus{Name: m.Name, Addr: m.Addr, State: m.State,
			Pop: m.Tags["pop"], Continent: m.Tags["continent"], Version: m.Tags["version"],
			LatencyMS: parseLatency(m.Tags[latencyTagKey])}
		if m.Name == n.cfg.Node && len(own) > 0 {
			ms.LatencyMS = own
		}
		s.Members = append(s.Members, ms)
	}
	s.Closest = n.proxy.Closest()
	states := n.proxy.RouterStatus() // the routing in force: its regions and routers in order
	names := n.disc.Names()          // not reloadMu: a reload resolving names must not hold up /status
	for _, r := range n.proxy.Routing().Regions {
		id, _ := n.homes.RegionID(r.Name)
		rs := status.RegionStatus{Name: r.Name, Marked: n.homes.Marked(id, homes.Strict),
			MarkedForReads: n.homes.Marked(id, homes.Lenient), UnreachableFromHere: n.proxy.Unreachable(id),
			Routers: []string{}, RouterStates: []status.RouterStatus{}}
		for _, l := range lat {
			if l.Region == r.Name && l.Measured {
				rs.LatencyMS, rs.Measured = msOf(l.Estimate), true
			}
		}
		rs.Names = names[r.Name]
		for len(states) > 0 && states[0].Region == r.Name {
			rs.Routers = append(rs.Routers, states[0].Router)
			rs.RouterStates = append(rs.RouterStates, routerStatus(states[0].Router, states[0]))
			states = states[1:]
		}
		s.Regions = append(s.Regions, rs)
	}
	if s.Gossip {
		s.Traffic = n.traffic.Rates(n.reg, s.At, s.Started)
	}
	for _, m := range n.homes.FailingMarks() {
		s.Marks = append(s.Marks, status.MarkStatus{Region: m.Region, Observer: m.Observer, FailedAt: m.At, ReadsUntil: m.ReadsUntil})
	}
	return s
}

// routerStatus makes a status.RouterStatus of what the proxy saw of the router at url.
func routerStatus(url string, st proxy.RouterState) status.RouterStatus {
	rs := status.RouterStatus{URL: url, State: "up", LastOutcome: st.LastOutcome, LastStatus: st.LastStatus,
		LastAt: st.LastAt, Failures: st.Failures}
	switch {
	case st.LastOutcome == "":
		rs.State = "unknown"
	case st.Failing():
		rs.State = "failing"
	}
	return rs
}

// tableDigest is the status's digest of the homes held (gossip.TableDigest), made again only
// when the table's Generation moved: a digest reads every home (0.1 s of CPU at a million),
// and a status page looked at every few seconds would spend that each time. Equal
// generations mean the homes held did not change, so a kept digest is still true.
type tableDigest struct {
	mu  sync.Mutex
	gen uint64
	val string
}

// digestOf is gossip.TableDigest; a test counts its calls.
var digestOf = gossip.TableDigest

func (d *tableDigest) of(t *homes.Table) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	gen := t.Generation()
	if d.val == "" || gen != d.gen {
		d.gen, d.val = gen, digestOf(t) // read after gen: a change meanwhile moves gen past d.gen
	}
	return d.val
}
