package node

import (
	"net"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"

	"github.com/fenec/fenec-entry/proxy"
)

// The bound on client connections (--max-conns) and the descriptors it leaves the rest of the
// entry (docs/DECISIONS.md, "Client connections and the open-file limit").

// ReserveOther is the descriptors kept for what is neither a client nor a router connection:
// the listeners, gossip's sockets and streams, serf's RPC, admin connections, the state file,
// certificates, DNS, /proc for the metrics.
const ReserveOther = 256

// MaxMaxConns bounds --max-conns (a typo's guard, as the other Max* bounds).
const MaxMaxConns = 100_000_000

// noLimitMaxConns is the default bound where the system has no open-file limit to derive it
// from (fdLimit 0).
const noLimitMaxConns = 65_536

// connsReserve is the descriptors --max-conns leaves below the open-file limit limit: one
// router connection for each request that can be in flight (at most half the limit: a client
// connection carries one request at a time, so the two halves cannot both be exceeded), each
// router's pool of idle connections, and ReserveOther.
func (c Config) connsReserve(limit int) int {
	routers := 0
	for _, r := range c.Routers {
		routers += len(r.Routers)
	}
	return min(c.MaxInflight, limit/2) + routers*proxy.DefaultMaxIdlePerRouter + ReserveOther
}

// maxConns is the bound on client connections in effect: --max-conns, or by default the
// open-file limit less the reserve (a quarter of the limit at least, where the reserve would
// leave less: a limit that low is logged at start, logStart); a *ConfigError when --max-conns
// asks for more than the limit leaves. limit is the open-file limit (fdLimit; 0: none known).
func (c Config) maxConns(limit int) (int, error) {
	if limit <= 0 {
		if c.MaxConns > 0 {
			return c.MaxConns, nil
		}
		return noLimitMaxConns, nil
	}
	reserve := c.connsReserve(limit)
	room := limit - reserve
	if c.MaxConns == 0 {
		return max(room, limit/4, 1), nil
	}
	if c.MaxConns > room {
		return 0, cfgErr("max-conns", "%d is more than the open-file limit (%d) leaves after the reserve for routers, gossip and files (%d): at most %d, or raise the limit (ulimit -n, LimitNOFILE=)",
			c.MaxConns, limit, reserve, max(room, 0))
	}
	return c.MaxConns, nil
}

// acceptLog is told when accepting client connections fails for want of descriptors (once,
// until it works again) and when it works again.
func (n *Node) acceptLog(msg string, err error) {
	if err != nil {
		n.log.Warn().Err(err).Str("server", "client").Int("max_conns", n.maxConns).Msg(msg)
		return
	}
	n.log.Info().Str("server", "client").Msg(msg)
}

// connsGauges registers the bound's metrics: held counts the client connections open now,
// shed those closed to make room (nil: the server sheds none).
func (n *Node) connsGauges(held, shed func() float64) {
	n.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_entry_connections",
		Help: "Client connections open now (every protocol), at most fenec_entry_connections_limit (--max-conns).",
	}, held))
	n.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fenec_entry_connections_limit",
		Help: "The bound on client connections (--max-conns, by default the open-file limit less the reserve for routers, gossip and files).",
	}, func() float64 { return float64(n.maxConns) }))
	if shed == nil {
		shed = func() float64 { return 0 }
	}
	n.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "fenec_entry_connections_shed_total",
		Help: "Idle kept-alive client connections closed to make room: at --max-conns, or when accepting or a router dial met the open-file limit.",
	}, shed))
}

// limitStd bounds the connections net/http serves from ln (--http1-server std): at the bound
// Accept waits until one closes (netutil.LimitListener), and held counts them. net/http cannot
// say which connection is idle, so none is shed.
func (n *Node) limitStd(ln net.Listener) net.Listener {
	cl := &countedListener{Listener: netutil.LimitListener(ln, n.maxConns)}
	n.connsGauges(func() float64 { return float64(cl.open.Load()) }, nil)
	return cl
}

type countedListener struct {
	net.Listener
	open atomic.Int64
}

func (l *countedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.open.Add(1)
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l      *countedListener
	closed atomic.Bool
}

// CloseWrite is the TCP connection's (the door closes the write side before it closes).
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.open.Add(-1)
	}
	return c.Conn.Close()
}
