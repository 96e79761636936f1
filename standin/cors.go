package standin

import "net/http"

// corsMethods is Access-Control-Allow-Methods on a preflight, as the entry sends it.
const corsMethods = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"

// isPreflight reports whether req is a CORS preflight: OPTIONS with Origin and
// Access-Control-Request-Method.
func isPreflight(req *http.Request) bool {
	return req.Method == http.MethodOptions && req.Header.Get("Origin") != "" &&
		req.Header.Get("Access-Control-Request-Method") != ""
}

func (p corsPolicy) enabled() bool { return p.any || len(p.origins) > 0 }

// allowOrigin returns the Access-Control-Allow-Origin for origin, if it is allowed.
func (p corsPolicy) allowOrigin(origin string) (string, bool) {
	switch {
	case origin == "":
		return "", false
	case p.any:
		return "*", true
	case p.origins[origin]:
		return origin, true
	}
	return "", false
}

// preflight answers a preflight 204. An origin not allowed gets no Access-Control-* header,
// which a browser reads as a refusal.
func (p corsPolicy) preflight(w http.ResponseWriter, req *http.Request) {
	h := w.Header()
	h.Set("Vary", "Origin")
	if allow, ok := p.allowOrigin(req.Header.Get("Origin")); ok {
		h.Set("Access-Control-Allow-Origin", allow)
		h.Set("Access-Control-Allow-Methods", corsMethods)
		if rh := req.Header.Values("Access-Control-Request-Headers"); len(rh) > 0 {
			h["Access-Control-Allow-Headers"] = append([]string(nil), rh...)
		}
		h.Set("Access-Control-Max-Age", "600")
	}
	w.WriteHeader(http.StatusNoContent)
}

// annotate adds Access-Control-Allow-Origin and Vary: Origin to an answer this router makes
// to a request from an allowed origin. A relayed answer is not annotated: the home did it.
func (p corsPolicy) annotate(h http.Header, req *http.Request) {
	if allow, ok := p.allowOrigin(req.Header.Get("Origin")); ok {
		h.Set("Access-Control-Allow-Origin", allow)
		h.Set("Vary", "Origin")
	}
}
