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
// whose failure counts for this kind of request (CONTRACT.md section 4: a
// plain write until a router of the region answers, a read or keyed write for
// --read-backoff) move to the end, keeping their relative order: a mark only
// reorders, it never removes a region.
func (h *Handler) plan(x *exchange, r *http.Request, buf []uint8) []uint8 {
	first := -1
	if x.tenant != "" {
		if reg, src, ok := h.homes.LookupSource(x.tenant); ok {
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
		first = h.defaultRegion
		if h.cfg.ClientContinent != nil {
			if reg, ok := h.continentRegion[h.cfg.ClientContinent(r, x.addr)]; ok {
				first = reg
			}
		}
	}
	n := len(h.regions)
	// Read once: a mark changing meanwhile must not drop or repeat a region.
	req := homes.Strict
	if x.retryable {
		req = homes.Lenient
	}
	marked := h.homes.MarkedSet(req)
	order := buf[:0]
	// Unmarked regions first, in order (the first choice leading), then the
	// marked ones in the same order.
	for pass := uint64(0); pass < 2; pass++ {
		if marked>>first&1 == pass {
			order = append(order, uint8(first))
		}
		for i := 0; i < n; i++ {
			if i != first && marked>>i&1 == pass {
				order = append(order, uint8(i))
			}
		}
	}
	return order
}
