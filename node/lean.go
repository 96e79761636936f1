package node

import (
	"net"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenec/fenec-entry/h1"
)

// DefaultHTTP1Server is h1 (package h1, built on every system).
const DefaultHTTP1Server = "lean"

// h1ShedBatch is how many idle connections a router dial out of descriptors has h1 close.
const h1ShedBatch = h1.ShedBatch

// newLean builds h1's server for the client listener at addr, and the listener through which
// it hands net/http what it does not serve; it registers h1's gauge.
func (n *Node) newLean(addr net.Addr) (*h1.Server, net.Listener) {
	handoff := h1.NewHandoff(addr)
	lean := &h1.Server{Handler: n.proxy, ReadHeaderTimeout: n.client.ReadHeaderTimeout,
		IdleTimeout: n.client.IdleTimeout, Fallback: handoff.Give,
		ErrorLog:  func(msg string) { n.log.Error().Str("server", "client").Msg(msg) },
		TLSConfig: n.client.TLSConfig, HandshakeLog: n.handshakeLog,
		MaxConns: n.maxConns, AcceptLog: n.acceptLog}
	n.connsGauges(func() float64 { return float64(lean.Held()) }, func() float64 { return float64(lean.Shed()) })
	n.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_entry_http1_idle_workers",
		Help: "Goroutines kept to serve the next woken HTTP/1.x connection (at most h1.MaxIdleWorkers; past it one exits after its connection parks).",
	}, func() float64 { return float64(lean.IdleWorkers()) }))
	n.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "fenec_entry_http1_leader_served_total",
		Help: "Woken HTTP/1.x connections served by the poller's own goroutine (leader/follower: no thread woken on another CPU), rather than handed to a worker.",
	}, func() float64 { return float64(lean.LeaderServed()) }))
	return lean, handoff
}
