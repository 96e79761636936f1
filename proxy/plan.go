package proxy

import (
	"net/http"

	"github.com/fenec/fenec-entry/homes"
)

// lookup results, indexes of boundMetrics.lookup
const (
	lookupLocal = iota
	lookupGossip
	lookupMiss
)

// plan writes the order in which regions are asked into buf and returns it:
// the tenant's known home; else the region for the client's continent, else
// the default region; then every other region in --routers order. Regions
// whose failure counts for this kind of request (docs/REFERENCE.md, "Which region, which router": a
// plain write until a router of the region answers, a read or keyed write for
// --read-backoff), and the regions this entry cannot reach itself (reach.go: until a router
// of the region answers this entry), move to the end, keeping their relative order: a mark
// only reorders, it never removes a region.
func (h *Handler) plan(x *exchange, r *http.Request, buf []uint8) []uint8 {
	rt := x.rt
	first := -1
	if x.tenant != "" {
		if reg, src, ok := h.homes.LookupSource(x.tenant); ok && reg < len(rt.byID) && rt.byID[reg] != nil {
			first = reg
			if src == homesSourceLocal {
				h.met.lookup[lookupLocal].Inc()
			} else {
				h.met.lookup[lookupGossip].Inc()
			}
		} else {
			h.met.lookup[lookupMiss].Inc()
		}
	}
	if first < 0 {
		first = rt.defaultRegion
		mapped := false
		if h.cfg.ClientContinent != nil {
			if reg, ok := rt.continentRegion[h.cfg.ClientContinent(r, x.addr)]; ok {
				first, mapped = reg, true
			}
		}
		if c := int(h.closest.Load()); !mapped && c >= 0 && c < len(rt.byID) && rt.byID[c] != nil {
			first = c // clearly closer than the default region, by measurement
		}
	}
	// Read once: a mark changing meanwhile must not drop or repeat a region.
	req := homes.Strict
	if x.retryable {
		req = homes.Lenient
	}
	// A region with no router (yet) is asked last, like a marked one, and so is one this
	// entry's own path to is cut, whatever the fleet's marks say.
	last := h.homes.MarkedSet(req) | rt.empty | h.unreach.Load()
	order := buf[:0]
	// The others first, in order (the first choice leading), then the marked ones and those
	// with no router in the same order.
	for pass := uint64(0); pass < 2; pass++ {
		if last>>first&1 == pass {
			order = append(order, uint8(first))
		}
		for _, id := range rt.order {
			if int(id) != first && last>>id&1 == pass {
				order = append(order, id)
			}
		}
	}
	return order
}
