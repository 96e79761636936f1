package standin

import (
	"net"
	"net/http"
	"strconv"
)

// adminPrefix is the path of the admin API, served by every router, never subject to faults
// and never relayed:
//
//	GET  /_standin/health                      {"ok":true,"router":..,"region":..}
//	GET  /_standin/routers                     every router: addr, region, url, fault
//	GET  /_standin/fault[?router=ADDR]         a router's fault (default: this router)
//	POST /_standin/fault?router=ADDR&mode=MODE set it; MODE as ParseFault reads it, "ok" clears
//	GET  /_standin/directory                   tenant -> home region
//	POST /_standin/move?tenant=T&home=R        move (or add) a tenant
//	GET  /_standin/ledger[?since=N]            the writes applied (after the first N)
//	GET  /_standin/seen[?since=SEQ]            the requests seen (with Seq > SEQ)
//	GET  /_standin/marks                       the client mark counts
//	POST /_standin/reset                       clear ledger, items, keys, seen, marks, faults;
//	                                           seed Config.Items again
//
// Parameters may also come in a form body. Errors are JSON {"error":..,"message":..}.
const adminPrefix = "/_standin/"

// adminMethods is every admin path (after adminPrefix) and its method; "" for both GET and
// POST.
var adminMethods = map[string]string{
	"health": http.MethodGet, "routers": http.MethodGet, "directory": http.MethodGet,
	"ledger": http.MethodGet, "seen": http.MethodGet, "marks": http.MethodGet,
	"move": http.MethodPost, "reset": http.MethodPost, "fault": "",
}

type routerInfo struct {
	Addr   string `json:"addr"`
	Region string `json:"region"`
	URL    string `json:"url"`
	Fault  string `json:"fault"`
}

func (rt *Router) info() routerInfo {
	return routerInfo{Addr: rt.addr, Region: rt.region, URL: rt.url, Fault: rt.Fault().String()}
}

func (rt *Router) serveAdmin(w http.ResponseWriter, req *http.Request) {
	c := rt.c
	w.Header().Set(hdrShard, "1")
	w.Header().Set("Cache-Control", "no-store")
	path := req.URL.Path[len(adminPrefix):]
	want, ok := adminMethods[path]
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such admin path")
		return
	}
	if want != "" && req.Method != want {
		methodNotAllowed(w, want)
		return
	}
	switch path {
	case "health":
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "router": rt.addr, "region": rt.region})
	case "routers":
		out := make([]routerInfo, len(c.routers))
		for i, r := range c.routers {
			out[i] = r.info()
		}
		writeJSON(w, http.StatusOK, out)
	case "fault":
		rt.adminFault(w, req)
	case "directory":
		writeJSON(w, http.StatusOK, c.Directory())
	case "move":
		tenant, home := req.FormValue("tenant"), req.FormValue("home")
		if err := c.Move(tenant, home); err != nil {
			writeError(w, http.StatusBadRequest, "bad_move", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"tenant": tenant, "home": home})
	case "ledger":
		from, ok := adminSince(w, req)
		if ok {
			writeJSON(w, http.StatusOK, c.store.applies(int(min(from, 1<<31))))
		}
	case "seen":
		since, ok := adminSince(w, req)
		if ok {
			writeJSON(w, http.StatusOK, c.seen.since(since))
		}
	case "marks":
		writeJSON(w, http.StatusOK, c.ClientMarks())
	case "reset":
		if err := c.Reset(); err != nil {
			writeError(w, http.StatusInternalServerError, "reset_failed", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	}
}

// adminFault serves GET and POST /_standin/fault.
func (rt *Router) adminFault(w http.ResponseWriter, req *http.Request) {
	target := rt
	if addr := req.FormValue("router"); addr != "" {
		if target = rt.c.Router(addr); target == nil {
			writeError(w, http.StatusNotFound, "unknown_router", "no router at "+strconv.Quote(addr))
			return
		}
	}
	switch req.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, target.info())
	case http.MethodPost:
		f, err := ParseFault(req.FormValue("mode"))
		if err == nil && req.FormValue("mode") == "" {
			writeError(w, http.StatusBadRequest, "bad_fault", "mode is required (\"ok\" clears)")
			return
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_fault", err.Error())
			return
		}
		var keep net.Conn
		if target == rt {
			keep = requestConn(req) // a router put down by its own admin still answers this
		}
		if err := target.setFault(f, keep); err != nil {
			writeError(w, http.StatusInternalServerError, "fault_failed", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, target.info())
	default:
		methodNotAllowed(w, "GET, POST")
	}
}

func adminSince(w http.ResponseWriter, req *http.Request) (uint64, bool) {
	s := req.FormValue("since")
	if s == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_since", "since must be a non-negative integer")
		return 0, false
	}
	return n, true
}
