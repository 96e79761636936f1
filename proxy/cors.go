package proxy

import (
	"net/http"
	"strings"
)

// corsPolicy is --cors: "*" or a list of allowed origins. It governs only the
// entry's own answers (preflights and errors); a router's answer reaches the
// client with the router's CORS headers as they are, never with a second set.
type corsPolicy struct {
	any     bool
	origins map[string]bool
}

func newCORS(spec string) *corsPolicy {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil
	}
	p := &corsPolicy{origins: map[string]bool{}}
	for _, o := range strings.Split(spec, ",") {
		o = strings.TrimSpace(o)
		if o == "*" {
			p.any = true
		} else if o != "" {
			p.origins[o] = true
		}
	}
	return p
}

// allowOrigin returns the Access-Control-Allow-Origin value for origin, or "".
func (p *corsPolicy) allowOrigin(origin string) string {
	if p == nil || origin == "" {
		return ""
	}
	if p.any {
		return "*"
	}
	if p.origins[origin] {
		return origin
	}
	return ""
}

const corsMethods = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"

// isPreflight: OPTIONS with Origin and Access-Control-Request-Method.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" &&
		r.Header.Get("Access-Control-Request-Method") != ""
}

// preflight answers a CORS preflight itself: 204 with the allowed origin,
// methods, the requested headers, max age 600 and Vary: Origin. An origin
// not allowed gets 204 without Access-Control-Allow-Origin, which a browser
// reads as a refusal.
func (p *corsPolicy) preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Vary", "Origin")
	if allow := p.allowOrigin(r.Header.Get("Origin")); allow != "" {
		h.Set("Access-Control-Allow-Origin", allow)
		h.Set("Access-Control-Allow-Methods", corsMethods)
		if req := r.Header.Values("Access-Control-Request-Headers"); len(req) > 0 {
			h.Set("Access-Control-Allow-Headers", strings.Join(req, ", "))
		}
		h.Set("Access-Control-Max-Age", "600")
	}
	w.WriteHeader(http.StatusNoContent)
}

// decorate adds CORS headers to one of the entry's own answers (its errors).
func (p *corsPolicy) decorate(h http.Header, r *http.Request) {
	if p == nil {
		return
	}
	if allow := p.allowOrigin(r.Header.Get("Origin")); allow != "" {
		h.Set("Access-Control-Allow-Origin", allow)
		h.Add("Vary", "Origin")
	}
}
