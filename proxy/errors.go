package proxy

import (
	"encoding/json"
	"net/http"
)

// The entry's own error codes (CONTRACT.md section 8).
const (
	codeBadPath           = "bad_path"
	codeLengthRequired    = "length_required"
	codeMayHaveRun        = "may_have_run"
	codeNoRegionReachable = "no_region_reachable"
	codeOverloaded        = "overloaded"
)

type errorBody struct {
	Error     string `json:"error"`
	Message   string `json:"message"`
	RequestID string `json:"request_id,omitempty"`
}

// writeError answers with the entry's own JSON error, with CORS headers when
// --cors allows the origin.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, status int, code, msg, reqID string) {
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "no-store")
	if reqID != "" {
		hdr.Set("X-Request-Id", reqID)
	}
	h.cors.decorate(hdr, r)
	b, _ := json.Marshal(errorBody{Error: code, Message: msg, RequestID: reqID})
	b = append(b, '\n')
	w.WriteHeader(status)
	w.Write(b)
}
