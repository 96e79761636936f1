package httpsyntax

import "net/netip"

// ValidHost reports whether h is a Host value (RFC 9110 section 7.2): uri-host [ ":" port ]
// (RFC 3986 section 3.2.2), the host a reg-name, which holds IPv4 addresses too, or an IPv6
// address in brackets, the port at most five digits. The empty string is valid (an empty
// Host, which only HTTP/1.0 may send: that is the caller's to refuse).
//
// It is stricter than RFC 3986 where no client is hurt: no IPvFuture, no IPv6 zone, no port
// past five digits, a host before a colon. It is stricter than httpguts.ValidHostHeader, which
// takes any string of the bytes a host and port may hold ("a:b", "[::1", "]"): what it takes,
// net/http takes.
func ValidHost[T string | []byte](h T) bool {
	host, port := h, h[:0]
	if len(h) > 0 && h[0] == '[' {
		end := index(h, ']')
		if end < 0 {
			return false
		}
		a, err := netip.ParseAddr(string(h[1:end]))
		if err != nil || !a.Is6() || a.Zone() != "" {
			return false
		}
		rest := h[end+1:]
		if len(rest) > 0 {
			if rest[0] != ':' {
				return false
			}
			port = rest[1:]
		}
		host = h[:0]
	} else if i := index(h, ':'); i >= 0 {
		host, port = h[:i], h[i+1:]
		if len(host) == 0 {
			return false
		}
	}
	if len(port) > 5 {
		return false
	}
	for i := 0; i < len(port); i++ {
		if c := port[i]; c < '0' || c > '9' {
			return false
		}
	}
	for i := 0; i < len(host); i++ {
		switch c := host[i]; {
		case hostc[c]:
		case c == '%': // pct-encoded
			if i+2 >= len(host) {
				return false
			}
			if _, ok := HexValue(host[i+1]); !ok {
				return false
			}
			if _, ok := HexValue(host[i+2]); !ok {
				return false
			}
			i += 2
		default:
			return false
		}
	}
	return true
}

// index is the index of the first c in s, -1 if none.
func index[T string | []byte](s T, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}
