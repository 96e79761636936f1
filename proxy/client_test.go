package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A request to a plain TCP router is sent with the first read of its answer
// (sockio.Conn.WriteThenRead): the answer, head and body in one packet, costs one read
// system call, not two (the first of which would meet the empty socket).
func TestRequestSentWithItsAnswersRead(t *testing.T) {
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond) // the answer is not there when the entry first looks
		w.Header().Set("Fenec-Shard", "1")
		w.Header().Set("Content-Length", "2")
		w.Write([]byte("ok"))
	}))
	defer router.Close()
	h := benchHandler(t, router.URL)
	for _, tc := range []struct{ method, body string }{{"GET", ""}, {"POST", "a body"}, {"GET", ""}} {
		before := routerReads(h)
		var body io.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
		}
		r := httptest.NewRequest(tc.method, "/t/acme/items/1", body)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		reads := routerReads(h) - before
		if w.Code != 200 || w.Body.String() != "ok" {
			t.Fatalf("%s: %d %q, want 200 ok", tc.method, w.Code, w.Body.String())
		}
		if reads != 1 {
			t.Errorf("%s: %d read system calls for the answer, want 1", tc.method, reads)
		}
	}
}

// routerReads is the read system calls made by h's pooled router connections (one, here: each
// request takes it and gives it back).
func routerReads(h *Handler) int {
	n := 0
	for _, rr := range h.rt.Load().byID {
		if rr == nil {
			continue
		}
		for _, rt := range rr.routers {
			rt.mu.Lock()
			for _, c := range rt.idle {
				if c.wtr != nil {
					n += c.wtr.Reads()
				}
			}
			rt.mu.Unlock()
		}
	}
	return n
}

type ownHooks struct {
	context.Context
	hook hookRecord
}

type hookRecord struct{ f func() }

func (h *hookRecord) Stop() bool { return h.f != nil }

func (o *ownHooks) OnCancel(f func()) interface{ Stop() bool } { o.hook.f = f; return &o.hook }

var stopSink stopper

// afterFunc uses a context's own OnCancel (h1's costs no allocation), and context.AfterFunc
// for any other.
func TestAfterFunc(t *testing.T) {
	own := &ownHooks{Context: context.Background()}
	f := func() {}
	if n := testing.AllocsPerRun(100, func() { stopSink = afterFunc(own, f); stopSink.Stop() }); n != 0 {
		t.Errorf("afterFunc with the context's OnCancel: %v allocations, want 0", n)
	}
	if own.hook.f == nil {
		t.Error("afterFunc did not use the context's OnCancel")
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	afterFunc(ctx, func() { close(ran) })
	s := afterFunc(ctx, func() { t.Error("a stopped function ran") })
	if !s.Stop() {
		t.Error("Stop before cancel = false")
	}
	cancel()
	select {
	case <-ran:
	case <-time.After(2 * time.Second):
		t.Fatal("context.AfterFunc's function did not run")
	}
}

// A streamed body longer than the request's writer goes out whole and in order: the writer
// flushes it to the router connection in pieces, and its last piece with the answer's first
// read.
func TestLongBodyThroughTheWriter(t *testing.T) {
	got := make(chan string, 1)
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			got <- "read: " + err.Error()
		} else {
			got <- string(b)
		}
		w.Header().Set("Fenec-Shard", "1")
		w.Header().Set("Content-Length", "2")
		w.Write([]byte("ok"))
	}))
	defer router.Close()
	h := benchHandler(t, router.URL)
	var sb strings.Builder
	for i := 0; sb.Len() < 1<<20; i++ {
		fmt.Fprintf(&sb, "%07d\n", i) // each line its own: a piece lost or reordered shows
	}
	body := sb.String()
	r := httptest.NewRequest("POST", "/t/acme/items", strings.NewReader(body))
	r.Header.Set("Idempotency-Key", "long")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 200 || w.Body.String() != "ok" {
		t.Fatalf("%d %q, want 200 ok", w.Code, w.Body.String())
	}
	select {
	case b := <-got:
		if b != body {
			t.Fatalf("the router read %d bytes, not the %d sent as they were", len(b), len(body))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the router read no body")
	}
}
