package proxy

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/fenec/fenec-entry/homes"
)

func benchHandler(b testing.TB, routers ...string) *Handler {
	b.Helper()
	table, err := homes.New(homes.Config{Regions: []string{"eu", "us", "ap"}, Origin: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	if len(routers) == 0 {
		routers = []string{"http://127.0.0.1:1"}
	}
	var regs []Region
	for _, name := range []string{"eu", "us", "ap"} {
		reg := Region{Name: name}
		for _, r := range routers {
			u, _ := url.Parse(r)
			reg.Routers = append(reg.Routers, u)
		}
		regs = append(regs, reg)
	}
	h, err := New(Config{Regions: regs, Homes: table, EntryToken: "bench-token"})
	if err != nil {
		b.Fatal(err)
	}
	table.Learn("acme", 1)
	b.Cleanup(h.Close)
	return h
}

func BenchmarkPlan(b *testing.B) {
	h := benchHandler(b)
	r := httptest.NewRequest("GET", "/t/acme/items/1", nil)
	x := &exchange{rt: h.rt.Load(), tenant: "acme"}
	var buf [maxRegions]uint8
	b.ReportAllocs()
	for b.Loop() {
		h.plan(x, r, buf[:])
	}
}

func BenchmarkWriteHead(b *testing.B) {
	hdr := http.Header{"Accept": {"*/*"}, "User-Agent": {"curl/8"}, "Authorization": {"Bearer x"},
		"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	w := bufio.NewWriterSize(io.Discard, 4096)
	h := outHead{method: "GET", uri: "/t/acme/items/1", host: "api.example", requestID: "abc-1",
		clientMark: "203.0.113.7 1700000000 AAAAAAAAAAAAAAAAAAAAAA", contentLength: -1}
	b.ReportAllocs()
	for b.Loop() {
		writeHead(w, &h, hdr)
		w.Reset(io.Discard)
	}
}

// BenchmarkWriteHeadStrip is BenchmarkWriteHead with the operator's --client-ip header:NAME
// and --country-header named (Config.StripHeaders) and sent by the client.
func BenchmarkWriteHeadStrip(b *testing.B) {
	hdr := http.Header{"Accept": {"*/*"}, "User-Agent": {"curl/8"}, "Authorization": {"Bearer x"},
		"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		"X-Client-Ip": {"203.0.113.7"}, "X-Country": {"DE"}}
	w := bufio.NewWriterSize(io.Discard, 4096)
	h := outHead{method: "GET", uri: "/t/acme/items/1", host: "api.example", requestID: "abc-1",
		clientMark: "203.0.113.7 1700000000 AAAAAAAAAAAAAAAAAAAAAA", contentLength: -1,
		strip: stripList([]string{"X-Client-IP", "X-Country"})}
	b.ReportAllocs()
	for b.Loop() {
		writeHead(w, &h, hdr)
		w.Reset(io.Discard)
	}
}

func BenchmarkCopyAnswerHeader(b *testing.B) {
	src := http.Header{"Content-Type": {"application/json"}, "Content-Length": {"64"}, "Fenec-Shard": {"1"},
		"Fenec-Home": {"eu"}, "Date": {"Mon, 01 Jan 2026 00:00:00 GMT"}}
	b.ReportAllocs()
	for b.Loop() {
		dst := make(http.Header, 8)
		copyAnswerHeader(dst, src)
	}
}

func BenchmarkClientMark(b *testing.B) {
	m := newClientMarker("bench-token")
	b.ReportAllocs()
	for b.Loop() {
		m.mark("203.0.113.7", 1700000000)
	}
}

func BenchmarkTenantOf(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		tenantOf("/t/acme/items/1")
	}
}

// BenchmarkServeHTTP is one whole request through the handler to a router on
// loopback (client -> handler in process -> router over TCP), for profiles
// and allocation counts of the hot path.
func BenchmarkServeHTTP(b *testing.B) {
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Fenec-Shard", "1")
		w.Header().Set("Content-Length", "2")
		w.Write([]byte("ok"))
	}))
	defer router.Close()
	h := benchHandler(b, router.URL)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := httptest.NewRequest("GET", "/t/acme/items/1", nil)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != 200 {
				b.Fatalf("status %d", w.Code)
			}
		}
	})
}
