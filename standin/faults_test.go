package standin

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

func TestParseFault(t *testing.T) {
	good := map[string]Fault{
		"":                    {},
		"ok":                  {},
		"down":                {Mode: FaultDown},
		"refuse":              {Mode: FaultRefuse},
		"reset_after_request": {Mode: FaultResetAfterRequest},
		"unmarked_5xx":        {Mode: FaultUnmarked5xx},
		"marked_5xx_no_home":  {Mode: FaultMarked5xxNoHome},
		"slow=200":            {Mode: FaultSlow, SlowMS: 200},
		"blackhole":           {Mode: FaultBlackhole},
	}
	for s, want := range good {
		got, err := ParseFault(s)
		if err != nil || got != want {
			t.Errorf("ParseFault(%q) = %+v, %v, want %+v", s, got, err, want)
		}
		if s != "" && got.String() != s {
			t.Errorf("%+v.String() = %q, want %q", got, got.String(), s)
		}
	}
	for _, s := range []string{"slow", "slow=", "slow=-1", "slow=x", "down=1", "crash", "DOWN"} {
		if f, err := ParseFault(s); err == nil {
			t.Errorf("ParseFault(%q) = %+v, want an error", s, f)
		}
	}
	// FaultModes, which the help and the README are checked against, is every mode ParseFault
	// reads: each syntax parses to its mode, and the error for an unknown one lists them all.
	var listed []string
	for _, m := range FaultModes() {
		listed = append(listed, m.Mode)
		f, err := ParseFault(strings.Replace(m.Syntax, "<ms>", "5", 1))
		if err != nil || f.Mode != m.Mode || m.Summary == "" {
			t.Errorf("FaultModes entry %+v: ParseFault = %+v, %v", m, f, err)
		}
	}
	var parsed []string
	for _, f := range good {
		if f.Mode != FaultNone {
			parsed = append(parsed, f.Mode)
		}
	}
	slices.Sort(listed)
	slices.Sort(parsed)
	if !slices.Equal(listed, parsed) {
		t.Errorf("FaultModes lists %v, ParseFault reads %v", listed, parsed)
	}
	_, err := ParseFault("crash")
	for _, m := range FaultModes() {
		if err == nil || !strings.Contains(err.Error(), m.Syntax) {
			t.Errorf("the error for an unknown mode (%v) does not list %s", err, m.Syntax)
		}
	}
	c := startCluster(t, nil)
	if err := c.SetFault(c.addrOf("eu", 0), Fault{Mode: "crash"}); err == nil {
		t.Error("SetFault accepted an unknown mode")
	}
	if err := c.SetFault("127.0.0.1:1", Fault{}); err == nil {
		t.Error("SetFault accepted an unknown router")
	}
}

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// rawConn is a kept-alive connection to a router that has answered one request.
func rawConn(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(testRequestTimeout))
	io.WriteString(conn, "GET /t/acme/echo HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return conn, br
}

// closedSoon reports whether the server closes conn within 5 s.
func closedSoon(conn net.Conn, br *bufio.Reader) bool {
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func TestFaultDown(t *testing.T) {
	c := startCluster(t, nil)
	client := newClient(t)
	addr := c.addrOf("eu", 0)
	idle, idleR := rawConn(t, addr)
	resp, err := client.Get(c.url("eu", 0) + "/t/acme/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := readEvents(resp.Body)
	nextEvent(t, events, "open", isEvent("open"))

	if err := c.SetFault(addr, Fault{Mode: FaultDown}); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", addr); !isRefused(err) {
		t.Errorf("dial a down router: %v, want refused", err)
	}
	select { // the open stream is cut at once
	case _, ok := <-events:
		for ok {
			_, ok = <-events
		}
	case <-time.After(5 * time.Second):
		t.Error("the stream outlived its router")
	}
	if !closedSoon(idle, idleR) {
		t.Error("an idle connection outlived its router")
	}
	if err := c.SetFault(addr, Fault{}); err != nil {
		t.Fatal(err)
	}
	if a := do(t, client, req{url: c.url("eu", 0) + "/t/acme/echo"}); a.status != 200 {
		t.Errorf("after clearing: %d", a.status)
	}
}

func TestFaultRefuse(t *testing.T) {
	c := startCluster(t, nil)
	addr := c.addrOf("eu", 0)
	idle, idleR := rawConn(t, addr)
	// A held write in flight on a kept-alive connection.
	busy, busyR := rawConn(t, addr)
	io.WriteString(busy, "POST /t/acme/items HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nFenec-Wait: 0.3\r\n\r\n")
	testutil.Eventually(t, 5*time.Second, "the held write", func() bool { return len(seenWhere(c, func(s Seen) bool { return s.Method == "POST" })) == 1 })

	if err := c.SetFault(addr, Fault{Mode: FaultRefuse}); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", addr); !isRefused(err) {
		t.Errorf("dial a refusing router: %v, want refused", err)
	}
	if !closedSoon(idle, idleR) {
		t.Error("an idle connection stayed open")
	}
	resp, err := http.ReadResponse(busyR, nil)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("the write in flight: %v %v, want 201", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	if !closedSoon(busy, busyR) {
		t.Error("the connection of the finished request stayed open")
	}
	if n := len(c.Ledger()); n != 1 {
		t.Errorf("ledger has %d writes, want 1", n)
	}
	if err := c.SetFault(addr, Fault{}); err != nil {
		t.Fatal(err)
	}
	if a := do(t, newClient(t), req{url: c.url("eu", 0) + "/t/acme/echo"}); a.status != 200 {
		t.Errorf("after clearing: %d", a.status)
	}
}

func TestFaultResetAfterRequest(t *testing.T) {
	for _, region := range []string{"eu", "us"} { // applying the write, and relaying it
		t.Run(region, func(t *testing.T) {
			c := startCluster(t, nil)
			if err := c.SetFault(c.addrOf(region, 0), Fault{Mode: FaultResetAfterRequest}); err != nil {
				t.Fatal(err)
			}
			_, err := doErr(context.Background(), newClient(t), req{method: "POST", url: c.url(region, 0) + "/t/acme/items", body: "x"})
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("client error %v, want connection reset", err)
			}
			if l := c.Ledger(); len(l) != 1 || l[0].Region != "eu" {
				t.Errorf("ledger = %+v, want the write applied once at eu", l)
			}
			testutil.Eventually(t, 5*time.Second, "the record", func() bool {
				s := seenWhere(c, func(s Seen) bool { return s.Region == region && !s.End.IsZero() })
				return len(s) == 1 && s[0].Status == 0 && s[0].Fault == FaultResetAfterRequest
			})
		})
	}
}

