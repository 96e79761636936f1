package clientinfo

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Modes of the client's address (--client-ip).
const (
	ModePeer          = "peer"           // the TCP peer
	ModeProxyProtocol = "proxy-protocol" // the PROXY header's source (see ProxyProtocol)
	ModeFly           = "fly"            // Fly-Client-IP, from any peer unless trusted proxies are given
	ModeHeaderPrefix  = "header:"        // header:NAME: the header NAME, from trusted proxies only
)

// FlyClientIPHeader is the header Fly's proxy sets to the client's address (ModeFly).
const FlyClientIPHeader = "Fly-Client-Ip"

// AddrFunc returns the function for proxy.Config.ClientAddr under mode (one of the Mode
// constants; the caller validates it), or nil for the TCP peer (the proxy's default).
// trusted are the proxies whose address headers are believed. Under ModeProxyProtocol the
// listener (ProxyProtocol) has already made RemoteAddr the PROXY header's source; it is
// written unmapped, like the others.
func AddrFunc(mode string, trusted []netip.Prefix) func(*http.Request) string {
	switch {
	case mode == ModeProxyProtocol:
		return func(r *http.Request) string { return peerHost(r.RemoteAddr) }
	case mode == ModeFly:
		// Fly's proxy always overwrites Fly-Client-IP, so without --trusted-proxies it is
		// believed from any peer; with them, only from them.
		h := headerAddr{name: FlyClientIPHeader, trusted: trusted, anyPeer: len(trusted) == 0}
		return h.addr
	case strings.HasPrefix(mode, ModeHeaderPrefix):
		name := http.CanonicalHeaderKey(strings.TrimPrefix(mode, ModeHeaderPrefix))
		h := headerAddr{name: name, trusted: trusted}
		return h.addr
	}
	return nil
}

// SourceHeaders returns the headers the operator named as sources of the client's address
// or country (mode header:NAME, countryHeader), for proxy.Config.StripHeaders: the router
// must learn the client from Fenec-Client alone (docs/REFERENCE.md, "Headers"). Fly-Client-IP
// (ModeFly) is not listed: the proxy drops every Fly-* header anyway.
func SourceHeaders(mode, countryHeader string) []string {
	var names []string
	if name, ok := strings.CutPrefix(mode, ModeHeaderPrefix); ok {
		names = append(names, name)
	}
	if countryHeader != "" {
		names = append(names, countryHeader)
	}
	return names
}

// headerAddr takes the client's address from a header (X-Forwarded-For style: a list of
// addresses, the nearest proxy's last) when the TCP peer is a trusted proxy. Safe for
// concurrent use; it does not change after construction.
type headerAddr struct {
	name    string // canonical header name
	trusted []netip.Prefix
	anyPeer bool // believe the header from any peer
}

// addr returns the client's address without port or brackets: the right-most address of the
// header that is not a trusted proxy (so that a client cannot choose its address by sending
// the header itself), the left-most if all are trusted, and the TCP peer's if the peer is not
// trusted, the header is absent or any element of it is not an address.
func (h headerAddr) addr(r *http.Request) string {
	peer := peerHost(r.RemoteAddr)
	if !h.anyPeer {
		pa, err := netip.ParseAddr(peer)
		if err != nil || !h.isTrusted(pa) {
			return peer
		}
	}
	vals := r.Header[h.name]
	var last netip.Addr
	for i := len(vals) - 1; i >= 0; i-- {
		v := vals[i]
		for v != "" {
			item := v
			if j := strings.LastIndexByte(v, ','); j >= 0 {
				item, v = v[j+1:], v[:j]
			} else {
				v = ""
			}
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			a, ok := parseAddrMaybePort(item)
			if !ok {
				return peer
			}
			if !h.isTrusted(a) {
				return a.String()
			}
			last = a
		}
	}
	if last.IsValid() {
		return last.String()
	}
	return peer
}

func (h headerAddr) isTrusted(a netip.Addr) bool {
	for _, p := range h.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseAddrMaybePort parses "1.2.3.4", "1.2.3.4:80", "::1" or "[::1]:80", and returns the
// address unmapped and without zone.
func parseAddrMaybePort(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone(""), true
}

// peerAddr returns the address of a RemoteAddr ("1.2.3.4:80", "[::1]:80"), unmapped and
// without zone, without allocating.
func peerAddr(remote string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// peerHost returns the host of a RemoteAddr, unmapped; RemoteAddr itself if it has no port.
func peerHost(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return remote
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().WithZone("").String()
	}
	return host
}
