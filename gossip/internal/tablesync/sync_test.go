package tablesync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/homes/record"
	ftest "github.com/fenec/fenec-entry/internal/testutil"
)

func TestSnapshotJoinerGetsFullTable(t *testing.T) {
	ms := newMembers("a", "b")
	a, b := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms)
	fill(a.table, 0, 9990, ver(-time.Minute, 0, "c"))
	for i := range 10 { // and some heard at a itself
		a.table.Learn(fmt.Sprintf("local-%d", i), i%3)
	}
	a.table.Mark(0)
	a.table.Mark(1)
	a.table.Clear(1)

	applied, invalid, err := b.sync.Fetch(context.Background(), a.peer())
	if err != nil || invalid != 0 || applied != 10000+3 {
		t.Fatalf("Fetch: applied %d, invalid %d, %v; want 10003 (homes, 2 failures, a clear), 0, nil", applied, invalid, err)
	}
	equalTables(t, a.table, b.table)
	if got := b.table.Failing(); got != 1 {
		t.Errorf("failing regions at b: %#b, want eu only (us failed, then cleared)", got)
	}
	var want []homes.Mark // as records carry them: to the millisecond
	for _, m := range a.table.Marks() {
		want = append(want, record.Normal(m))
	}
	if !reflect.DeepEqual(b.table.Marks(), want) {
		t.Errorf("marks at b %+v, want a's %+v", b.table.Marks(), want)
	}
	// Counted once the stream's trailer is written, which b may have read before: a moment.
	ftest.Eventually(t, 2*time.Second, "a counted one snapshot served ok", func() bool { return a.served("snapshot", "ok") == 1 })

	// Again: everything is already there, nothing changes.
	applied, _, err = b.sync.Fetch(context.Background(), a.peer())
	if err != nil || applied != 0 {
		t.Errorf("second Fetch: applied %d, %v; want 0, nil", applied, err)
	}
}

// Homes that gossip brings while the snapshot streams are newer than the snapshot's and are
// not overwritten, whether their tenants were already streamed or not yet.
func TestSnapshotKeepsNewerEventsAppliedDuringFetch(t *testing.T) {
	ms := newMembers("a", "b")
	a, b := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms)
	old := ver(-time.Minute, 0, "a")
	fill(a.table, 0, 10000, old)
	newer := ver(0, 0, "x")
	var once sync.Once
	a.wrap(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		next.ServeHTTP(flushHook{w, func() {
			once.Do(func() { // after the first block went out
				for _, i := range []int{0, 1, 2, 5000, 9998, 9999} {
					b.table.Apply(homes.Home{Tenant: fmt.Sprintf("tenant-%d", i), Region: "ap", Version: newer})
				}
			})
		}}, r)
	})
	if _, _, err := b.sync.Fetch(context.Background(), a.peer()); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 2, 5000, 9998, 9999} {
		h, _, _ := b.table.Get(fmt.Sprintf("tenant-%d", i))
		if h.Region != "ap" || h.Version != newer {
			t.Errorf("tenant-%d: %+v, want the newer home in ap", i, h)
		}
	}
	if h, _, _ := b.table.Get("tenant-3"); h.Version.Origin != "a" {
		t.Errorf("tenant-3: %+v, want a's", h)
	}
}

// flushHook calls hook on every Flush, after flushing.
type flushHook struct {
	http.ResponseWriter
	hook func()
}

func (f flushHook) Unwrap() http.ResponseWriter { return f.ResponseWriter }

func (f flushHook) Flush() {
	f.ResponseWriter.(http.Flusher).Flush()
	f.hook()
}

