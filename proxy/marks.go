package proxy

// markRegion records that a region could give this request no answer, and logs the state
// change at info (a region already failing logs nothing).
func (h *Handler) markRegion(rs *regionState, reqID string) {
	if !h.homes.Mark(rs.id) {
		return
	}
	h.log.Info().Str("region", rs.name).Str("request_id", reqID).
		Msg("region marked: asked last by plain writes until a router of it answers, by reads and keyed writes for the read backoff")
}

// clearRegion clears a region's marks after one of its routers answered; logs at info only
// when the region was failing. On a region that is not failing it costs one atomic load.
func (h *Handler) clearRegion(rs *regionState) {
	if h.homes.Clear(rs.id) {
		h.log.Info().Str("region", rs.name).Msg("region cleared: a router answered")
	}
}