func TestFaultsThatProcessNothing(t *testing.T) {
	tests := []struct {
		fault  Fault
		status int
		shard  bool
	}{
		{Fault{Mode: FaultUnmarked5xx}, 502, false},
		{Fault{Mode: FaultMarked5xxNoHome}, 503, true},
	}
	for _, tt := range tests {
		t.Run(tt.fault.String(), func(t *testing.T) {
			c := startCluster(t, nil)
			for _, region := range []string{"eu", "us"} {
				if err := c.SetFault(c.addrOf(region, 0), tt.fault); err != nil {
					t.Fatal(err)
				}
				a := do(t, newClient(t), req{method: "POST", url: c.url(region, 0) + "/t/acme/items", header: map[string]string{hdrHome: "1"}})
				if a.status != tt.status || (a.header.Get(hdrShard) == "1") != tt.shard || a.header.Get(hdrHome) != "" {
					t.Errorf("%s: %d %v, want %d, Fenec-Shard %v, no Fenec-Home", region, a.status, a.header, tt.status, tt.shard)
				}
			}
			if n := len(c.Ledger()); n != 0 {
				t.Errorf("ledger has %d writes, want 0", n)
			}
			if n := len(seenWhere(c, func(s Seen) bool { return s.Relayed })); n != 0 {
				t.Errorf("%d requests relayed, want 0", n)
			}
		})
	}
}

func TestFaultSlow(t *testing.T) {
	c := startCluster(t, nil)
	addr := c.addrOf("us", 0)
	if err := c.SetFault(addr, Fault{Mode: FaultSlow, SlowMS: 200}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	a := do(t, newClient(t), req{method: "POST", url: c.url("us", 0) + "/t/acme/items", body: "abc"})
	if a.status != 201 || time.Since(start) < 200*time.Millisecond || a.json(t)["body"] != 3.0 {
		t.Errorf("slow write: %d %s after %v, want 201 after 200ms", a.status, a.body, time.Since(start))
	}

	// A client that leaves during the wait gets nothing processed.
	if err := c.SetFault(addr, Fault{Mode: FaultSlow, SlowMS: 30000}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := doErr(ctx, newClient(t), req{method: "POST", url: c.url("us", 0) + "/t/acme/items", body: "abc"}); err == nil {
		t.Fatal("a request cancelled during the wait succeeded")
	}
	testutil.Eventually(t, 5*time.Second, "the router to see the client go", func() bool {
		return len(seenWhere(c, func(s Seen) bool { return s.ClientGone && s.Router == addr })) == 1
	})
	if n := len(c.Ledger()); n != 1 {
		t.Errorf("ledger has %d writes, want 1", n)
	}
}

func TestFaultBlackhole(t *testing.T) {
	c := startCluster(t, nil)
	addr := c.addrOf("eu", 1)
	if err := c.SetFault(addr, Fault{Mode: FaultBlackhole}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := doErr(ctx, newClient(t), req{method: "POST", url: c.url("eu", 1) + "/t/acme/items", body: "x"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("client error %v, want its own timeout", err)
	}
	testutil.Eventually(t, 5*time.Second, "the router to see the client go", func() bool {
		s := seenWhere(c, func(s Seen) bool { return s.Router == addr && !s.End.IsZero() })
		return len(s) == 1 && s[0].ClientGone && s[0].Status == 0
	})
	if n := len(c.Ledger()); n != 0 {
		t.Errorf("ledger has %d writes, want 0", n)
	}
	// The admin API is never subject to faults.
	if a := do(t, newClient(t), req{url: c.url("eu", 1) + "/_standin/health"}); a.status != 200 {
		t.Errorf("admin under blackhole: %d", a.status)
	}
}
