//go:build unix

package proxy

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/fenec/fenec-entry/homes"
)

// A router dial that meets the open-file limit asks FreeDescriptors for room and is made once
// more: the request is answered, not failed over (or answered 502) for want of a descriptor.
func TestRouterDialOutOfDescriptors(t *testing.T) {
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Fenec-Shard", "1")
		w.Write([]byte("ok"))
	}))
	defer router.Close()
	table, err := homes.New(homes.Config{Regions: []string{"eu"}, Origin: "test"})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(router.URL)
	var spare []*os.File // what FreeDescriptors frees: the client server's idle connections, in the node
	freed := 0
	h, err := New(Config{Regions: []Region{{Name: "eu", Routers: []*url.URL{u}}}, Homes: table,
		FreeDescriptors: func() bool {
			for _, f := range spare {
				f.Close()
			}
			freed += len(spare)
			spare = nil
			return freed > 0
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for range 4 { // the dial's socket, and the router's accept in this same process
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		spare = append(spare, f)
	}
	defer func() {
		for _, f := range spare {
			f.Close()
		}
	}()

	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	setLimit(&low.Cur, lowestFreeFD(t)) // every descriptor below in use: the next one meets EMFILE
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip("cannot lower the open-file limit:", err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/t/acme/items/1", nil))
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	if w.Code != 200 || w.Body.String() != "ok" {
		t.Fatalf("answered %d %q, want the router's 200 ok", w.Code, w.Body.String())
	}
	if freed == 0 {
		t.Error("the dial did not meet the limit: the test proved nothing")
	}
}

// setLimit sets an Rlimit field, uint64 on Linux and int64 on the BSDs.
func setLimit[T int64 | uint64](p *T, v int) { *p = T(v) }

// lowestFreeFD is the descriptor the next open gets: a limit at it leaves none free.
func lowestFreeFD(t *testing.T) int {
	t.Helper()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return int(f.Fd())
}
