package proxy

import "github.com/fenec/fenec-entry/homes"

// markRegion marks a region that could give this request no answer, and logs the state
// change at info (a region already marked logs nothing).
func (h *Handler) markRegion(region int, kind homes.MarkKind, reqID string) {
	if !h.homes.Mark(region, kind) {
		return
	}
	k := "read"
	if kind == homes.MarkWrite {
		k = "write"
	}
	h.log.Info().Str("region", h.regions[region].name).Str("kind", k).Str("request_id", reqID).
		Msg("region marked: asked last until it answers")
}

// clearRegion clears a region's marks after one of its routers answered; logs at info only
// when a mark ended. On an unmarked region it costs one atomic load.
func (h *Handler) clearRegion(region int) {
	if h.homes.Clear(region) {
		h.log.Info().Str("region", h.regions[region].name).Msg("region cleared: a router answered")
	}
}
