package standin

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Headers of the router protocol.
const (
	hdrShard   = "Fenec-Shard"  // on every answer of a router: "this is a router's answer"
	hdrHome    = "Fenec-Home"   // request: "1" asks for the home; answer: the tenant's home region
	hdrRouter  = "Fenec-Router" // added by a relaying router: its address
	hdrClient  = "Fenec-Client" // added by the entry: "<address> <unix-seconds> <mark>"
	hdrWait    = "Fenec-Wait"   // on a write: hold it this many seconds before applying
	hdrIdemKey = "Idempotency-Key"
	hdrReplay  = "Idempotent-Replayed"
	hdrReqID   = "X-Request-Id"
)

// maxBody is the largest request body a router reads into memory (writes, echo, slow).
const maxBody = 32 << 20

// Router is one stand-in router: one listener, one region. Its methods are safe for
// concurrent use.
type Router struct {
	c          *Cluster
	region     string
	addr       string // the address others dial and Fenec-Router names ("127.0.0.1:7101")
	listenAddr string // the address bound, used again when a fault is cleared
	url        string
	srv        *http.Server

	mu    sync.Mutex // guards the following fields
	fault Fault
	ln    net.Listener // nil while the fault is down or refuse
	conns map[net.Conn]http.ConnState
}

// Addr returns the router's address, host:port, as Fenec-Router and the admin API name it.
func (rt *Router) Addr() string { return rt.addr }

// Region returns the router's region.
func (rt *Router) Region() string { return rt.region }

// URL returns "http://" + Addr().
func (rt *Router) URL() string { return rt.url }

// Fault returns the router's current fault.
func (rt *Router) Fault() Fault {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.fault
}

func newRouter(c *Cluster, region string, ln net.Listener) *Router {
	listenAddr := ln.Addr().String()
	addr := listenAddr
	if host, port, err := net.SplitHostPort(listenAddr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
	}
	rt := &Router{
		c:          c,
		region:     region,
		addr:       addr,
		listenAddr: listenAddr,
		url:        "http://" + addr,
		ln:         ln,
		conns:      make(map[net.Conn]http.ConnState),
	}
	rt.srv = &http.Server{
		Handler:           rt,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
		ConnState:         rt.connState,
		BaseContext:       func(net.Listener) context.Context { return c.ctx },
		ConnContext: func(ctx context.Context, conn net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, conn)
		},
		ErrorLog: log.New(serverLogWriter{c, addr}, "", 0),
	}
	return rt
}

// serveLocked serves ln until it is closed. The caller holds rt.mu and c.lifeMu (read), and
// the cluster is not closed.
func (rt *Router) serveLocked(ln net.Listener) {
	rt.c.serving.Add(1)
	go func() {
		defer rt.c.serving.Done()
		rt.srv.Serve(ln) // returns when ln is closed: by a fault or by Close
	}()
}

// connState tracks the connections, so that down and refuse can close them, and closes
// a connection that turns idle while the router is refusing.
func (rt *Router) connState(conn net.Conn, state http.ConnState) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch state {
	case http.StateHijacked, http.StateClosed:
		delete(rt.conns, conn)
		return
	}
	rt.conns[conn] = state
	if rt.fault.Mode == FaultDown || (rt.fault.Mode == FaultRefuse && state == http.StateIdle) {
		conn.Close()
	}
}

// shutdown closes the listener and every connection; used by Cluster.Close.
func (rt *Router) shutdown() {
	rt.mu.Lock()
	if rt.ln != nil {
		rt.ln.Close()
		rt.ln = nil
	}
	rt.mu.Unlock()
	rt.srv.Close()
}

// connKey is the request context key of the request's connection.
type connKey struct{}

// requestConn returns the connection req came on.
func requestConn(req *http.Request) net.Conn {
	conn, _ := req.Context().Value(connKey{}).(net.Conn)
	return conn
}

func (rt *Router) isDown() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.fault.Mode == FaultDown
}

// exchange is what the handling of one request learns, for its Seen record.
type exchange struct {
	tenant     string
	rest       string // the path after /t/<tenant>
	under      bool   // the path is under /t/
	pathErr    error
	fromRouter bool   // the request carries Fenec-Router
	relayedTo  string // the home router last asked, "" if not relayed
	noAnswer   bool   // the router sent no answer (reset, blackhole, down, client gone)
}

