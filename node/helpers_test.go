package node

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/internal/testutil"
	"github.com/fenec/fenec-entry/proxy"
)

// testLogger returns a debug logger writing to a buffer the test can read, printed if the
// test fails.
func testLogger(t *testing.T) (zerolog.Logger, *testutil.LogBuffer) {
	lb := &testutil.LogBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", lb)
		}
	})
	return zerolog.New(lb).Level(zerolog.DebugLevel).With().Timestamp().Logger(), lb
}

// newRouter starts a stand-in router for region: every answer carries Fenec-Shard: 1, and
// Fenec-Home: <region> when the request asked with Fenec-Home: 1. It answers with its
// region's name; handler, if non-nil, answers instead.
func newRouter(t *testing.T, region string, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Fenec-Shard", "1")
		if r.Header.Get("Fenec-Home") == "1" {
			w.Header().Set("Fenec-Home", region)
		}
		if handler != nil {
			handler(w, r)
			return
		}
		w.Write([]byte("hello from " + region))
	}))
	t.Cleanup(s.Close)
	return s
}

// testConfig is a valid Config on loopback ports chosen by the kernel, with one region per
// router URL given as name, url pairs.
func testConfig(t *testing.T, regionURLs ...string) Config {
	t.Helper()
	c := DefaultConfig()
	c.Listen = "127.0.0.1:0"
	c.AdminListen = "127.0.0.1:0"
	c.Pop, c.Node, c.Continent = "test", "entry-test", "EU"
	c.Drain = 50 * time.Millisecond
	c.Version = "v0.0.0-test"
	for i := 0; i+1 < len(regionURLs); i += 2 {
		u, err := url.Parse(regionURLs[i+1])
		if err != nil {
			t.Fatal(err)
		}
		c.Routers = append(c.Routers, proxy.Region{Name: regionURLs[i], Routers: []*url.URL{u}})
	}
	return c
}

// scrapeLabeled is the sample of name whose one label is label="value" in a text exposition,
// -1 when there is none.
func scrapeLabeled(text, name, label, value string) float64 {
	prefix := name + "{" + label + "=\"" + value + "\"} "
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			var f float64
			if err := json.Unmarshal([]byte(v), &f); err == nil {
				return f
			}
		}
	}
	return -1
}

// scrapeSum adds up every sample of name in a text exposition.
func scrapeSum(text, name string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		var v float64
		if err := json.Unmarshal([]byte(f[len(f)-1]), &v); err == nil {
			sum += v
		}
	}
	return sum
}
