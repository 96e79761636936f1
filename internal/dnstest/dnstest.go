// Package dnstest is a small DNS server for tests, on loopback: A, AAAA and SRV records that
// a test changes while it runs, and names made to fail (SERVFAIL) or to go unanswered.
package dnstest

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"
)

// SRV is one SRV record's target and port.
type SRV struct {
	Target string
	Port   uint16
}

// Server answers on 127.0.0.1, UDP and TCP, on one port. Safe for concurrent use.
type Server struct {
	Addr string // host:port, for --dns-server

	udp, tcp *dns.Server
	queries  atomic.Int64

	mu     sync.Mutex
	addrs  map[string][]netip.Addr
	srvs   map[string][]SRV
	fail   map[string]bool // SERVFAIL
	silent map[string]bool // no answer at all
}

// Start starts a server, stopped at the end of the test.
func Start(tb testing.TB) *Server {
	tb.Helper()
	// UDP and TCP on one port: the kernel picks a free UDP port, whose TCP twin may be taken.
	var pc net.PacketConn
	var ln net.Listener
	for try := 0; ; try++ {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			tb.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		if try == 20 {
			tb.Fatal(err)
		}
	}
	s := &Server{Addr: pc.LocalAddr().String(), addrs: map[string][]netip.Addr{}, srvs: map[string][]SRV{},
		fail: map[string]bool{}, silent: map[string]bool{}}
	h := dns.HandlerFunc(s.serve)
	s.udp = &dns.Server{PacketConn: pc, Handler: h}
	s.tcp = &dns.Server{Listener: ln, Handler: h}
	started := make(chan struct{}, 2)
	s.udp.NotifyStartedFunc = func() { started <- struct{}{} }
	s.tcp.NotifyStartedFunc = func() { started <- struct{}{} }
	go s.udp.ActivateAndServe()
	go s.tcp.ActivateAndServe()
	<-started
	<-started
	tb.Cleanup(func() {
		s.udp.Shutdown()
		s.tcp.Shutdown()
	})
	return s
}

func key(name string) string { return strings.ToLower(dns.Fqdn(name)) }

// SetAddrs makes name resolve to addrs (A and AAAA); none makes it a name with no address.
func (s *Server) SetAddrs(name string, addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var as []netip.Addr
	for _, a := range addrs {
		as = append(as, netip.MustParseAddr(a))
	}
	s.addrs[key(name)] = as
	delete(s.fail, key(name))
	delete(s.silent, key(name))
}

// SetSRV makes name's SRV records these.
func (s *Server) SetSRV(name string, recs ...SRV) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srvs[key(name)] = recs
	delete(s.fail, key(name))
	delete(s.silent, key(name))
}

// Fail makes lookups of name answer SERVFAIL until it is set again.
func (s *Server) Fail(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[key(name)] = true
}

// Silence makes lookups of name go unanswered (the client times out) until it is set again.
func (s *Server) Silence(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.silent[key(name)] = true
}

// Queries is how many questions the server has been asked.
func (s *Server) Queries() int64 { return s.queries.Load() }

func (s *Server) serve(w dns.ResponseWriter, req *dns.Msg) {
	s.queries.Add(1)
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	k := strings.ToLower(q.Name)
	s.mu.Lock()
	fail, silent := s.fail[k], s.silent[k]
	addrs, hasAddrs := s.addrs[k]
	srvs, hasSRV := s.srvs[k]
	s.mu.Unlock()
	switch {
	case silent:
		return
	case fail:
		m.Rcode = dns.RcodeServerFailure
	case !hasAddrs && !hasSRV:
		m.Rcode = dns.RcodeNameError
	}
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: q.Name, Rrtype: t, Class: dns.ClassINET, Ttl: 1}
	}
	if m.Rcode == dns.RcodeSuccess {
		switch q.Qtype {
		case dns.TypeA:
			for _, a := range addrs {
				if a.Is4() {
					m.Answer = append(m.Answer, &dns.A{Hdr: hdr(dns.TypeA), A: a.AsSlice()})
				}
			}
		case dns.TypeAAAA:
			for _, a := range addrs {
				if a.Is6() {
					m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: a.AsSlice()})
				}
			}
		case dns.TypeSRV:
			for _, r := range srvs {
				m.Answer = append(m.Answer, &dns.SRV{Hdr: hdr(dns.TypeSRV), Priority: 1, Weight: 1, Port: r.Port, Target: dns.Fqdn(r.Target)})
			}
		}
	}
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		size := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = int(opt.UDPSize())
		}
		m.Truncate(size) // sets TC when cut: the client asks again over TCP
	}
	w.WriteMsg(m)
}
