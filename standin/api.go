package standin

import (
	"io"
	"net/http"
	"strconv"
	"strings"
)

// serveTenant serves the tenant API of a tenant homed in this router's region:
//
//	GET  /t/<t>/items/<id>          the item, or 404
//	POST /t/<t>/items               a write: a new item
//	PUT, PATCH, DELETE /t/<t>/items/<id>   a write on that item
//	GET  /t/<t>/events              server-sent events
//	ANY  /t/<t>/echo                what this router received
//
// Anything else under the tenant is 404, a known path with another method 405.
func (rt *Router) serveTenant(w http.ResponseWriter, req *http.Request, ex *exchange) {
	rest := ex.rest
	switch {
	case rest == "/echo":
		rt.serveEcho(w, req, ex)
	case rest == "/items":
		if req.Method != http.MethodPost {
			methodNotAllowed(w, "POST")
			return
		}
		rt.serveWrite(w, req, ex.tenant, "")
	case strings.HasPrefix(rest, "/items/") && len(rest) > len("/items/") && !strings.Contains(rest[len("/items/"):], "/"):
		id := rest[len("/items/"):]
		switch req.Method {
		case http.MethodGet, http.MethodHead:
			rt.serveItem(w, ex.tenant, id)
		case http.MethodPut, http.MethodPatch, http.MethodDelete:
			rt.serveWrite(w, req, ex.tenant, id)
		default:
			methodNotAllowed(w, "GET, HEAD, PUT, PATCH, DELETE")
		}
	case rest == "/events":
		if req.Method != http.MethodGet {
			methodNotAllowed(w, "GET")
			return
		}
		rt.serveEvents(w, req, ex)
	default:
		writeError(w, http.StatusNotFound, "not_found", "no such path under the tenant")
	}
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "allowed: "+allow)
}

func (rt *Router) serveItem(w http.ResponseWriter, tenant, id string) {
	it, ok := rt.c.store.item(tenant, id)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such item")
		return
	}
	writeJSON(w, http.StatusOK, it)
}

// echoAnswer is what /echo answers: the request as this (home) router received it.
type echoAnswer struct {
	Method  string      `json:"method"`
	Path    string      `json:"path"`     // decoded once
	RawPath string      `json:"raw_path"` // the request target as received
	Tenant  string      `json:"tenant"`
	Rest    string      `json:"rest"` // the path after /t/<tenant>
	Region  string      `json:"region"`
	Router  string      `json:"router"`
	Host    string      `json:"host"`
	Headers http.Header `json:"headers"`
	BodyLen int64       `json:"body_len"`
}

// serveEcho answers what it received. ?set=Name:Value (repeatable) adds a header to the
// answer; ?status=N answers N instead of 200.
func (rt *Router) serveEcho(w http.ResponseWriter, req *http.Request, ex *exchange) {
	q := req.URL.Query()
	status := http.StatusOK
	if s := q.Get("status"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 200 || n > 599 {
			writeError(w, http.StatusBadRequest, "bad_status", "status must be 200..599")
			return
		}
		status = n
	}
	for _, kv := range q["set"] {
		if name, _, ok := strings.Cut(kv, ":"); !ok || strings.TrimSpace(name) == "" {
			writeError(w, http.StatusBadRequest, "bad_set", "set must be Name:Value")
			return
		}
	}
	n, err := io.Copy(io.Discard, http.MaxBytesReader(w, req.Body, maxBody))
	if err != nil {
		writeBodyError(w, err)
		return
	}
	ans := echoAnswer{
		Method:  req.Method,
		Path:    req.URL.Path,
		RawPath: req.RequestURI,
		Tenant:  ex.tenant,
		Rest:    ex.rest,
		Region:  rt.region,
		Router:  rt.addr,
		Host:    req.Host,
		Headers: req.Header,
		BodyLen: n,
	}
	for _, kv := range q["set"] {
		name, value, _ := strings.Cut(kv, ":")
		w.Header().Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	writeJSON(w, status, ans)
}
