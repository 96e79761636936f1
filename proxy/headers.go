package proxy

import (
	"bufio"
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	"github.com/fenec/fenec-entry/internal/httpsyntax"
)

// dropToRouter says whether a client header must not reach the router
// (docs/REFERENCE.md, "Headers"). key is in canonical form, as net/http stores it.
// Hop-by-hop headers named by Connection are handled by the caller.
func dropToRouter(key string) bool {
	switch key {
	case "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"Fenec-Router", "Fenec-Global", "Fenec-Verified", "Fenec-Client", "Fenec-Home",
		"X-Forwarded-For", "X-Real-Ip", "Forwarded", "True-Client-Ip",
		// Expect: the body is read by the entry (buffered) or streamed at
		// once, so the router must not answer 100 Continue in between.
		"Expect",
		// Host and Content-Length are written by writeHead itself.
		"Host", "Content-Length":
		return true
	}
	return httpsyntax.HasFoldPrefix(key, "Proxy-") || httpsyntax.HasFoldPrefix(key, "Cf-") ||
		httpsyntax.HasFoldPrefix(key, "Fly-")
}

// dropToClient says whether a router's answer header must not reach the client.
func dropToClient(key string) bool {
	switch key {
	case "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"Proxy-Connection", "Proxy-Authenticate",
		"Fenec-Home", "Fenec-Verified":
		return true
	}
	return false
}

// stripList returns names canonical, each once, without those dropToRouter drops anyway.
func stripList(names []string) []string {
	var out []string
	for _, n := range names {
		k := textproto.CanonicalMIMEHeaderKey(n)
		if !dropToRouter(k) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// stripped reports whether key is one of strip (canonical names), without regard to case:
// a router may look its headers up in any case.
func stripped(strip []string, key string) bool {
	for _, s := range strip {
		if len(s) == len(key) && strings.EqualFold(s, key) {
			return true
		}
	}
	return false
}

// copyAnswerHeader copies a router's answer headers to the client's, without
// hop-by-hop headers (those Connection names too: RFC 9110 section 7.6.1) and the routers'
// own Fenec-Home and Fenec-Verified.
// Value slices are shared, not copied: the answer's header is not used again.
func copyAnswerHeader(dst, src http.Header) {
	conn := src["Connection"]
	for k, vv := range src {
		if dropToClient(k) || (len(conn) > 0 && httpsyntax.ListHasToken(conn, k)) {
			continue
		}
		dst[k] = vv
	}
}

// outHead is what the entry adds to the request head it sends to a router.
type outHead struct {
	method        string
	uri           string // the request target as the client sent it (still escaped)
	host          string
	requestID     string   // non-empty: add X-Request-Id (the client sent none)
	clientMark    string   // non-empty: add Fenec-Client
	contentLength int64    // -1: no body and no Content-Length
	strip         []string // more client headers to leave out (Handler.strip); shared, read-only
}

// writeHead writes an HTTP/1.1 request head for a router: the client's
// headers less those dropToRouter, Connection and h.strip name and those whose
// name holds "_" (many router frameworks read Fenec_Client as Fenec-Client: docs/REFERENCE.md,
// "At the door"), then the entry's own. It returns how many it left out for a "_".
// It writes straight into the connection's buffer and does not allocate.
func writeHead(w *bufio.Writer, h *outHead, hdr http.Header) (underscores int) {
	w.WriteString(h.method)
	w.WriteByte(' ')
	w.WriteString(h.uri)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(h.host)
	w.WriteString("\r\n")
	conn := hdr["Connection"]
	for k, vv := range hdr {
		if dropToRouter(k) || (len(conn) > 0 && httpsyntax.ListHasToken(conn, k)) ||
			(len(h.strip) > 0 && stripped(h.strip, k)) {
			continue
		}
		if strings.IndexByte(k, '_') >= 0 {
			underscores += len(vv)
			continue
		}
		for _, v := range vv {
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(v)
			w.WriteString("\r\n")
		}
	}
	w.WriteString("Fenec-Home: 1\r\n")
	if h.requestID != "" {
		w.WriteString("X-Request-Id: ")
		w.WriteString(h.requestID)
		w.WriteString("\r\n")
	}
	if h.clientMark != "" {
		w.WriteString("Fenec-Client: ")
		w.WriteString(h.clientMark)
		w.WriteString("\r\n")
	}
	if h.contentLength >= 0 {
		w.WriteString("Content-Length: ")
		var b [20]byte
		w.Write(appendInt(b[:0], h.contentLength))
		w.WriteString("\r\n")
	}
	w.WriteString("\r\n")
	return underscores
}

func appendInt(b []byte, n int64) []byte {
	if n == 0 {
		return append(b, '0')
	}
	var tmp [20]byte
	i := len(tmp)
	for n > 0 {
		i--
		tmp[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, tmp[i:]...)
}
