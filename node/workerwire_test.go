package node

import (
	"bufio"
	"bytes"
	"net/netip"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/proxy"
)

// A worker's Config crosses the socket whole: every field but those that cannot (functions,
// channels, the clock).
func TestWorkerConfigRoundTrip(t *testing.T) {
	c := testConfig(t, "eu", "http://127.0.0.1:9001", "us", "dns+http://routers.us.example:80")
	c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	c.EntryToken = "secret-token"
	c.GossipKey = SecretBytes("0123456789abcdef")
	c.Continents = map[string]string{"EU": "eu"}
	c.HeaderTimeout = 7 * time.Second
	c.Workers = 3
	c.CORS = "*"
	c.RPCAuth = "rpc-secret"
	b, err := encodeWorkerConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeWorkerConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, c)
	}
}

// Frames carry every kind of message and refuse lengths out of bounds.
func TestWireFrames(t *testing.T) {
	v := homes.Version{HLC: 12345, Origin: "e1"}
	at := time.Unix(0, 1_700_000_000_123_456_789)
	rt := proxy.Routing{Regions: []proxy.Region{{Name: "eu", Routers: []*url.URL{{Scheme: "http", Host: "127.0.0.1:1"}},
		Discovered: []proxy.Router{{URL: &url.URL{Scheme: "https", Host: "10.0.0.1:443"}, ServerName: "r.eu.example"}}, Discovery: true}},
		DefaultRegion: "eu", CORS: "*", EntryToken: "tok", Continents: map[string]string{"EU": "eu"}}
	msgs := []wireMsg{
		{Kind: wHomes, Homes: []wireHome{homeToWire(homes.Home{Tenant: "t", Region: "eu", Version: v}, homes.SourceGossip)}},
		{Kind: wMarks, Marks: []wireMark{markToWire(homes.Mark{Region: "eu", Observer: "e1", At: at, Version: v})}},
		{Kind: wSettings, Settings: settingsToWire(rt, Config{ReadBackoff: time.Second, LogLevel: "debug"})},
		{Kind: wState, Ready: true, Draining: true},
		{Kind: wStop, Grace: 3 * time.Second},
		{Kind: wReport, ID: 9, Report: &wireReport{Inflight: 4, Metrics: []byte{1, 2}, Routers: []wireRouterState{{Region: "eu", Router: "http://x", Failures: 2}}}},
	}
	var buf bytes.Buffer
	for i := range msgs {
		if err := writeFrame(&buf, &msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReader(&buf)
	for i := range msgs {
		var m wireMsg
		if err := readFrame(r, &m); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !reflect.DeepEqual(m, msgs[i]) {
			t.Fatalf("frame %d:\n got %+v\nwant %+v", i, m, msgs[i])
		}
	}
	var m wireMsg
	h := msgs[0].Homes[0].home()
	if h.Tenant != "t" || h.Version != v {
		t.Fatalf("home back: %+v", h)
	}
	mk := msgs[1].Marks[0].mark()
	if !mk.At.Equal(at) || mk.Version != v || mk.Observer != "e1" {
		t.Fatalf("mark back: %+v", mk)
	}
	back, err := msgs[2].Settings.routing()
	if err != nil || !reflect.DeepEqual(back, rt) {
		t.Fatalf("routing back: %+v, %v; want %+v", back, err, rt)
	}
	for _, bad := range [][]byte{{0, 0, 0, 0}, {0x7f, 0, 0, 0}} {
		if err := readFrame(bufio.NewReader(bytes.NewReader(bad)), &m); err != errFrame {
			t.Fatalf("length %v: %v, want errFrame", bad, err)
		}
	}
	if err := readFrame(bufio.NewReader(bytes.NewReader([]byte{0, 0, 0, 2, 0xc1, 0xc1})), &m); err == nil {
		t.Fatal("a frame that is not msgpack was read")
	}
}

// Whatever bytes come, readFrame returns an error or a message: never a panic.
func FuzzReadFrame(f *testing.F) {
	var buf bytes.Buffer
	writeFrame(&buf, &wireMsg{Kind: wHomes, Homes: []wireHome{{Tenant: "t", Region: "eu", HLC: 1, Origin: "e"}}})
	f.Add(buf.Bytes())
	f.Add([]byte{0, 0, 0, 1, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		for range 4 {
			var m wireMsg
			if readFrame(r, &m) != nil {
				return
			}
			for _, h := range m.Homes {
				if got := h.home(); got.Tenant != h.Tenant || got.Version.HLC != h.HLC {
					t.Fatalf("home %+v from %+v", got, h)
				}
			}
			for _, mk := range m.Marks {
				if got := mk.mark(); got.Region != mk.Region || got.Version.HLC != mk.HLC {
					t.Fatalf("mark %+v from %+v", got, mk)
				}
			}
			if m.Settings != nil {
				m.Settings.routing()
			}
		}
	})
}
