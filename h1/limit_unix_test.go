//go:build unix

package h1

import (
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// Out of descriptors (the process's open-file limit), accept sheds a kept-alive idle
// connection and takes the new one at once, saying so once in the log; and says when it
// accepts again.
func TestAcceptOutOfDescriptorsShedsIdle(t *testing.T) {
	eachPoller(t, testAcceptOutOfDescriptorsShedsIdle)
}

func testAcceptOutOfDescriptorsShedsIdle(t *testing.T, pk testPoller) {
	var mu sync.Mutex
	var logged []string
	s := &Server{Handler: http.HandlerFunc(okHandler), IdleTimeout: time.Minute,
		AcceptLog: func(msg string, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				msg += ": " + err.Error()
			}
			logged = append(logged, msg)
		}}
	addr := pk.start(t, s)
	keptAlive(t, addr)
	keptAlive(t, addr)
	testutil.Eventually(t, 2*time.Second, "two held", func() bool { return s.Held() == 2 })

	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// Room for the client's socket only (the descriptor below the limit that the test's own
	// open frees): the server's accept meets EMFILE.
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	low := lim
	setLimit(&low.Cur, f.Fd()+1)
	f.Close()
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip("cannot lower the open-file limit:", err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		}
	}
	t.Cleanup(restore)
	c, br := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: e\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	restore()
	if err != nil {
		t.Fatalf("the new connection out of descriptors: %v", err)
	}
	wantOK(t, resp, "the new connection out of descriptors")
	if s.Shed() < 1 {
		t.Errorf("Shed() = %d, want the idle connections closed for room", s.Shed())
	}
	keptAlive(t, addr) // an accept that succeeds says so
	// Once a shortage, until an accept works again: the lines alternate, starting with the
	// shortage and ending with the recovery. A run may meet two shortages, each said once:
	// Linux's accept4 takes a descriptor before it looks for a connection, so with none left
	// an accept with nothing to take fails too. The recovery is said after the accepted
	// connection is handed on, so it may follow the answer.
	testutil.Eventually(t, 2*time.Second, "a shortage and its end said", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(logged) > 0 && len(logged)%2 == 0
	})
	mu.Lock()
	defer mu.Unlock()
	for i, l := range logged {
		short := strings.Contains(l, "out of file descriptors") && strings.Contains(l, "too many open files")
		if i%2 == 0 && !short || i%2 == 1 && l != "accepting connections again" {
			t.Errorf("logged %q; want each shortage said once, then accepting again", logged)
			break
		}
	}
}

// setLimit sets a limit of syscall.Rlimit, an int64 on some systems and a uint64 on others.
func setLimit[T ~int64 | ~uint64](l *T, v uintptr) { *l = T(v) }
