//go:build linux

package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// upstream plays a Fenec router behind every target, and is the "direct" target: every request
// is answered 200 with a 64-byte body, Fenec-Shard: 1, and Fenec-Home: eu when the request
// carried Fenec-Home: 1 (as a home router answers an entry). It does no routing, no logging and
// no allocation of its own per request, so that what a bench measures on top of it is the
// proxy's cost. It is the standard library's HTTP/1.1 server, keep-alive on, as the real
// routers are. GET /_bench/requests answers how many requests it served before (that one
// excluded): a profile window counts its requests where both proxies are measured alike.

func upstreamMain(args []string) error {
	fs := flag.NewFlagSet("upstream", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:18000", "address to listen on (host:port)")
	fs.Parse(args)
	srv := &http.Server{Addr: *listen, Handler: newUpstream(), ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("listen %s: %w", *listen, err)
	}
	return nil
}

// upstream answers every request the same way. Header values are built once and shared:
// net/http only reads them.
type upstream struct {
	body                       []byte
	length, ctype, shard, home []string
	served                     atomic.Int64
}

func newUpstream() *upstream {
	return &upstream{body: append(bytes.Repeat([]byte("x"), 63), '\n'), length: []string{"64"},
		ctype: []string{"text/plain; charset=utf-8"}, shard: []string{"1"}, home: []string{"eu"}}
}

func (h *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/_bench/requests" {
		fmt.Fprintln(w, h.served.Load())
		return
	}
	h.served.Add(1)
	hdr := w.Header() // canonical keys assigned directly: no canonicalization, no allocation
	hdr["Content-Length"], hdr["Content-Type"], hdr["Fenec-Shard"] = h.length, h.ctype, h.shard
	if v := r.Header["Fenec-Home"]; len(v) == 1 && v[0] == "1" {
		hdr["Fenec-Home"] = h.home
	}
	w.WriteHeader(http.StatusOK)
	w.Write(h.body)
}