// ServeHTTP serves the admin API and the tenant API.
func (rt *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	c := rt.c
	if !c.enter() {
		w.Header().Set(hdrShard, "1")
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusServiceUnavailable, "closing", "the stand-in is closing")
		return
	}
	defer c.leave()
	if strings.HasPrefix(req.URL.Path, adminPrefix) {
		rt.serveAdmin(w, req)
		return
	}

	start := c.clock.Now()
	ex := &exchange{fromRouter: len(req.Header.Values(hdrRouter)) > 0}
	ex.tenant, ex.rest, ex.under, ex.pathErr = splitTenant(req.URL.Path)
	mark := ""
	if !ex.fromRouter {
		mark = c.marks.check(req.Header.Values(hdrClient), start)
	}
	f := rt.Fault()
	rec := Seen{
		Router:     rt.addr,
		Region:     rt.region,
		Method:     req.Method,
		Path:       req.URL.Path,
		Tenant:     ex.tenant,
		RequestID:  req.Header.Get(hdrReqID),
		From:       req.Header.Get(hdrRouter),
		Header:     req.Header.Clone(),
		ClientMark: mark,
		Start:      start,
	}
	if f.Mode != FaultNone {
		rec.Fault = f.String()
	}
	seq := c.seen.add(rec)
	aw := &answerWriter{ResponseWriter: w}
	defer func() {
		end := c.clock.Now()
		gone := req.Context().Err() != nil && c.ctx.Err() == nil && !rt.isDown()
		status := aw.status
		if ex.noAnswer {
			status = 0
		}
		c.seen.update(seq, func(s *Seen) {
			s.End = end
			s.Status = status
			s.ClientGone = gone
			s.Relayed = ex.relayedTo != ""
			s.RelayedTo = ex.relayedTo
		})
		c.log.Debug().Str("router", rt.addr).Str("region", rt.region).Str("method", req.Method).
			Str("path", req.URL.Path).Str("tenant", ex.tenant).Str("request_id", rec.RequestID).
			Str("relayed_to", ex.relayedTo).Str("fault", rec.Fault).Str("client_mark", mark).
			Int("status", status).Bool("client_gone", gone).Dur("duration_ms", end.Sub(start)).
			Msg("request")
	}()

	if rt.applyFault(aw, req, ex, f) {
		return
	}
	rt.handle(aw, req, ex)
	if aw.status == 0 && req.Context().Err() != nil {
		ex.noAnswer = true // the client left before any answer
	}
}

// handle answers a request: a CORS preflight, a refusal (a chunked body, a bad path, an
// unknown tenant), a relay to the home region, or the tenant API. It sets Fenec-Shard, and
// Fenec-Home and the CORS headers when they are due, on every answer it makes; a relayed
// answer is passed back as the home made it.
func (rt *Router) handle(w http.ResponseWriter, req *http.Request, ex *exchange) {
	c := rt.c
	h := w.Header()
	h.Set(hdrShard, "1")
	home, known := "", false
	if ex.under && ex.pathErr == nil {
		home, known = c.home(ex.tenant)
	}
	if known && strings.TrimSpace(req.Header.Get(hdrHome)) == "1" {
		h.Set(hdrHome, home)
	}
	if c.cors.enabled() && isPreflight(req) {
		c.cors.preflight(w, req)
		return
	}
	c.cors.annotate(h, req)
	switch {
	case len(req.TransferEncoding) > 0:
		// Routers take no chunked body (a body comes with a Content-Length): an entry that
		// sends one fails its tests.
		writeError(w, http.StatusLengthRequired, "length_required", "routers take no chunked body")
	case !ex.under:
		writeError(w, http.StatusNotFound, "not_found", "no such path; the tenant API is under /t/<tenant>/")
	case ex.pathErr != nil:
		writeError(w, http.StatusBadRequest, "bad_path", ex.pathErr.Error())
	case !known:
		writeError(w, http.StatusNotFound, "unknown_tenant", "no such tenant in the directory")
	case home != rt.region && ex.fromRouter:
		// The directory moved while the request was relayed to us: never relay twice.
		writeError(w, http.StatusBadGateway, "not_home", "relayed to a router that is not the tenant's home")
	case home != rt.region:
		rt.relay(w, req, home, ex)
	default:
		rt.serveTenant(w, req, ex)
	}
}

// splitTenant splits a decoded path under /t/ into the tenant and the rest. under is false for
// a path outside /t/; err is set for an empty or too long tenant or a NUL in the path.
func splitTenant(path string) (tenant, rest string, under bool, err error) {
	const prefix = "/t/"
	if !strings.HasPrefix(path, prefix) {
		return "", "", false, nil
	}
	tenant = path[len(prefix):]
	if i := strings.IndexByte(tenant, '/'); i >= 0 {
		tenant, rest = tenant[:i], tenant[i:]
	}
	switch {
	case tenant == "":
		return "", rest, true, errors.New("empty tenant")
	case len(tenant) > maxTenantLen:
		return "", rest, true, errors.New("tenant longer than 255 bytes")
	case strings.IndexByte(path, 0) >= 0:
		return "", rest, true, errors.New("NUL in path")
	}
	return tenant, rest, true, nil
}

// answerWriter records the status answered to the client.
type answerWriter struct {
	http.ResponseWriter
	status int // 0 until the head is written
}

func (a *answerWriter) WriteHeader(code int) {
	if a.status == 0 && code >= 200 {
		a.status = code
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *answerWriter) Write(p []byte) (int, error) {
	if a.status == 0 {
		a.WriteHeader(http.StatusOK)
	}
	return a.ResponseWriter.Write(p)
}

func (a *answerWriter) FlushError() error {
	if a.status == 0 {
		a.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(a.ResponseWriter).Flush()
}

func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// flush sends what was written so far to the client.
func flush(w http.ResponseWriter) error { return http.NewResponseController(w).Flush() }

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal"}`)
	}
	writeJSONBytes(w, status, append(b, '\n'))
}

func writeJSONBytes(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message,omitempty"`
}

// writeError answers a JSON error {"error": code, "message": msg}.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: code, Message: msg})
}

// writeBodyError answers a request whose body could not be read.
func writeBodyError(w http.ResponseWriter, err error) {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "the stand-in reads bodies up to 32 MiB")
		return
	}
	writeError(w, http.StatusBadRequest, "bad_body", "reading the request body: "+err.Error())
}

// serverLogWriter sends the http.Server's own complaints to the debug log.
type serverLogWriter struct {
	c    *Cluster
	addr string
}

func (s serverLogWriter) Write(p []byte) (int, error) {
	s.c.log.Debug().Str("router", s.addr).Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}
