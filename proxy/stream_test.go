package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// An event reaches the client as the router sends it: each tick arrives on
// its own, within a short time of the router writing it, not batched.
func TestSSEStreamsEachEvent(t *testing.T) {
	e := newEnv(t)
	e.learn("acme")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/t/acme/events?tick=100", nil)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type = %q", ct)
	}
	br := bufio.NewReader(resp.Body)
	ticks := 0
	var worst time.Duration
	for ticks < 5 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended after %d of 5 ticks: %v", ticks, err)
		}
		if !strings.HasPrefix(line, "data: ") || !strings.Contains(line, "unix_nano") {
			continue
		}
		var d struct {
			Seq      int   `json:"seq"`
			UnixNano int64 `json:"unix_nano"`
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
			t.Fatal(err)
		}
		if lag := time.Since(time.Unix(0, d.UnixNano)); lag > worst {
			worst = lag
		}
		ticks++
	}
	t.Logf("worst lag of 5 ticks from router write to client read: %v", worst)
	// A buffering proxy would hold ticks until 32 KiB or the end of the
	// stream: never, here. The bound is loose for a shared, -race machine.
	if worst > 500*time.Millisecond {
		t.Errorf("a tick took %v to arrive: buffered, not flushed per write", worst)
	}
}

// A write applied while a stream is open reaches the stream.
//
// Once, this test had no deadline and swallowed its POST's error, so a write
// that never reached the stream waited out go test's timeout. Now the stream and the write
// share a 10 s deadline, a failed write ends the stream at once, and either way the test
// fails saying what became of the write.
func TestSSECarriesWrites(t *testing.T) {
	e := newEnv(t)
	e.learn("acme")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/t/acme/events", nil)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("opening the stream: %v", err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); !strings.HasPrefix(line, "event: open") {
		t.Fatalf("first line %q (%v), want event: open", line, err)
	}
	// Not e.do: it may call t.Fatal, which must not run outside the test's goroutine. A
	// write that fails cancels the stream, so the read below ends at once.
	posted := make(chan string, 1)
	go func() {
		preq, _ := http.NewRequestWithContext(ctx, "POST", e.srv.URL+"/t/acme/items", strings.NewReader("hello"))
		presp, err := e.srv.Client().Do(preq)
		if err != nil {
			posted <- err.Error()
			cancel()
			return
		}
		presp.Body.Close()
		posted <- presp.Status
		if presp.StatusCode != http.StatusCreated {
			cancel()
		}
	}()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			write := "no answer yet"
			select {
			case write = <-posted:
			default:
			}
			t.Fatalf("the stream ended before the write reached it: %v (the write: %s)", err, write)
		}
		if strings.HasPrefix(line, "event: item") {
			return
		}
	}
}

// A client that goes away cancels the request to the router at once, before
// or after the answer head: the router sees its connection close within a
// second.
func TestCancellationReachesRouter(t *testing.T) {
	t.Run("stream after the head", func(t *testing.T) {
		e := newEnv(t)
		e.learn("acme")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/t/acme/events", nil)
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatalf("opening the stream: %v", err)
		}
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
			t.Fatalf("reading the stream's first line: %v", err)
		}
		gone := time.Now()
		cancel()
		resp.Body.Close()
		e.waitClientGone(t, "/t/acme/events", gone)
	})
	t.Run("held write before the head", func(t *testing.T) {
		e := newEnv(t)
		e.learn("acme")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", e.srv.URL+"/t/acme/items", strings.NewReader("x"))
		req.Header.Set("Fenec-Wait", "20")
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := e.srv.Client().Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		testutil.Eventually(t, 5*time.Second, "held write reaches the router", func() bool {
			for _, s := range e.sc.Seen() {
				if s.Method == "POST" {
					return true
				}
			}
			return false
		})
		gone := time.Now()
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the client's request did not end within 5 s of its cancellation")
		}
		e.waitClientGone(t, "/t/acme/items", gone)
		if n := len(e.applies("acme")); n != 0 {
			t.Errorf("a cancelled held write was applied %d times", n)
		}
	})
}

