package proxy

import "net/http"

// logAttempt counts an attempt, records it in its router's state (RouterStatus) and
// writes one warn line per failed attempt (what failed, where, and what the entry did
// about it); answers are logged once per request by finish.
func (h *Handler) logAttempt(r *http.Request, x *exchange, rt *router, at attemptResult, act action) {
	rt.reg.attempts[at.out].Inc()
	status := 0
	if at.resp != nil {
		status = at.resp.StatusCode
	}
	rt.state.record(at.out, status, h.cfg.Clock.Now().UnixNano())
	switch at.out {
	case outAnswer, outHome5xx, outCanceled:
		return
	}
	e := h.log.Warn()
	if e == nil {
		return
	}
	e = e.Str("region", rt.reg.name).Str("router", rt.name).Str("class", at.out.String()).
		Str("next", act.String()).Str("method", r.Method).Str("tenant", x.tenant).Str("request_id", x.requestID(r))
	if at.err != nil {
		e = e.Err(at.err)
	}
	if status != 0 {
		e = e.Int("status", status)
	}
	e.Msg("attempt failed")
}
