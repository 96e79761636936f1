package testutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// fakeTB records a Fatalf and ends the goroutine, as testing.T's does.
type fakeTB struct {
	testing.TB
	fatal string // what Fatalf said; "" if it was not called
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// eventually runs Eventually(fake, within, what, cond) on a goroutine of its own, as Fatalf
// ends the goroutine, and returns what it returned and what the fake was told.
func eventually(within, interval time.Duration, what string, cond func() bool) (took time.Duration, fatal string) {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		took = EventuallyEvery(f, within, interval, what, cond)
	}()
	<-done
	return took, f.fatal
}

func TestEventuallyFailsNamingWhatItWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		start := time.Now()
		_, fatal := eventually(5*time.Second, Interval, "the cluster formed", func() bool { calls++; return false })
		if want := "not within 5s: the cluster formed"; fatal != want {
			t.Errorf("Fatalf(%q), want %q", fatal, want)
		}
		if took := time.Since(start); took != 5*time.Second {
			t.Errorf("gave up after %v, want 5s", took)
		}
		// One call at once, one every 10 ms, and one at the deadline.
		if want := 5*time.Second/Interval + 1; calls < int(want) {
			t.Errorf("cond called %d times, want at least %d", calls, want)
		}
	})
}

// A real *testing.T: the test fails with the message at the caller's line, and the code
// after Eventually does not run. A test that fails cannot run as a subtest of one that
// passes, so it runs in a child process of the test binary.
func TestEventuallyFailsARealTest(t *testing.T) {
	if os.Getenv("TESTUTIL_MUST_FAIL") == "1" {
		Eventually(t, 50*time.Millisecond, "a condition that never holds", func() bool { return false })
		t.Log("went on after Eventually")
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestEventuallyFailsARealTest$", "-test.v")
	cmd.Env = append(os.Environ(), "TESTUTIL_MUST_FAIL=1")
	b, err := cmd.CombinedOutput()
	out := string(b)
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("child: %v, want exit status 1\n%s", err, out)
	}
	for _, want := range []string{"wait_test.go:", "not within 50ms: a condition that never holds", "--- FAIL: TestEventuallyFailsARealTest"} {
		if !strings.Contains(out, want) {
			t.Errorf("child's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "went on") {
		t.Errorf("the test went on after Eventually failed it:\n%s", out)
	}
}

func TestEventuallyReturnsOnceCondHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		took, fatal := eventually(time.Minute, 10*time.Millisecond, "three calls", func() bool { calls++; return calls == 3 })
		if fatal != "" || calls != 3 || took != 20*time.Millisecond {
			t.Errorf("Fatalf(%q), %d calls, took %v; want no failure, 3 calls, 20ms", fatal, calls, took)
		}
	})
}

// A condition that holds by the deadline passes, however long the interval.
func TestEventuallyLooksAgainAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		took, fatal := eventually(time.Second, time.Hour, "a second passed", func() bool { return time.Since(start) >= time.Second })
		if fatal != "" || took != time.Second {
			t.Errorf("Fatalf(%q), took %v; want no failure after 1s", fatal, took)
		}
	})
}

func TestPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		missing := errors.New("b: not ready")
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		took, err := Poll(ctx, 100*time.Millisecond, "cluster whole", func() error { return missing })
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, missing) {
			t.Errorf("err %v, want one wrapping the deadline and the last check's error", err)
		}
		if want := "cluster whole: context deadline exceeded after 3s: b: not ready"; err == nil || err.Error() != want {
			t.Errorf("err %q, want %q", err, want)
		}
		if took != 3*time.Second {
			t.Errorf("took %v, want 3s", took)
		}

		n := 0
		took, err = Poll(t.Context(), 100*time.Millisecond, "two checks", func() error {
			if n++; n < 2 {
				return missing
			}
			return nil
		})
		if err != nil || took != 100*time.Millisecond {
			t.Errorf("Poll = %v, %v; want nil after 100ms", took, err)
		}
	})
}

func TestPollEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		_, err := Poll(ctx, time.Hour, "never", func() error { return errNotYet })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
	})
}
