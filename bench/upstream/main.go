// Command upstream plays a Fenec router for the proxy benchmark (go run ./bench proxies):
// the baseline "direct" target and the one backend behind every proxy.
//
// Every request is answered 200 with a fixed body, Fenec-Shard: 1, and Fenec-Home: eu
// when the request carried Fenec-Home: 1 (as a home router answers an entry). It does
// no routing, no logging and no allocation of its own per request, so that what the
// benchmark measures on top of it is the proxy's cost. It is the standard library's
// HTTP/1.1 server, keep-alive on, because that is what the real routers are.
//
// GET /_bench/requests answers how many requests it served before (that one excluded): a
// profile window counts its requests where both proxies are measured alike.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18000", "address to listen on (host:port)")
	size := flag.Int("body-bytes", 64, "size of the answer body in bytes")
	flag.Parse()
	if *size < 0 {
		fmt.Fprintln(os.Stderr, "upstream: --body-bytes must be >= 0")
		os.Exit(2)
	}

	srv := &http.Server{
		Addr:              *listen,
		Handler:           newHandler(*size),
		ReadHeaderTimeout: 10 * time.Second,
	}
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "upstream: listen %s: %v\n", *listen, err)
		os.Exit(1)
	}
}

// handler answers every request the same way. Header values are built once and
// shared: net/http only reads them.
type handler struct {
	body          []byte
	contentLength []string
	contentType   []string
	shard         []string
	home          []string
	served        atomic.Int64
}

func newHandler(size int) *handler {
	body := bytes.Repeat([]byte("x"), size)
	if size > 0 {
		body[size-1] = '\n'
	}
	return &handler{
		body:          body,
		contentLength: []string{strconv.Itoa(size)},
		contentType:   []string{"text/plain; charset=utf-8"},
		shard:         []string{"1"},
		home:          []string{"eu"},
	}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/_bench/requests" {
		_, _ = fmt.Fprintln(w, h.served.Load())
		return
	}
	h.served.Add(1)
	hdr := w.Header()
	// Canonical keys assigned directly: no canonicalization, no allocation.
	hdr["Content-Length"] = h.contentLength
	hdr["Content-Type"] = h.contentType
	hdr["Fenec-Shard"] = h.shard
	if v := r.Header["Fenec-Home"]; len(v) == 1 && v[0] == "1" {
		hdr["Fenec-Home"] = h.home
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(h.body)
}
