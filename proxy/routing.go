package proxy

import (
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Routing is what may change while the handler serves: a reload of --config (regions,
// continents, default region, entry token, CORS) and discovery (the routers a region's DNS
// names resolve to). SetRouting applies a whole Routing at once; each request reads the one in
// force when it starts and keeps it to its end.
type Routing struct {
	Regions       []Region          // as Config.Regions
	Continents    map[string]string // as Config.Continents
	DefaultRegion string            // as Config.DefaultRegion
	EntryToken    string            // as Config.EntryToken
	CORS          string            // as Config.CORS
}

// Routing returns the Routing in force (its slices and maps are the caller's to read, not to
// change).
func (h *Handler) Routing() Routing { return h.rt.Load().spec }

// routing is one Routing as requests use it. Never changed once published.
type routing struct {
	spec            Routing
	byID            []*regionRoute // by the home table's region ID; nil: not configured
	order           []uint8        // configured region IDs in Regions order
	empty           uint64         // bit i: region i has no router (its names resolved to nothing)
	byName          map[string]int // configured region name -> ID
	defaultRegion   int
	continentRegion map[string]int
	marker          *clientMarker // nil without an entry token
	cors            *corsPolicy   // nil without CORS
}

// regionRoute is one region's routers in one routing.
type regionRoute struct {
	st      *regionState
	routers []*router
}

// regionState is what one region keeps across routings, from the first routing that
// configures it: which router to start from and its metrics children.
type regionState struct {
	id       int
	name     string
	lastGood atomic.Pointer[router] // the router to start from; nil: the first
	attempts []prometheus.Counter   // by outcome
	upstream prometheus.Observer
	lat      latency // from this entry to the region (latency.go)
}

// start returns the index in routers of the router the region's next request starts from.
func (rr *regionRoute) start() int {
	if good := rr.st.lastGood.Load(); good != nil {
		for i, rt := range rr.routers {
			if rt == good {
				return i
			}
		}
	}
	return 0
}

// SetRouting validates r and, if it is good, makes it the routing of every request from now
// on; requests in flight finish under the one they started with. Regions not in r are
// removed from the home table (their homes forgotten, homes.Table.SetRegions); a router kept
// (same region, scheme, address and certificate name) keeps its idle connections and its
// state; one no longer listed takes no new request and its idle connections are closed, while
// requests in flight to it finish. A region may list no router (its names resolved to
// nothing yet): it is asked after every other, like a marked one, and fails at once. It is
// refused, changing nothing, with an error saying what is wrong. Calls are serialised.
func (h *Handler) SetRouting(r Routing) error {
	if err := r.validate(); err != nil {
		return err
	}
	h.rtMu.Lock()
	defer h.rtMu.Unlock()
	if h.closed {
		return errors.New("proxy: closed")
	}
	names := make([]string, len(r.Regions))
	for i, reg := range r.Regions {
		names[i] = reg.Name
	}
	if _, err := h.homes.SetRegions(names); err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	old := h.rt.Load()
	next := h.build(r, old)
	h.rt.Store(next)
	var configured uint64
	for _, id := range next.order {
		configured |= 1 << id
	}
	h.unreach.And(configured) // a region removed is forgotten, as its marks are
	h.choose(next)
	if old != nil {
		keep := map[*router]bool{}
		for _, rr := range next.byID {
			if rr != nil {
				for _, rt := range rr.routers {
					keep[rt] = true
				}
			}
		}
		for _, rr := range old.byID {
			if rr == nil {
				continue
			}
			for _, rt := range rr.routers {
				if !keep[rt] {
					rt.closeIdle(true)
				}
			}
		}
	}
	return nil
}

// build makes the routing for r, reusing old's routers that r still lists. h.rtMu is held and
// the home table configures exactly r's regions.
func (h *Handler) build(r Routing, old *routing) *routing {
	c := &h.cfg
	next := &routing{
		spec:            r,
		byID:            make([]*regionRoute, h.homes.NumRegions()),
		byName:          make(map[string]int, len(r.Regions)),
		continentRegion: make(map[string]int, len(r.Continents)),
		cors:            newCORS(r.CORS),
	}
	if r.EntryToken != "" {
		next.marker = newClientMarker(r.EntryToken)
	}
	oldRouters := map[string]*router{}
	if old != nil {
		for _, rr := range old.byID {
			if rr != nil {
				for _, rt := range rr.routers {
					oldRouters[rt.key] = rt
				}
			}
		}
	}
	for _, reg := range r.Regions {
		id, _ := h.homes.RegionID(reg.Name)
		st := h.states[id]
		if st == nil {
			st = &regionState{id: id, name: reg.Name, attempts: h.met.attemptsFor(reg.Name),
				upstream: h.met.m.UpstreamSeconds.WithLabelValues(reg.Name)}
			h.states[id] = st
		}
		rr := &regionRoute{st: st}
		add := func(u *url.URL, serverName string) {
			key := routerKey(reg.Name, u, serverName)
			rt := oldRouters[key]
			if rt == nil {
				rt = newRouter(st, key, u, serverName, c, h.met.m.IdleConnsDropped)
			}
			rr.routers = append(rr.routers, rt)
		}
		for _, u := range reg.Routers {
			add(u, "")
		}
		for _, d := range reg.Discovered {
			add(d.URL, d.ServerName)
		}
		next.byID[id] = rr
		if len(rr.routers) == 0 {
			next.empty |= 1 << id
		}
		next.order = append(next.order, uint8(id))
		next.byName[reg.Name] = id
	}
	next.defaultRegion = int(next.order[0])
	if r.DefaultRegion != "" {
		next.defaultRegion = next.byName[r.DefaultRegion]
	}
	for cont, reg := range r.Continents {
		next.continentRegion[cont] = next.byName[reg]
	}
	return next
}

// routerKey identifies a router across routings: its region, where it is and the name its
// certificate must hold.
func routerKey(region string, u *url.URL, serverName string) string {
	return region + "\x00" + u.Scheme + "://" + u.Host + "\x00" + serverName
}

// validate checks what Config.validate checks of these fields.
func (r *Routing) validate() error {
	if len(r.Regions) == 0 {
		return errors.New("proxy: no regions")
	}
	if len(r.Regions) > maxRegions {
		return fmt.Errorf("proxy: %d regions, at most %d", len(r.Regions), maxRegions)
	}
	seen := map[string]bool{}
	checkURL := func(u *url.URL, region string) error {
		if u == nil || (u.Scheme != "http" && u.Scheme != "https") {
			return fmt.Errorf("proxy: router %q of region %q: scheme must be http or https", u, region)
		}
		if u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("proxy: router %q of region %q: want scheme://host:port", u, region)
		}
		return nil
	}
	for _, reg := range r.Regions {
		if reg.Name == "" || seen[reg.Name] {
			return fmt.Errorf("proxy: region name %q empty or repeated", reg.Name)
		}
		seen[reg.Name] = true
		if len(reg.Routers) == 0 && !reg.Discovery {
			return fmt.Errorf("proxy: region %q has no routers", reg.Name)
		}
		for _, u := range reg.Routers {
			if err := checkURL(u, reg.Name); err != nil {
				return err
			}
		}
		for _, d := range reg.Discovered {
			if err := checkURL(d.URL, reg.Name); err != nil {
				return err
			}
		}
	}
	if r.DefaultRegion != "" && !seen[r.DefaultRegion] {
		return fmt.Errorf("proxy: default region %q is not configured", r.DefaultRegion)
	}
	for cont, reg := range r.Continents {
		if !seen[reg] {
			return fmt.Errorf("proxy: continent %s maps to unknown region %q", cont, reg)
		}
	}
	return nil
}
