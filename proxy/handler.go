package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/door"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/clock"
)

// Handler is the entry's client-facing http.Handler. Create it with New; it
// is safe for concurrent use. Close releases its idle router connections.
type Handler struct {
	cfg   Config
	homes *homes.Table
	strip []string // Config.StripHeaders, canonical, without those dropToRouter drops
	log   *zerolog.Logger
	met   *boundMetrics

	rt     atomic.Pointer[routing] // what each request reads once, at its start
	rtMu   sync.Mutex              // serialises SetRouting and Close; guards states, closed
	states [maxRegions]*regionState
	closed bool

	// closest is the region a tenant heard nowhere, whose continent has no mapping, is sent to
	// first instead of the default region (Config.LatencyChoice, latency.go); -1: the default.
	closest atomic.Int32
	// unreach is the set of regions this entry's own attempts could not reach (bit i: region
	// i), asked last by every request until a router of it answers this entry (reach.go).
	unreach atomic.Uint64

	inflight  atomic.Int64
	streaming atomic.Int64 // answers whose head the client has, their body still coming
	budget    bodyBudget   // request body bytes held in memory, across requests
	idPrefix  string
	idSeq     atomic.Uint64
}

// New builds a Handler from cfg. It does no I/O.
func New(cfg Config) (*Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	h := &Handler{
		cfg:   c,
		homes: c.Homes,
		log:   c.Logger,
		met:   bindMetrics(c.Metrics),
	}
	h.budget.max = c.MaxBufferedBytes
	h.closest.Store(-1)
	h.met.m.gauges(h)
	if err := h.SetRouting(c.routing()); err != nil {
		return nil, err
	}
	h.strip = stripList(c.StripHeaders)
	var b [6]byte
	rand.Read(b[:])
	h.idPrefix = hex.EncodeToString(b[:]) + "-"
	return h, nil
}

// Close closes idle router connections and keeps none from then on; SetRouting is refused
// from then on. Requests still in flight finish. Safe to call more than once.
func (h *Handler) Close() {
	h.rtMu.Lock()
	h.closed = true
	h.rtMu.Unlock()
	for _, rr := range h.rt.Load().byID {
		if rr != nil {
			for _, rt := range rr.routers {
				rt.closeIdle(true)
			}
		}
	}
}

// Inflight returns the number of requests in flight.
func (h *Handler) Inflight() int64 { return h.inflight.Load() }

// Streaming returns how many of the requests in flight are answers being handed on: the
// client has the head, the body is still coming (an event stream, a long download). A drain
// that ends these ends streams; one that ends the others ends requests not yet answered.
func (h *Handler) Streaming() int64 { return h.streaming.Load() }

