package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/homes"
)

// Handler is the entry's client-facing http.Handler. Create it with New; it
// is safe for concurrent use. Close releases its idle router connections.
type Handler struct {
	cfg     Config
	regions []regionState
	byName  map[string]int // region name -> ID
	homes   *homes.Table
	marker  *clientMarker // nil without an entry token
	strip   []string      // Config.StripHeaders, canonical, without those dropToRouter drops
	cors    *corsPolicy   // nil without --cors
	log     *zerolog.Logger
	met     *boundMetrics

	defaultRegion   int
	continentRegion map[string]int

	inflight atomic.Int64
	budget   bodyBudget // request body bytes held in memory, across requests
	idPrefix string
	idSeq    atomic.Uint64
}

// regionState is one region's routers and which of them to ask first.
type regionState struct {
	name     string
	routers  []*router
	lastGood atomic.Uint32 // index of the router to start from
}

// New builds a Handler from cfg. It does no I/O.
func New(cfg Config) (*Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	h := &Handler{
		cfg:             c,
		byName:          map[string]int{},
		homes:           c.Homes,
		cors:            newCORS(c.CORS),
		log:             c.Logger,
		met:             bindMetrics(c.Metrics, c.Regions),
		continentRegion: map[string]int{},
	}
	h.budget.max = c.MaxBufferedBytes
	h.met.m.gauges(h)
	h.regions = make([]regionState, len(c.Regions))
	for i, reg := range c.Regions {
		rs := &h.regions[i]
		rs.name = reg.Name
		for j, u := range reg.Routers {
			rs.routers = append(rs.routers, newRouter(i, j, u, &c, h.met.m.IdleConnsDropped))
		}
		h.byName[reg.Name] = i
	}
	if c.DefaultRegion != "" {
		h.defaultRegion = h.byName[c.DefaultRegion]
	}
	for cont, reg := range c.Continents {
		h.continentRegion[cont] = h.byName[reg]
	}
	if c.EntryToken != "" {
		h.marker = newClientMarker(c.EntryToken)
	}
	h.strip = stripList(c.StripHeaders)
	var b [6]byte
	rand.Read(b[:])
	h.idPrefix = hex.EncodeToString(b[:]) + "-"
	return h, nil
}

// Close closes idle router connections and keeps none from then on.
// Requests still in flight finish. Safe to call more than once.
func (h *Handler) Close() {
	for i := range h.regions {
		for _, rt := range h.regions[i].routers {
			rt.closeIdle(true)
		}
	}
}

// Inflight returns the number of requests in flight.
func (h *Handler) Inflight() int64 { return h.inflight.Load() }

// exchange is one client request's state across its attempts.
type exchange struct {
	start     time.Time
	tenant    string
	retryable bool
	addr      string
	head      outHead
	body      reqBody

	// for the log line
	region int // -1: none asked
	router *router
	status int
	result string
	tries  int
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
	}
	if h.cors != nil && isPreflight(r) {
		h.cors.preflight(w, r)
		h.met.requests[resPreflight].Inc()
		return
	}

	x := exchange{start: time.Now(), region: -1} // the system's clock: the log line's duration decides nothing
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
		// The client's body broke off: the client is gone or broken.
		h.finish(&x, r, reqID, resCanceled, 0)
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
	if h.marker != nil {
		x.head.clientMark = h.marker.mark(x.addr, h.cfg.Clock.Now().Unix())
	}

	h.forward(w, r, &x)
	h.finish(&x, r, reqID, x.result, x.status)
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
	e = e.Str("method", r.Method).Str("path", r.URL.Path).Str("tenant", x.tenant)
	if x.region >= 0 {
		e = e.Str("region", h.regions[x.region].name)
	}
	if x.router != nil {
		e = e.Str("router", x.router.name)
	}
	e.Int("status", status).Str("outcome", result).Int("attempts", x.tries).
		Dur("duration", time.Since(x.start)).Str("request_id", reqID).Str("client", x.addr).
		Msg("request")
}
