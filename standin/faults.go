package standin

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Fault modes. A router in a fault mode applies it to every request it receives, except the
// admin API, until the fault is cleared.
const (
	// FaultNone: the router answers normally.
	FaultNone = ""
	// FaultDown: a crashed router. The listener is closed (connections are refused) and
	// every open connection is closed at once. Clearing listens again on the same address.
	FaultDown = "down"
	// FaultRefuse: the listener is closed (new connections are refused) and idle keep-alive
	// connections are closed; requests in flight finish, then their connections close.
	// Clearing listens again on the same address.
	FaultRefuse = "refuse"
	// FaultResetAfterRequest: the router processes the request fully (relays it, or applies
	// the write) and then, instead of answering, resets the TCP connection.
	FaultResetAfterRequest = "reset_after_request"
	// FaultUnmarked5xx: 502 without Fenec-Shard, as a load balancer whose backend is gone.
	// Nothing is processed.
	FaultUnmarked5xx = "unmarked_5xx"
	// FaultMarked5xxNoHome: 503 with Fenec-Shard and without Fenec-Home. Nothing is
	// processed.
	FaultMarked5xxNoHome = "marked_5xx_no_home"
	// FaultSlow: the router reads the request, waits Fault.SlowMS (less if the client goes
	// away, and then it processes nothing), then processes it.
	FaultSlow = "slow"
	// FaultBlackhole: the router reads the request and never answers, until the client
	// closes the connection. Nothing is processed.
	FaultBlackhole = "blackhole"
)

// FaultMode describes one fault mode for the help and the README.
type FaultMode struct {
	Mode    string // one of the Fault* constants, FaultNone excepted
	Syntax  string // as ParseFault reads it: Mode, or "slow=<ms>"
	Summary string // one short phrase: what the entry sees
}

// faultModes is every fault mode, in the order the help and the README list them. validate
// accepts exactly these (and FaultNone): a mode added to the constants but not here is refused.
var faultModes = []FaultMode{
	{FaultDown, FaultDown, "a crashed router: connections refused, open ones closed at once"},
	{FaultRefuse, FaultRefuse, "new connections refused; requests in flight finish"},
	{FaultResetAfterRequest, FaultResetAfterRequest, "processed (a write applied), then the connection reset"},
	{FaultUnmarked5xx, FaultUnmarked5xx, "502 without Fenec-Shard, as from a load balancer; nothing done"},
	{FaultMarked5xxNoHome, FaultMarked5xxNoHome, "503 with Fenec-Shard, without Fenec-Home; nothing done"},
	{FaultSlow, FaultSlow + "=<ms>", "waits <ms> milliseconds, then answers as usual"},
	{FaultBlackhole, FaultBlackhole, "reads the request, never answers (until the client leaves); nothing done"},
}

// FaultModes returns every fault mode ("ok", no fault, excepted), in the order of the constants.
func FaultModes() []FaultMode { return append([]FaultMode(nil), faultModes...) }

// Fault is the fault mode of one router. The zero value is no fault.
type Fault struct {
	Mode   string // one of the Fault* constants
	SlowMS int    // the wait of FaultSlow, in milliseconds; 0 for every other mode
}

// ParseFault parses a fault as the admin API and --fault write it: "ok" or "" (no fault),
// "down", "refuse", "reset_after_request", "unmarked_5xx", "marked_5xx_no_home",
// "slow=<ms>" or "blackhole".
func ParseFault(s string) (Fault, error) {
	s = strings.TrimSpace(s)
	mode, arg, hasArg := strings.Cut(s, "=")
	if mode == "ok" {
		mode = FaultNone
	}
	if mode == FaultSlow {
		ms, err := strconv.Atoi(arg)
		if !hasArg || err != nil || ms < 0 {
			return Fault{}, fmt.Errorf("standin: fault %q: want slow=<milliseconds>", s)
		}
		return Fault{Mode: FaultSlow, SlowMS: ms}, nil
	}
	f := Fault{Mode: mode}
	if hasArg {
		return Fault{}, fmt.Errorf("standin: fault %q: only slow takes a value", s)
	}
	if err := f.validate(); err != nil {
		return Fault{}, err
	}
	return f, nil
}

// String returns the fault as ParseFault reads it ("ok" for no fault).
func (f Fault) String() string {
	switch f.Mode {
	case FaultNone:
		return "ok"
	case FaultSlow:
		return FaultSlow + "=" + strconv.Itoa(f.SlowMS)
	}
	return f.Mode
}

