// Package discover finds a region's routers in DNS: every address a name resolves to
// (dns+http://NAME:PORT), or every SRV target and port (srv+http://NAME), resolved at start and
// again every interval, keeping a name's last good answer when a lookup fails. It knows
// nothing of HTTP requests or of the proxy: it hands out Targets, and says when they change.
package discover

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Kind is how a Source's name is looked up.
type Kind uint8

const (
	KindAddr Kind = iota + 1 // A and AAAA records, one port for all (dns+http://NAME:PORT)
	KindSRV                  // SRV records: each target and its port (srv+http://NAME)
)

// Source is one DNS name of a region's routers.
type Source struct {
	Kind   Kind
	Scheme string // http or https: how the routers found are spoken to
	Name   string // the DNS name, without a trailing dot
	Port   string // KindAddr: the routers' port; KindSRV: ""
}

// String is the source as --routers writes it.
func (s Source) String() string {
	switch s.Kind {
	case KindAddr:
		return "dns+" + s.Scheme + "://" + net.JoinHostPort(s.Name, s.Port)
	case KindSRV:
		return "srv+" + s.Scheme + "://" + s.Name
	}
	return "?"
}

// IsSource reports whether u is written as a DNS source (a dns+ or srv+ scheme), good or not.
func IsSource(u *url.URL) bool {
	return strings.HasPrefix(u.Scheme, "dns+") || strings.HasPrefix(u.Scheme, "srv+")
}

// ParseSource reads a dns+http(s)://NAME:PORT or srv+http(s)://NAME router of --routers. Its
// errors say what is wrong, without the URL.
func ParseSource(u *url.URL) (Source, error) {
	kind, scheme, _ := strings.Cut(u.Scheme, "+")
	if scheme != "http" && scheme != "https" {
		return Source{}, errors.New("scheme must be dns+http, dns+https, srv+http or srv+https")
	}
	switch {
	case u.User != nil:
		return Source{}, errors.New("user information is not allowed")
	case u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return Source{}, errors.New("want a name and nothing after it (no path, query or fragment)")
	}
	s := Source{Scheme: scheme}
	switch kind {
	case "dns":
		s.Kind = KindAddr
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || port == "" {
			return Source{}, errors.New("want dns+" + scheme + "://NAME:PORT (the port every address serves on)")
		}
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			return Source{}, fmt.Errorf("port %q: want 1 to 65535", port)
		}
		s.Name, s.Port = host, port
	case "srv":
		s.Kind = KindSRV
		if u.Port() != "" {
			return Source{}, errors.New("want srv+" + scheme + "://NAME with no port (each SRV record names its own)")
		}
		s.Name = u.Hostname()
	default:
		return Source{}, errors.New("scheme must be dns+http, dns+https, srv+http or srv+https")
	}
	s.Name = strings.TrimSuffix(s.Name, ".")
	if err := checkName(s.Name); err != nil {
		return Source{}, err
	}
	return s, nil
}

// checkName accepts a DNS name: labels of letters, digits, '-' and '_' (SRV names such as
// _http._tcp.routers.service.consul), 1 to 63 bytes each, 253 in all. An IP address is
// refused: write it as http://ADDR:PORT.
func checkName(name string) error {
	if name == "" {
		return errors.New("no name")
	}
	if net.ParseIP(name) != nil {
		return fmt.Errorf("%q is an address, not a name (write http://ADDRESS:PORT)", name)
	}
	if len(name) > 253 {
		return fmt.Errorf("name of %d bytes, at most 253", len(name))
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("name %q: each dot-separated label must be 1 to 63 bytes", name)
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("name %q: want letters, digits, '-', '_' and dots", name)
			}
		}
	}
	return nil
}

// Target is one router found.
type Target struct {
	Scheme string // http or https
	Addr   string // IP:port, where to connect
	Name   string // the DNS name it was found by (the SRV target for KindSRV): what an https router's certificate must hold
}

// URL is the target as a router URL: scheme://IP:port.
func (t Target) URL() *url.URL { return &url.URL{Scheme: t.Scheme, Host: t.Addr} }
