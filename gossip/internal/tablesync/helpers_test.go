package tablesync

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fenec/fenec-entry/gossip/internal/gossiptest"
	"github.com/fenec/fenec-entry/gossip/internal/validate"
	"github.com/fenec/fenec-entry/homes"
)

var (
	syncRegions = []string{"eu", "us", "ap"}
	testKey     = []byte("0123456789abcdef0123456789abcdef")
	loopback    = netip.MustParseAddr("127.0.0.1")
)

// members is a fake membership: node -> address. Safe for concurrent use.
type members struct {
	mu sync.Mutex
	m  map[string]netip.Addr
}

func newMembers(nodes ...string) *members {
	ms := &members{m: make(map[string]netip.Addr)}
	for _, n := range nodes {
		ms.m[n] = loopback
	}
	return ms
}

func (ms *members) set(node string, a netip.Addr) {
	ms.mu.Lock()
	ms.m[node] = a
	ms.mu.Unlock()
}

func (ms *members) addr(node string) (netip.Addr, bool) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	a, ok := ms.m[node]
	return a, ok
}

// syncNode is one entry: its table, its Sync, its registry and its snapshot listener.
type syncNode struct {
	name  string
	table *homes.Table
	sync  *Sync
	reg   *prometheus.Registry
	srv   *httptest.Server
	peers []Peer

	mu      sync.Mutex   // guards handler
	handler http.Handler // what srv serves: the Sync's, or a test's wrapper of it
}

type nodeOpt func(*Setup)

func withKey(k []byte) nodeOpt             { return func(c *Setup) { c.Keys = keysOf(k) } }
func withCapacity(n int) nodeOpt           { return func(c *Setup) { c.Capacity = n } }
func withNow(now func() time.Time) nodeOpt { return func(c *Setup) { c.Now = now } }
func withRegions(r ...string) nodeOpt {
	return func(c *Setup) { c.Validator = validate.New(r, nil) }
}

func newTable(tb testing.TB, node string, capacity int) *homes.Table {
	tb.Helper()
	t, err := homes.New(homes.Config{Regions: syncRegions, Origin: node, Capacity: capacity})
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// newSyncNode starts an entry named name with a table of capacity 20,000 (withCapacity), the test key, and
// a snapshot listener on 127.0.0.1.
func newSyncNode(tb testing.TB, name string, ms *members, opts ...nodeOpt) *syncNode {
	tb.Helper()
	n := &syncNode{name: name, reg: prometheus.NewRegistry()}
	cfg := Setup{
		Config:     DefaultConfig(),
		Node:       name,
		Keys:       keysOf(testKey),
		Validator:  validate.New(syncRegions, nil),
		MemberAddr: ms.addr,
		Peers:      func() []Peer { return n.peers },
		Capacity:   20000,
		Registerer: n.reg,
	}
	for _, o := range opts {
		o(&cfg)
	}
	n.table = newTable(tb, name, cfg.Capacity)
	cfg.Table = n.table
	s, err := NewSync(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	n.sync = s
	n.handler = s.Handler()
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		h := n.handler
		n.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	tb.Cleanup(n.srv.Close)
	return n
}

func (n *syncNode) peer() Peer { return Peer{Name: n.name, Addr: n.srv.Listener.Addr().String()} }

// keysOf is Keys holding k alone (nil: insecure).
var keysOf = gossiptest.Keys

// counter reads one child of one of n's counter vectors.
func (n *syncNode) served(endpoint, result string) int {
	return int(testutil.ToFloat64(n.sync.m.served.WithLabelValues(endpoint, result)))
}

// ver is a version at now plus d, with a logical part.
func ver(d time.Duration, logical uint64, origin string) homes.Version {
	return homes.Version{HLC: uint64(time.Now().Add(d).UnixMilli())<<16 | logical, Origin: origin}
}

// fill applies n homes tenant-<i> (from first) to t at version v (+i logical), regions in turn.
func fill(t *homes.Table, first, n int, v homes.Version) {
	for i := first; i < first+n; i++ {
		t.Apply(homes.Home{
			Tenant:  fmt.Sprintf("tenant-%d", i),
			Region:  syncRegions[i%len(syncRegions)],
			Version: homes.Version{HLC: v.HLC + uint64(i), Origin: v.Origin},
		})
	}
}

// contents is a table's homes by tenant, sources ignored.
func contents(t *homes.Table) map[string]homes.Home {
	m := make(map[string]homes.Home, t.Len())
	t.Range(func(h homes.Home, _ homes.Source) bool {
		m[h.Tenant] = h
		return true
	})
	return m
}

func equalTables(tb testing.TB, a, b *homes.Table) {
	tb.Helper()
	ca, cb := contents(a), contents(b)
	if len(ca) != len(cb) {
		tb.Fatalf("tables hold %d and %d homes", len(ca), len(cb))
	}
	bad := 0
	for k, h := range ca {
		if cb[k] != h {
			if bad++; bad <= 5 {
				tb.Errorf("tenant %s: %+v vs %+v", k, h, cb[k])
			}
		}
	}
	if bad > 0 {
		tb.Fatalf("%d homes differ", bad)
	}
}

// wrapFunc serves a request with the Sync's handler as next.
type wrapFunc func(w http.ResponseWriter, r *http.Request, next http.Handler)

// wrap makes n's listener serve through f.
func (n *syncNode) wrap(f wrapFunc) {
	inner := n.sync.Handler()
	n.mu.Lock()
	n.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f(w, r, inner) })
	n.mu.Unlock()
}