// exchange is one client request's state across its attempts.
type exchange struct {
	rt        *routing // the routing in force when the request started
	start     time.Time
	tenant    string
	retryable bool
	addr      string
	head      outHead
	body      reqBody

	// for the log line
	region  int // -1: none asked
	router  *router
	status  int
	result  string
	tries   int
	refusal door.Reason // the door refused the request, or its body
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cfg.ConnClose != nil && h.cfg.ConnClose() {
		// Every answer, the entry's own included: net/http closes the connection after it.
		w.Header().Set("Connection", "close")
	}
	switch r.URL.Path {
	case "/_entry/health":
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}` + "\n"))
		h.met.requests[resHealth].Inc()
		return
	case "/_entry/ready":
		// Readiness on the client port, for a platform whose checks can reach only it (Fly's
		// service checks): 503 while the entry waits for a peer's table or drains.
		w.Header().Set("Content-Type", "application/json")
		if h.cfg.Ready != nil && !h.cfg.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"status":"not_ready"}` + "\n"))
		} else {
			w.Write([]byte(`{"status":"ready"}` + "\n"))
		}
		h.met.requests[resHealth].Inc()
		return
	case "*":
		// OPTIONS * (the only method the door lets have it) asks about the server, not a
		// tenant: the entry answers it, as no router's answer would mean anything.
		if r.Method == http.MethodOptions {
			w.Header().Set("Allow", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
			w.WriteHeader(http.StatusNoContent)
			h.met.requests[resServerOptions].Inc()
			return
		}
	case door.RefusedPath:
		// The door's stand-in for a head it refused (h1 and net/http's HTTP/1 read through it).
		if reason, ok := door.Refusal(r); ok {
			h.refuseEarly(w, r, reason)
			return
		}
	}
	if r.ProtoMajor != 1 {
		// HTTP/2 frames its own requests and no door reads them: its requests meet the
		// door's rules for a request here.
		if reason := door.Rule(r); reason != door.None {
			h.refuseEarly(w, r, reason)
			return
		}
	}
	rt := h.rt.Load()
	if rt.cors != nil && isPreflight(r) {
		rt.cors.preflight(w, r)
		h.met.requests[resPreflight].Inc()
		return
	}

	x := exchange{rt: rt, start: clock.System.Now(), region: -1} // the system's clock: the log line's duration decides nothing
	reqID := r.Header.Get("X-Request-Id")
	if reqID == "" {
		reqID = h.newRequestID()
		x.head.requestID = reqID
	}
	tenant, kind := tenantOf(r.URL.Path)
	if kind == pathBad {
		h.refuse(w, r, &x, entryBadPath)
		return
	}
	x.tenant = tenant

	if n := h.inflight.Add(1); n > int64(h.cfg.MaxInflight) {
		h.inflight.Add(-1)
		h.refuse(w, r, &x, entryOverloaded)
		return
	}
	defer h.inflight.Add(-1)

	body, err := prepareBody(r, h.cfg.BodyBuffer, &h.budget)
	if err != nil {
		if errors.Is(err, errBodyBudget) {
			h.refuse(w, r, &x, entryNoBodyRoom)
			return
		}
		if errors.Is(err, errLengthRequired) {
			h.refuse(w, r, &x, entryLengthRequired)
			return
		}
		// The client's body broke off or broke the door's rules: it is answered 400 (if the
		// client is still there to read it), never as if it had been sent.
		h.refuseAtDoor(w, r, &x, door.BodyReason(err))
		return
	}
	x.body = body
	defer func() {
		releaseBody(body.buf)
		h.budget.give(body.reserved)
	}()
	if body.kind == bodyStreamed {
		h.met.m.BodiesStreamed.Inc()
		if body.squeezed {
			h.met.m.BodiesSqueezed.Inc()
		}
	}

	x.retryable = isRetryable(r.Method, len(r.Header["Idempotency-Key"]) > 0)
	x.addr = h.clientAddr(r)
	x.head.method = r.Method
	x.head.uri = requestURI(r)
	x.head.host = r.Host
	x.head.contentLength = body.length
	x.head.strip = h.strip
	if rt.marker != nil {
		x.head.clientMark = rt.marker.mark(x.addr, h.cfg.Clock.Now().Unix())
	}

	h.forward(w, r, &x)
	h.finish(&x, r, reqID, x.result, x.status)
	if x.result == resCanceled && x.status == 0 {
		// The client went away before any answer: the connection is closed without one,
		// rather than the server's implicit 200 for a handler that wrote nothing (a client
		// that only half-closed would read it as a success).
		panic(http.ErrAbortHandler)
	}
}

// refuseEarly refuses, for reason, a request refused before the handler began its exchange.
func (h *Handler) refuseEarly(w http.ResponseWriter, r *http.Request, reason door.Reason) {
	x := exchange{rt: h.rt.Load(), start: clock.System.Now(), region: -1}
	if r.Header.Get("X-Request-Id") == "" {
		x.head.requestID = h.newRequestID()
	}
	h.refuseAtDoor(w, r, &x, reason)
}

// requestURI is the request target to send on: the client's own, still
// escaped, so the router decodes exactly what the entry judged.
func requestURI(r *http.Request) string {
	if u := r.RequestURI; len(u) > 0 && u[0] == '/' {
		return u
	}
	return r.URL.RequestURI()
}

func (h *Handler) clientAddr(r *http.Request) string {
	if h.cfg.ClientAddr != nil {
		return h.cfg.ClientAddr(r)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// newRequestID makes a request id unique across requests and restarts: a
// random per-process prefix and a sequence number.
func (h *Handler) newRequestID() string {
	var b [32]byte
	out := append(b[:0], h.idPrefix...)
	out = strconv.AppendUint(out, h.idSeq.Add(1), 36)
	return string(out)
}

// finish counts and logs a request: one line at debug, or at warn when the
// entry itself failed it. Never a token, Authorization, cookie or body.
func (h *Handler) finish(x *exchange, r *http.Request, reqID, result string, status int) {
	if c := h.met.requests[result]; c != nil {
		c.Inc()
	}
	lvl := zerolog.DebugLevel
	switch result {
	case resMayHaveRun, resNoRegionReachable, resAborted, resOverloaded:
		lvl = zerolog.WarnLevel
	}
	e := h.log.WithLevel(lvl)
	if e == nil {
		return
	}
	if x.refusal != door.None {
		e = e.Str("refused", x.refusal.Label())
	}
	if _, standIn := door.Refusal(r); !standIn { // a stand-in's method and path are not the client's
		e = e.Str("method", r.Method).Str("path", r.URL.Path)
	}
	e = e.Str("tenant", x.tenant)
	if x.region >= 0 {
		e = e.Str("region", x.rt.byID[x.region].st.name)
	}
	if x.router != nil {
		e = e.Str("router", x.router.name)
	}
	e.Int("status", status).Str("outcome", result).Int("attempts", x.tries).
		Dur("duration_ms", clock.System.Now().Sub(x.start)).Str("request_id", reqID).Str("client", x.addr).
		Msg("request")
}
