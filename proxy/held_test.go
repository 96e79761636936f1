package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/homes"
)

// Once, a router's 5xx held while the next region is asked was read to its end
// with no deadline, so a router that stalled that body stalled the failover for as long as
// it liked. The held body gets the answer timeout.
func TestHeldBodyHasTheAnswerTimeout(t *testing.T) {
	release := make(chan struct{})
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Fenec-Shard", "1") // a router's own 5xx, no Fenec-Home: the next region
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":`))
		w.(http.Flusher).Flush()
		select { // the rest of the body never comes
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer stall.Close()
	defer close(release) // before stall.Close, which waits for the handler
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Fenec-Shard", "1")
		w.Write([]byte("ok"))
	}))
	defer good.Close()

	table, err := homes.New(homes.Config{Regions: []string{"eu", "us"}, Origin: "test"})
	if err != nil {
		t.Fatal(err)
	}
	eu, _ := url.Parse(stall.URL)
	us, _ := url.Parse(good.URL)
	const answerTimeout = 300 * time.Millisecond
	h, err := New(Config{Homes: table, AnswerTimeout: answerTimeout,
		Regions: []Region{{Name: "eu", Routers: []*url.URL{eu}}, {Name: "us", Routers: []*url.URL{us}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer func() { srv.Close(); h.Close() }()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/t/acme/items/1", nil)
	start := time.Now()
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("GET after eu stalled its 5xx body: %v (the failover waited on the body)", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Errorf("got %d %q, want us's 200 ok", resp.StatusCode, body)
	}
	// The answer timeout, plus room for a shared -race machine; far short of the 5 s bound.
	if took > answerTimeout+2*time.Second {
		t.Errorf("failover took %v with a %v answer timeout", took, answerTimeout)
	}
}