func (e *testEnv) waitClientGone(t *testing.T, path string, gone time.Time) {
	t.Helper()
	testutil.Eventually(t, 2*time.Second, "router sees the client go", func() bool {
		for _, s := range e.sc.Seen() {
			if s.Path == path && s.From == "" && s.ClientGone && !s.End.IsZero() {
				if lag := s.End.Sub(gone); lag > time.Second {
					t.Errorf("router saw the client go after %v, want within 1s", lag)
				}
				return true
			}
		}
		return false
	})
}

// Answers shorter, about as long as, and longer than the 4 KiB first copy buffer arrive
// whole, byte for byte (the echo answer carries the request's X-Pad header back).
func TestAnswerBodiesAroundTheCopyBuffer(t *testing.T) {
	e := newEnv(t)
	e.learn("acme")
	for _, pad := range []int{100, 3900, 4096, 4300, 40000} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		want := strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyz"[:pad%31+5], pad/(pad%31+5)+1)[:pad]
		req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/t/acme/echo", nil)
		req.Header.Set("X-Pad", want)
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		var ans struct {
			Headers http.Header `json:"headers"`
		}
		err = json.NewDecoder(resp.Body).Decode(&ans)
		resp.Body.Close()
		cancel()
		if err != nil {
			t.Fatalf("pad %d: the answer does not decode: %v", pad, err)
		}
		if got := ans.Headers.Get("X-Pad"); got != want {
			t.Fatalf("pad %d: the header came back %d bytes long, want %d, or changed", pad, len(got), len(want))
		}
	}
}

// A stream outlives --answer-timeout: the deadline for the answer head, kept on the router
// connection from request to request, is lifted before the body is read from the socket.
func TestStreamOutlivesTheAnswerTimeout(t *testing.T) {
	const answerTimeout = 300 * time.Millisecond
	e := newEnv(t, withConfig(func(c *Config) { c.AnswerTimeout = answerTimeout }))
	e.learn("acme")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A request first, so that the stream's connection may be one with a deadline set.
	if resp, err := e.srv.Client().Get(e.srv.URL + "/t/acme/items/1"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/t/acme/events?tick=100", nil)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	start := time.Now()
	ticks := 0
	for time.Since(start) < 4*answerTimeout {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended after %v (%d ticks), want no limit once the head came: %v", time.Since(start), ticks, err)
		}
		if strings.HasPrefix(line, "data: ") {
			ticks++
		}
	}
	if ticks < 5 {
		t.Errorf("%d ticks in %v, want one each 100 ms", ticks, 4*answerTimeout)
	}
}

// TestStreamPaused: a stream that handed on all it had waits for its next bytes without the
// copy buffer; an answer of known length never waits there (its last byte may have come with
// no end reported yet, and nothing more would: a wait would hang it), nor one with bytes
// still buffered or a read that filled the buffer (a bulk answer, read on at once).
func TestStreamPaused(t *testing.T) {
	buffered := bufio.NewReader(strings.NewReader("more"))
	buffered.Peek(1)
	empty := bufio.NewReader(strings.NewReader(""))
	for _, tt := range []struct {
		name   string
		length int64
		n      int
		br     *bufio.Reader
		want   bool
	}{
		{"a stream paused", -1, 100, empty, true},
		{"known length", 64, 64, empty, false},
		{"known length, read short", 8192, 100, empty, false},
		{"bytes still buffered", -1, 100, buffered, false},
		{"the buffer filled", -1, 4096, empty, false},
	} {
		if got := streamPaused(&http.Response{ContentLength: tt.length}, tt.n, 4096, tt.br); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// An answer whose last bytes come with the read that ends it is not flushed before the
// handler returns: HTTP/2 then sends the head and the body with END_STREAM in one go, not a
// third, empty frame after a flush. An answer that waits between reads is flushed at each
// (TestSSEStreamsEachEvent).
func TestAnswerEndingWithItsReadIsNotFlushed(t *testing.T) {
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2")
		w.Write([]byte("ok"))
	}))
	defer router.Close()
	h := benchHandler(t, router.URL)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/t/acme/items/1", nil))
	if w.Code != 200 || w.Body.String() != "ok" {
		t.Fatalf("%d %q, want 200 ok", w.Code, w.Body.String())
	}
	if w.Flushed {
		t.Error("the answer was flushed before the handler returned")
	}
}
