package node

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/proxy"
)

// The master and its workers (workers.go, worker.go) talk over one Unix stream socket each
// (a socketpair the master makes; the worker's end is its file descriptor 3): frames of a
// 4-byte big-endian length and one msgpack wireMsg. The master writes first: wInit, then the
// table (wHomes, wMarks), then whatever changes. Both ends are this binary, started together,
// so there is no version negotiation; a frame either end cannot read ends the worker (the
// master starts it again).

// maxWireFrame bounds one frame: a batch of wireBatch homes of the longest names fits with room.
const (
	maxWireFrame = 4 << 20
	wireBatch    = 2048 // homes or marks a frame carries at most
)

// Kinds of wireMsg.
const (
	wInit      uint8 = iota + 1 // master → worker, first: Config, Settings, Index
	wHomes                      // both ways: homes (down: to hold; up: heard by the worker)
	wMarks                      // both ways: marks (down: to apply; up: made by the worker)
	wSettings                   // master → worker: the routing and what a reload changes
	wState                      // master → worker: ready, draining
	wStop                       // master → worker: stop listening, finish open requests within Grace, exit
	wReportAsk                  // master → worker: send a wReport with this ID
	wReport                     // worker → master: counters and router states
	wServing                    // worker → master: listening and serving
)

type wireMsg struct {
	Kind     uint8         `msgpack:"k"`
	Index    int           `msgpack:"i,omitempty"`
	Config   []byte        `msgpack:"c,omitempty"` // msgpack of the worker's Config (workerConfig)
	Settings *wireSettings `msgpack:"s,omitempty"`
	Homes    []wireHome    `msgpack:"h,omitempty"`
	Marks    []wireMark    `msgpack:"m,omitempty"`
	Ready    bool          `msgpack:"r,omitempty"`
	Draining bool          `msgpack:"d,omitempty"`
	Grace    time.Duration `msgpack:"g,omitempty"`
	ID       uint64        `msgpack:"n,omitempty"`
	Report   *wireReport   `msgpack:"rp,omitempty"`
}

type wireHome struct {
	//lint:ignore U1000 read by msgpack through its tag: encode the struct as an array
	_msgpack struct{} `msgpack:",as_array"`
	Tenant   string
	Region   string
	HLC      uint64
	Origin   string
	Src      homes.Source
}

type wireMark struct {
	//lint:ignore U1000 read by msgpack through its tag: encode the struct as an array
	_msgpack struct{} `msgpack:",as_array"`
	Region   string
	Clear    bool
	Observer string
	At       int64 // Unix nanoseconds; 0: unset
	HLC      uint64
	Origin   string
}

// wireSettings is what a reload or a DNS round changes: the routing (routers as URLs), the
// read backoff and the log level.
type wireSettings struct {
	Regions       []wireRegion      `msgpack:"r"`
	Continents    map[string]string `msgpack:"c,omitempty"`
	DefaultRegion string            `msgpack:"d,omitempty"`
	EntryToken    string            `msgpack:"t,omitempty"`
	CORS          string            `msgpack:"o,omitempty"`
	ReadBackoff   time.Duration     `msgpack:"b"`
	LogLevel      string            `msgpack:"l"`
}

type wireRegion struct {
	Name       string       `msgpack:"n"`
	Routers    []string     `msgpack:"r,omitempty"`
	Discovered []wireRouter `msgpack:"f,omitempty"`
	Discovery  bool         `msgpack:"d,omitempty"`
}

type wireRouter struct {
	//lint:ignore U1000 read by msgpack through its tag: encode the struct as an array
	_msgpack   struct{} `msgpack:",as_array"`
	URL        string
	ServerName string
}

// wireReport is a worker's part of /metrics and /status.json.
type wireReport struct {
	Inflight int64             `msgpack:"i"`
	Homes    int               `msgpack:"h"` // homes its table holds
	Failing  uint64            `msgpack:"f"` // regions its table holds failing (homes.Table.Failing, by region ID)
	Metrics  []byte            `msgpack:"m"` // its registry's families, protobuf, length-delimited
	Routers  []wireRouterState `msgpack:"r,omitempty"`
}

type wireRouterState struct {
	//lint:ignore U1000 read by msgpack through its tag: encode the struct as an array
	_msgpack    struct{} `msgpack:",as_array"`
	Region      string
	Router      string
	LastOutcome string
	LastStatus  int
	LastAt      int64
	Failures    int
}

