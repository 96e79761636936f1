package proxy

import (
	"encoding/json"
	"net/http"

	"github.com/fenec/fenec-entry/door"
)

// The entry's own error codes (docs/REFERENCE.md, "Streams, cancellation, errors").
const (
	codeBadPath           = "bad_path"
	codeLengthRequired    = "length_required"
	codeMayHaveRun        = "may_have_run"
	codeNoRegionReachable = "no_region_reachable"
	codeOverloaded        = "overloaded"
)

// entryError is one of the entry's own error answers. Every error the entry answers itself,
// rather than hands on from a router, is one row of entryErrors, written by writeError and
// nothing else (as httputil.ReverseProxy has one ErrorHandler).
type entryError uint8

const (
	entryBadPath           entryError = iota // the path names no valid tenant, or holds a NUL
	entryOverloaded                          // --max-inflight requests are in flight
	entryNoBodyRoom                          // no room in MaxBufferedBytes to judge a body without a length
	entryLengthRequired                      // a body without a length is longer than --body-buffer
	entryMayHaveRun                          // a write failed after it may have reached a router
	entryNoRegionReachable                   // every region failed
)

// entryErrors is, per entry error, its code (the JSON "error" and the result label of
// fenec_entry_requests_total), status and one-sentence message (docs/REFERENCE.md, "Which region,
// which router" and "Streams, cancellation, errors"). Every one carries Content-Type:
// application/json, Cache-Control: no-store, the request id when the entry knows it (body and
// X-Request-Id), and CORS headers when --cors allows the origin (section 7): see writeError.
var entryErrors = [...]struct {
	code   string
	status int
	msg    string
}{
	entryBadPath: {codeBadPath, http.StatusBadRequest,
		"The path must hold no NUL, and under /t/ name a tenant: /t/<tenant>/..., at most 255 bytes."},
	entryOverloaded: {codeOverloaded, http.StatusServiceUnavailable,
		"Too many requests in flight at this entry; try again shortly."},
	entryNoBodyRoom: {codeOverloaded, http.StatusServiceUnavailable,
		"No room at this entry to buffer a request body without a length; try again shortly."},
	entryLengthRequired: {codeLengthRequired, http.StatusLengthRequired,
		"A request body longer than the entry's body buffer needs a Content-Length."},
	entryMayHaveRun: {codeMayHaveRun, http.StatusBadGateway,
		"The router failed after the request may have reached it; it was not sent again. " +
			"Retry with an Idempotency-Key to make it safe to repeat."},
	entryNoRegionReachable: {codeNoRegionReachable, http.StatusBadGateway,
		"No region could be reached for this request."},
}

type errorBody struct {
	Error     string `json:"error"`
	Message   string `json:"message"`
	RequestID string `json:"request_id,omitempty"`
}

// writeError answers with the entry's own JSON error e and records its result and status
// in x for the request's log line and count (finish).
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, x *exchange, e entryError) {
	row := &entryErrors[e]
	writeJSONError(w, r, x, row.code, row.status, row.msg)
}

// writeJSONError is the one writer of the entry's JSON errors: entryErrors' rows, and the
// door's refusals (door.Reason's code, status and message).
func writeJSONError(w http.ResponseWriter, r *http.Request, x *exchange, code string, status int, msg string) {
	x.result, x.status = code, status
	reqID := x.requestID(r)
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "no-store")
	if reqID != "" {
		hdr.Set("X-Request-Id", reqID)
	}
	x.rt.cors.decorate(hdr, r)
	b, _ := json.Marshal(errorBody{Error: code, Message: msg, RequestID: reqID})
	b = append(b, '\n')
	w.WriteHeader(status)
	w.Write(b)
}

// refuseAtDoor answers a request the door refused (docs/REFERENCE.md, "At the door") with
// the reason's JSON error, closes the connection after the answer, and counts and logs it.
// Nothing of the request has reached a router.
func (h *Handler) refuseAtDoor(w http.ResponseWriter, r *http.Request, x *exchange, reason door.Reason) {
	w.Header().Set("Connection", "close")
	x.refusal = reason
	if x.addr == "" {
		x.addr = h.clientAddr(r)
	}
	writeJSONError(w, r, x, reason.Code(), reason.Status(), reason.Message())
	h.met.refused[reason].Inc()
	h.finish(x, r, x.requestID(r), x.result, x.status)
}

// refuse answers a request the entry turns away before asking any router with e, and
// counts and logs it.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, x *exchange, e entryError) {
	h.writeError(w, r, x, e)
	h.finish(x, r, x.requestID(r), x.result, x.status)
}