// cut serves the answer of next with its body cut to n bytes (n < 0: len+n) or with byte
// flip (if >= 0) inverted.
func cut(n, flip int) wrapFunc {
	return func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.URL.Path != pathSnapshot {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if n < 0 {
			n += len(body)
		}
		body = body[:min(n, len(body))]
		if flip >= 0 { // a letter of the first tenant name at or after byte flip
			i := flip + bytes.Index(body[flip:], []byte("tenant-"))
			body[i+1] ^= 0x20 // "tEnant-": the same length, another name
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(body)
	}
}

func TestSnapshotTruncatedOrAltered(t *testing.T) {
	rows := []struct {
		name      string
		cut, flip int
		want      error
	}{
		{"cut early", 20, -1, ErrTruncated},
		{"cut mid-stream", 100_000, -1, ErrTruncated},
		{"trailer missing", -40, -1, ErrTruncated},
		{"last byte missing", -1, -1, ErrTruncated},
		{"a tenant altered", 1 << 30, 1000, ErrBadSeal},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			ms := newMembers("a", "b")
			a, b := newSyncNode(t, "a", ms), newSyncNode(t, "b", ms)
			fill(a.table, 0, 5000, ver(-time.Minute, 0, "a"))
			a.wrap(cut(row.cut, row.flip))
			applied, _, err := b.sync.Fetch(context.Background(), a.peer())
			if !errors.Is(err, row.want) {
				t.Fatalf("Fetch: %v, want %v", err, row.want)
			}
			// What was applied is whole sealed blocks of a's homes, as a holds them.
			if applied%record.SealEvery != 0 || applied >= 5000 || b.table.Len() != applied {
				t.Errorf("applied %d (table %d): want whole blocks of %d, fewer than 5000", applied, b.table.Len(), record.SealEvery)
			}
			want := contents(a.table)
			for k, h := range contents(b.table) {
				if want[k] != h {
					t.Errorf("%s: %+v, a holds %+v", k, h, want[k])
				}
			}
			if row.want == ErrBadSeal && applied != 0 {
				t.Errorf("altered first block applied: %d homes", applied)
			}
		})
	}
}

func TestSnapshotInvalidRecordsCountedAndSkipped(t *testing.T) {
	ms := newMembers("a", "b")
	a := newSyncNode(t, "a", ms)
	b := newSyncNode(t, "b", ms, withRegions("eu", "us")) // b does not take ap
	fill(a.table, 0, 300, ver(-time.Minute, 0, "a"))      // 100 of them in ap
	a.table.Learn("bad/name", 0)
	a.table.Apply(homes.Home{Tenant: "from-the-future", Region: "eu", Version: ver(time.Hour, 0, "a")})
	applied, invalid, err := b.sync.Fetch(context.Background(), a.peer())
	if err != nil || applied != 200 || invalid != 102 {
		t.Fatalf("Fetch: applied %d, invalid %d, %v; want 200, 102, nil", applied, invalid, err)
	}
	if _, _, ok := b.table.Get("bad/name"); ok {
		t.Error("invalid tenant applied")
	}
	if n := int(testutil.ToFloat64(b.sync.m.invalid.WithLabelValues(viaSnapshot, typeHome))); n != 102 {
		t.Errorf("invalid metric %v, want 102", n)
	}
}

func TestSyncBootstrap(t *testing.T) {
	ms := newMembers("a", "b", "c")
	a := newSyncNode(t, "a", ms)
	fill(a.table, 0, 1000, ver(-time.Minute, 0, "a"))
	dead := httptest.NewServer(http.NotFoundHandler())
	deadPeer := Peer{Name: "d", Addr: dead.Listener.Addr().String()}
	dead.Close()

	t.Run("no peers", func(t *testing.T) {
		b := newSyncNode(t, "b", ms)
		if err := b.sync.Bootstrap(context.Background()); err != nil || b.table.Len() != 0 {
			t.Fatalf("Bootstrap: %v, %d homes", err, b.table.Len())
		}
	})
	t.Run("one dead, one refusing, one good", func(t *testing.T) {
		b := newSyncNode(t, "b", ms)
		b.peers = []Peer{deadPeer, {Name: "c", Addr: a.peer().Addr}, a.peer()} // "c" at a's address: bad reply
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.sync.Bootstrap(ctx); err != nil {
			t.Fatal(err)
		}
		equalTables(t, a.table, b.table)
	})
	t.Run("all failing until ctx ends", func(t *testing.T) {
		b := newSyncNode(t, "b", ms)
		b.peers = []Peer{deadPeer}
		ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
		defer cancel()
		err := b.sync.Bootstrap(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Bootstrap: %v, want deadline exceeded", err)
		}
		if n := int(testutil.ToFloat64(b.sync.m.fetches.WithLabelValues("error"))); n < 2 {
			t.Errorf("%d failed fetches, want retries", n)
		}
	})
}