func (f Fault) validate() error {
	known := f.Mode == FaultNone
	for _, m := range faultModes {
		known = known || m.Mode == f.Mode
	}
	switch {
	case !known:
		want := []string{"ok"}
		for _, m := range faultModes {
			want = append(want, m.Syntax)
		}
		return fmt.Errorf("standin: unknown fault %q (want %s or %s)", f.Mode,
			strings.Join(want[:len(want)-1], ", "), want[len(want)-1])
	case f.Mode == FaultSlow && f.SlowMS < 0:
		return fmt.Errorf("standin: fault slow: SlowMS must not be negative, got %d", f.SlowMS)
	case f.Mode != FaultSlow && f.SlowMS != 0:
		return fmt.Errorf("standin: fault %q takes no SlowMS", f.Mode)
	}
	return nil
}

// offline reports whether the mode keeps the router's listener closed.
func (f Fault) offline() bool { return f.Mode == FaultDown || f.Mode == FaultRefuse }

// setFault switches the router to f: it closes or reopens the listener and closes the
// connections the mode says. The connection keep (nil for none), the one that carries the
// admin request setting the fault, is left to close once it has carried the answer.
func (rt *Router) setFault(f Fault, keep net.Conn) error {
	if err := f.validate(); err != nil {
		return err
	}
	c := rt.c
	c.lifeMu.RLock()
	defer c.lifeMu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if f.offline() {
		if rt.ln != nil {
			rt.ln.Close()
			rt.ln = nil
		}
		for conn, state := range rt.conns {
			if conn != keep && (f.Mode == FaultDown || state == http.StateIdle) {
				conn.Close()
			}
		}
	} else if rt.ln == nil {
		ln, err := net.Listen("tcp", rt.listenAddr)
		if err != nil {
			return fmt.Errorf("standin: router %s: clear fault %s: %w", rt.addr, rt.fault, err)
		}
		rt.ln = ln
		rt.serveLocked(ln)
	}
	if rt.fault != f {
		c.log.Info().Str("router", rt.addr).Str("region", rt.region).
			Str("from", rt.fault.String()).Str("fault", f.String()).Msg("fault changed")
	}
	rt.fault = f
	return nil
}

// applyFault runs the request-time part of fault f. It returns true when the fault has dealt
// with the request (answered it, reset it, or held it until the client left) and the request
// must not be processed again.
func (rt *Router) applyFault(w *answerWriter, req *http.Request, ex *exchange, f Fault) bool {
	switch f.Mode {
	case FaultDown:
		// Accepted in the instant before the listener closed: a crashed router says nothing.
		ex.noAnswer = true
		abortConn(w)
		return true
	case FaultUnmarked5xx:
		h := w.Header()
		clear(h)
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "502 Bad Gateway\n")
		return true
	case FaultMarked5xxNoHome:
		h := w.Header()
		clear(h)
		h.Set(hdrShard, "1")
		rt.c.cors.annotate(h, req)
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this router cannot serve now")
		return true
	case FaultBlackhole:
		io.Copy(io.Discard, req.Body) // the client's departure is seen once the body is read
		<-req.Context().Done()
		ex.noAnswer = true
		return true
	case FaultSlow:
		if err := bufferBody(w, req); err != nil {
			writeBodyError(w, err)
			return true
		}
		t := time.NewTimer(time.Duration(f.SlowMS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return false
		case <-req.Context().Done():
			ex.noAnswer = true
			return true
		}
	case FaultResetAfterRequest:
		dw := &discardWriter{header: make(http.Header)}
		rt.handle(dw, req, ex)
		ex.noAnswer = true
		resetConn(w)
		return true
	}
	return false // FaultNone, FaultRefuse: requests in flight are served
}

// bufferBody reads the request body into memory, so that the client's departure can be seen
// while the router waits (the server notices a closed connection only once the body is read).
func bufferBody(w http.ResponseWriter, req *http.Request) error {
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxBody))
	if err != nil {
		return err
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	return nil
}

// resetConn resets the client's TCP connection (RST, not FIN) instead of answering.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// abortConn closes the client's connection without an answer.
func abortConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

// errDiscarded ends streams written to a discardWriter at their first flush.
var errDiscarded = fmt.Errorf("standin: answer discarded (reset_after_request)")

// discardWriter takes the answer of a request processed under reset_after_request: the
// router does all the work, and the client gets a reset instead.
type discardWriter struct {
	header http.Header
	status int
}

func (d *discardWriter) Header() http.Header { return d.header }

func (d *discardWriter) WriteHeader(code int) {
	if d.status == 0 {
		d.status = code
	}
}

func (d *discardWriter) Write(p []byte) (int, error) {
	d.WriteHeader(http.StatusOK)
	return len(p), nil
}

// FlushError ends streams: the client will never read them.
func (d *discardWriter) FlushError() error { return errDiscarded }
