package clientinfo

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/pires/go-proxyproto"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// ProxyProtocol is --client-ip proxy-protocol (ModeProxyProtocol): the connections of a
// listener it wraps (Wrap) must start with a PROXY protocol header (v1 or v2, HAProxy's
// spec), whose source address becomes the connection's RemoteAddr and so the request's
// RemoteAddr and the client's address.
//
//   - A connection that does not start with a header, or whose header does not arrive within
//     --header-timeout, or is malformed, is closed without an answer (the spec forbids
//     guessing whether a header is there, and an answer would go to the proxy as if from the
//     client). A LOCAL header (a proxy's own health check) is accepted, with the TCP peer as
//     the address.
//   - With --trusted-proxies, a connection from a TCP peer outside them is closed at once,
//     before anything is read; without, a header is believed from any peer, so the listener
//     must be reachable by the proxies only.
//
// Each refusal is counted in fenec_entry_proxy_protocol_refused_total by reason and logged at
// debug. Safe for concurrent use; nothing in it changes after NewProxyProtocol.
type ProxyProtocol struct {
	trusted []netip.Prefix
	timeout time.Duration
	log     zerolog.Logger

	noHeader, badHeader, untrusted prometheus.Counter
}

// NewProxyProtocol returns the PROXY protocol listener's settings: trusted are the proxies
// allowed to connect (--trusted-proxies; nil for any peer), headerTimeout is how long a
// header may take to arrive (--header-timeout). It registers
// fenec_entry_proxy_protocol_refused_total in reg, if not nil, and logs refusals to log.
func NewProxyProtocol(trusted []netip.Prefix, headerTimeout time.Duration, log zerolog.Logger, reg prometheus.Registerer) *ProxyProtocol {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fenec_entry_proxy_protocol_refused_total",
		Help: "Client connections closed for want of a PROXY header (--client-ip proxy-protocol), by reason: " +
			"no_header (none, or none within --header-timeout), bad_header (malformed or not an IP address), " +
			"untrusted_peer (a TCP peer outside --trusted-proxies).",
	}, []string{"reason"})
	if reg != nil {
		reg.MustRegister(v)
	}
	return &ProxyProtocol{
		trusted:   trusted,
		timeout:   headerTimeout,
		log:       log.With().Str("listener", "client").Logger(),
		noHeader:  v.WithLabelValues("no_header"),
		badHeader: v.WithLabelValues("bad_header"),
		untrusted: v.WithLabelValues("untrusted_peer"),
	}
}

// Wrap returns l with every accepted connection reading its PROXY header first. The header is
// read by the connection's own goroutine (net/http's), never by the accept loop, and within
// --header-timeout, so a silent connection holds a goroutine for that long at most.
func (p *ProxyProtocol) Wrap(l net.Listener) net.Listener {
	return &proxyListener{Listener: &proxyproto.Listener{
		Listener:          l,
		ConnPolicy:        p.policy,
		ValidateHeader:    validateProxyHeader,
		ReadHeaderTimeout: p.timeout,
	}, p: p}
}

// policy requires a header on every connection, and, with --trusted-proxies, closes a
// connection from any other peer (an error wrapping ErrInvalidUpstream makes Accept close it
// and go on).
func (p *ProxyProtocol) policy(o proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
	if len(p.trusted) == 0 {
		return proxyproto.REQUIRE, nil
	}
	if a, ok := tcpAddr(o.Upstream); ok {
		for _, pfx := range p.trusted {
			if pfx.Contains(a) {
				return proxyproto.REQUIRE, nil
			}
		}
	}
	p.untrusted.Inc()
	p.log.Debug().Stringer("peer", o.Upstream).Str("reason", "untrusted_peer").
		Msg("proxy protocol: connection refused: the peer is not in --trusted-proxies")
	return proxyproto.REJECT, fmt.Errorf("%w: %v is not in --trusted-proxies", proxyproto.ErrInvalidUpstream, o.Upstream)
}

var errProxyHeaderFamily = errors.New("proxyproto: PROXY header without an IPv4 or IPv6 source address")

// validateProxyHeader refuses a PROXY (not LOCAL) header whose source is not an IP address (a
// Unix socket), which could not be the client's address.
func validateProxyHeader(h *proxyproto.Header) error {
	if !h.Command.IsProxy() || h.TransportProtocol.IsUnspec() {
		return nil // LOCAL, or UNSPEC: the spec says use the real peer; RemoteAddr does
	}
	if _, ok := tcpAddr(h.SourceAddr); !ok {
		return errProxyHeaderFamily
	}
	return nil
}

// tcpAddr returns the IP address of a TCP or UDP address, unmapped.
func tcpAddr(a net.Addr) (netip.Addr, bool) {
	var ip net.IP
	switch a := a.(type) {
	case *net.TCPAddr:
		ip = a.IP
	case *net.UDPAddr:
		ip = a.IP
	default:
		return netip.Addr{}, false
	}
	na, ok := netip.AddrFromSlice(ip)
	return na.Unmap(), ok
}

// proxyListener wraps go-proxyproto's listener so that a connection refused for its header is
// counted and logged.
type proxyListener struct {
	*proxyproto.Listener
	p *ProxyProtocol
}

func (l *proxyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	pc, ok := c.(*proxyproto.Conn)
	if !ok {
		return c, nil // not wrapped (a SKIP policy; this one never returns it)
	}
	return &proxyConn{Conn: pc, p: l.p}, nil
}

// proxyConn is a connection of proxyListener. The header is read on its first use (net/http
// asks for RemoteAddr first thing in the connection's goroutine); if that failed, every Read
// and Write fails with the same error, so net/http closes the connection without writing to
// it, and the first failed Read reports the refusal.
type proxyConn struct {
	*proxyproto.Conn
	p      *ProxyProtocol
	report sync.Once
}

func (c *proxyConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.report.Do(func() {
			// A header read (or LOCAL) means err is the connection's own, not a refusal.
			if c.Conn.ProxyHeader() == nil {
				c.p.refused(c.Conn.Raw().RemoteAddr(), err)
			}
		})
	}
	return n, err
}

// CloseWrite half-closes the TCP connection as net/http does after an error answer, when the
// raw connection can.
func (c *proxyConn) CloseWrite() error {
	if cw, ok := c.Conn.Raw().(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (p *ProxyProtocol) refused(peer net.Addr, err error) {
	reason := "bad_header"
	// A connection that ends or fails before a header has none (a TCP health check).
	if errors.Is(err, proxyproto.ErrNoProxyProtocol) || errors.As(err, new(*net.OpError)) {
		reason = "no_header"
		p.noHeader.Inc()
	} else {
		p.badHeader.Inc()
	}
	p.log.Debug().Stringer("peer", peer).Str("reason", reason).AnErr("error", err).
		Msg("proxy protocol: connection refused")
}