// writeFrame writes m as one frame.
func writeFrame(w io.Writer, m *wireMsg) error {
	b, err := msgpack.Marshal(m)
	if err != nil {
		return err
	}
	if len(b) > maxWireFrame {
		return fmt.Errorf("worker frame of %d bytes, over %d", len(b), maxWireFrame)
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	if _, err := w.Write(append(hdr[:], b...)); err != nil {
		return err
	}
	return nil
}

var errFrame = errors.New("worker frame: bad length")

// readFrame reads one frame into m (a new message each call).
func readFrame(r *bufio.Reader, m *wireMsg) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > maxWireFrame {
		return errFrame
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	*m = wireMsg{}
	if err := msgpack.Unmarshal(b, m); err != nil {
		return fmt.Errorf("worker frame: %w", err)
	}
	return nil
}

func homeToWire(h homes.Home, src homes.Source) wireHome {
	return wireHome{Tenant: h.Tenant, Region: h.Region, HLC: h.Version.HLC, Origin: h.Version.Origin, Src: src}
}

func (w wireHome) home() homes.Home {
	return homes.Home{Tenant: w.Tenant, Region: w.Region, Version: homes.Version{HLC: w.HLC, Origin: w.Origin}}
}

func markToWire(m homes.Mark) wireMark {
	w := wireMark{Region: m.Region, Clear: m.Clear, Observer: m.Observer, HLC: m.Version.HLC, Origin: m.Version.Origin}
	if !m.At.IsZero() {
		w.At = m.At.UnixNano()
	}
	return w
}

func (w wireMark) mark() homes.Mark {
	m := homes.Mark{Region: w.Region, Clear: w.Clear, Observer: w.Observer, Version: homes.Version{HLC: w.HLC, Origin: w.Origin}}
	if w.At != 0 {
		m.At = time.Unix(0, w.At)
	}
	return m
}

// settingsToWire is the routing in force and the reloadable settings of c.
func settingsToWire(rt proxy.Routing, c Config) *wireSettings {
	s := &wireSettings{Continents: rt.Continents, DefaultRegion: rt.DefaultRegion, EntryToken: rt.EntryToken,
		CORS: rt.CORS, ReadBackoff: c.ReadBackoff, LogLevel: c.LogLevel}
	for _, r := range rt.Regions {
		wr := wireRegion{Name: r.Name, Discovery: r.Discovery}
		for _, u := range r.Routers {
			wr.Routers = append(wr.Routers, u.String())
		}
		for _, d := range r.Discovered {
			wr.Discovered = append(wr.Discovered, wireRouter{URL: d.URL.String(), ServerName: d.ServerName})
		}
		s.Regions = append(s.Regions, wr)
	}
	return s
}

// routing is the proxy.Routing s carries.
func (s *wireSettings) routing() (proxy.Routing, error) {
	rt := proxy.Routing{Continents: s.Continents, DefaultRegion: s.DefaultRegion, EntryToken: s.EntryToken, CORS: s.CORS}
	for _, wr := range s.Regions {
		r := proxy.Region{Name: wr.Name, Discovery: wr.Discovery}
		for _, raw := range wr.Routers {
			u, err := url.Parse(raw)
			if err != nil {
				return proxy.Routing{}, err
			}
			r.Routers = append(r.Routers, u)
		}
		for _, d := range wr.Discovered {
			u, err := url.Parse(d.URL)
			if err != nil {
				return proxy.Routing{}, err
			}
			r.Discovered = append(r.Discovered, proxy.Router{URL: u, ServerName: d.ServerName})
		}
		rt.Regions = append(rt.Regions, r)
	}
	return rt, nil
}

// workerConfig is the part of Config a worker needs, sent in wInit: Config itself, less what
// cannot cross a process (functions, channels, the clock) and with the routers as URLs.
type workerConfig struct {
	Config  Config       `msgpack:"c"`
	Routers []wireRegion `msgpack:"r"`
	// The secrets, which Config's own fields would send as "[redacted]" (they are text
	// marshalers for the logs' sake).
	EntryToken string `msgpack:"t"`
	GossipKey  []byte `msgpack:"k"`
	RPCAuth    string `msgpack:"a"`
}

func encodeWorkerConfig(c Config) ([]byte, error) {
	wc := workerConfig{Config: c, EntryToken: string(c.EntryToken), GossipKey: c.GossipKey, RPCAuth: string(c.RPCAuth)}
	wc.Config.EntryToken, wc.Config.GossipKey, wc.Config.RPCAuth = "", nil, ""
	wc.Config.Routers, wc.Config.Reloader, wc.Config.ReloadOn, wc.Config.SetLogLevel, wc.Config.Clock = nil, nil, nil, nil, nil
	for _, r := range c.Routers {
		wr := wireRegion{Name: r.Name}
		for _, u := range r.Routers {
			wr.Routers = append(wr.Routers, u.String())
		}
		wc.Routers = append(wc.Routers, wr)
	}
	return msgpack.Marshal(&wc)
}

func decodeWorkerConfig(b []byte) (Config, error) {
	var wc workerConfig
	if err := msgpack.Unmarshal(b, &wc); err != nil {
		return Config{}, err
	}
	c := wc.Config
	c.EntryToken, c.GossipKey, c.RPCAuth = Secret(wc.EntryToken), SecretBytes(wc.GossipKey), Secret(wc.RPCAuth)
	for _, wr := range wc.Routers {
		r := proxy.Region{Name: wr.Name}
		for _, raw := range wr.Routers {
			u, err := url.Parse(raw)
			if err != nil {
				return Config{}, err
			}
			r.Routers = append(r.Routers, u)
		}
		c.Routers = append(c.Routers, r)
	}
	return c, nil
}
