package tablesync

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/homes/record"
)

// A later release's entry may ask in, or answer with, versions this one does not know. Each is
// refused whole, counted, and changes nothing; what this entry knows goes on working.

// A pull request of a newer format: 400 bad_request, counted by the server
// (fenec_entry_snapshot_requests_total{endpoint="pull",result="bad_request"}); the current
// format is served.
func TestNewerPullVersionRefused(t *testing.T) {
	ms := newMembers("a", "b")
	a, b := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms)
	fill(b.table, 0, 10, ver(-time.Minute, 0, "b"))
	all := bytes.Repeat([]byte{0xff}, digestBuckets/8)
	body, err := msgpack.Marshal(&pullRequest{Version: pullVersion + 1, Buckets: all})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = a.sync.call(context.Background(), b.peer(), http.MethodPost, pathPull, body)
	if se := (*StatusError)(nil); !errors.As(err, &se) || se.Code != "bad_request" {
		t.Errorf("pull of version %d: %v, want 400 bad_request", pullVersion+1, err)
	}
	if got := b.served("pull", "bad_request"); got != 1 {
		t.Errorf("b counted %d refused pulls, want 1", got)
	}
	resp, _, err := a.sync.call(context.Background(), b.peer(), http.MethodPost, pathPull, mustMarshalPull(t, all))
	if err != nil {
		t.Fatalf("pull of version %d after: %v", pullVersion, err)
	}
	resp.Body.Close()
}

// A reader that names a newer stream version (Fenec-Stream-Version) is answered in the newest
// this entry writes, and reads it whole.
func TestNewerStreamVersionAskedAnsweredInOurs(t *testing.T) {
	ms := newMembers("a", "b")
	a, b := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms)
	fill(b.table, 0, 10, ver(-time.Minute, 0, "b"))
	resp, mac, err := a.sync.callWith(context.Background(), b.peer(), http.MethodGet, pathSnapshot, nil,
		map[string]string{streamVersionHeader: strconv.Itoa(record.Version + 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := record.NewReader(resp.Body, mac, 1000)
	homesRead := 0
	for {
		rec, err := r.Next()
		if err != nil {
			t.Fatalf("after %d homes: %v", homesRead, err)
		}
		if rec.Kind == record.KindHeader && rec.Version != record.Version {
			t.Fatalf("asked for version %d, answered in %d; want %d", record.Version+1, rec.Version, record.Version)
		}
		if rec.Kind == record.KindHome {
			homesRead++
		}
		if rec.Last {
			break
		}
	}
	if homesRead != 10 {
		t.Errorf("read %d homes, want 10", homesRead)
	}
}

// A stream whose header says a newer version, sealed with the cluster's key: the fetch fails
// (record.ErrBadStream), counted (fenec_entry_snapshot_fetches_total{result="error"}), and
// applies nothing; a fetch of the current version then applies the table.
func TestNewerStreamVersionRefused(t *testing.T) {
	ms := newMembers("a", "b")
	a, b := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms)
	fill(a.table, 0, 10, ver(-time.Minute, 0, "a"))
	a.wrap(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.URL.Path != pathSnapshot {
			next.ServeHTTP(w, r)
			return
		}
		real := httptest.NewRecorder()
		next.ServeHTTP(real, r) // a's proof of the key, then a newer release's body
		w.Header().Set(proofReplyHeader, real.Header().Get(proofReplyHeader))
		w.WriteHeader(http.StatusOK)
		nonce := strings.Fields(r.Header.Get(proofHeader))[1]
		sw := record.NewWriter(w, record.NewMAC(deriveAuthKey(testKey), nonce, pathSnapshot), record.Version+1, nil)
		sw.Header("a", 1, 0)
		sw.Home(homes.Home{Tenant: "newer", Region: "eu", Version: ver(0, 0, "a")})
		sw.Trailer()
	})
	_, _, err := b.sync.Fetch(context.Background(), a.peer())
	if !errors.Is(err, record.ErrBadStream) {
		t.Errorf("Fetch of a version %d stream: %v, want ErrBadStream", record.Version+1, err)
	}
	if b.table.Len() != 0 {
		t.Errorf("b holds %d homes after a stream of a newer version", b.table.Len())
	}
	if got := testutil.ToFloat64(b.sync.m.fetches.WithLabelValues("error")); got != 1 {
		t.Errorf("b counted %v failed fetches, want 1", got)
	}
	a.wrap(func(w http.ResponseWriter, r *http.Request, next http.Handler) { next.ServeHTTP(w, r) })
	if applied, _, err := b.sync.Fetch(context.Background(), a.peer()); err != nil || applied != 10 {
		t.Errorf("Fetch of the current version after: %d applied, %v; want 10", applied, err)
	}
}
