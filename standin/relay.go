package standin

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// relay sends the request to a router of the home region and passes its answer back as is.
//
// The home's routers are tried starting round robin. A connection never made moves on to the
// next router; any other failure, or an answer without Fenec-Shard, is answered 502
// home_unreachable by this router (with the Fenec-Shard, Fenec-Home and CORS headers that
// handle has already set). The request context is the client's, so a client that leaves
// cancels the relay.
func (rt *Router) relay(w http.ResponseWriter, req *http.Request, home string, ex *exchange) {
	c := rt.c
	reg := c.byName[home]
	targets := reg.relayAddrs()
	n := uint64(len(targets))
	first := reg.next.Add(1) - 1
	body := &relayBody{r: req.Body}

	var resp *http.Response
	var err error
	for i := range n {
		target := targets[(first+i)%n]
		ex.relayedTo = target
		resp, err = c.transport.RoundTrip(rt.outRequest(req, target, body))
		if err == nil || req.Context().Err() != nil || !isDialError(err) || body.read {
			break
		}
	}
	if err != nil {
		if req.Context().Err() != nil {
			return // the client left: nobody to answer
		}
		c.log.Debug().Err(err).Str("router", rt.addr).Str("home_router", ex.relayedTo).Msg("relay failed")
		writeError(w, http.StatusBadGateway, "home_unreachable", "no router of the home region answered")
		return
	}
	defer resp.Body.Close()
	if len(resp.Header.Values(hdrShard)) == 0 {
		writeError(w, http.StatusBadGateway, "home_unreachable", "the home region answered without Fenec-Shard")
		return
	}

	h := w.Header()
	clear(h) // the home's answer, as the home made it: one set of CORS headers, its Fenec-Home
	for k, v := range resp.Header {
		h[k] = v
	}
	removeHopByHop(h)
	// Shows a client (the demo, a curl) that this answer was relayed, and by which router.
	h.Set(hdrRelayedBy, rt.addr)
	w.WriteHeader(resp.StatusCode)
	if flush(w) != nil { // the head at once: a stream may send nothing for a while
		return
	}
	streamBody(w, req, resp.Body)
}

// hdrRelayedBy names the router that relayed an answer to the home region (stand-in only; a
// real Fenec router says nothing).
const hdrRelayedBy = "Standin-Relayed-By"

// outRequest is req as relayed to addr: same method, path (as escaped by the client), query,
// headers (hop-by-hop ones removed) and body, plus Fenec-Router.
func (rt *Router) outRequest(req *http.Request, addr string, body *relayBody) *http.Request {
	u := &url.URL{
		Scheme:   "http",
		Host:     addr,
		Path:     req.URL.Path,
		RawPath:  req.URL.RawPath,
		RawQuery: req.URL.RawQuery,
	}
	out := &http.Request{
		Method:        req.Method,
		URL:           u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        req.Header.Clone(),
		ContentLength: req.ContentLength,
		Host:          addr,
	}
	if req.ContentLength != 0 {
		out.Body = body
	}
	removeHopByHop(out.Header)
	out.Header.Set(hdrRouter, rt.addr)
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header.Set("User-Agent", "") // no Go-http-client default: pass what the client sent
	}
	return out.WithContext(req.Context())
}

// streamBody copies the home's answer body to the client, flushing after every read, so that
// a server-sent event reaches the client as the home sends it.
func streamBody(w http.ResponseWriter, req *http.Request, body io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flush(w) != nil {
				return
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			if req.Context().Err() == nil {
				// The home failed mid-answer: cut the client's connection rather than
				// end the answer as if it were complete.
				panic(http.ErrAbortHandler)
			}
			return
		}
	}
}

// relayBody is the client's body, lent to one attempt after another: the transport closes a
// request body on error, and the next attempt still needs it. read records whether any byte
// went out, after which another router must not be tried.
type relayBody struct {
	r    io.Reader
	read bool
}

func (b *relayBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		b.read = true
	}
	return n, err
}

func (b *relayBody) Close() error { return nil }

// isDialError reports whether err is a connection never made (refused, no route, dial
// timeout): the request did not reach the router.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// hopByHop are the headers of one connection, never passed on (RFC 9110 section 7.6.1).
var hopByHop = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopByHop {
		h.Del(name)
	}
}
