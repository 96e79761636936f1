package h1

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// The portable poller's own: what its watcher does that epoll has no counterpart of.

// A watcher that saw bytes the serving goroutine's own read then took (a raw read and the
// watcher's peek are made beside each other) tells dispatch of data no longer there: the
// connection, woken with nothing to read, parks again, and its watcher must look again. It
// waited for a read that never came, and the next request was not served.
func TestPortableWakeForBytesReadAlreadyKeepsWatching(t *testing.T) {
	for _, pk := range []testPoller{portable, portableByDeadline} {
		t.Run(pk.name, func(t *testing.T) {
			s := &Server{Handler: http.HandlerFunc(okHandler), ReadHeaderTimeout: 2 * time.Second}
			addr := pk.start(t, s)
			c, br, parked := parkedConn(t, s, addr)
			// As the watcher does when it saw data: it steps out of its wait and waits for a
			// read, and tells dispatch.
			w := parked.ns
			w.mu.Lock()
			w.edge = true
			w.kickLocked()
			w.mu.Unlock()
			s.dispatch(parked, evIn, false)
			testutil.Eventually(t, 2*time.Second, "the woken connection parked again", func() bool {
				return parked.state.Load() == stateIdle
			})
			c.SetDeadline(time.Now().Add(3 * time.Second))
			resp := get(t, c, br, "/")
			if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(b) != "ok" {
				t.Errorf("after the wake: %d %q", resp.StatusCode, b)
			}
		})
	}
}
