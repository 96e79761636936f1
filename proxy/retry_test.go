package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/testutil"
)

func errCode(t *testing.T, r result) string {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal([]byte(r.body), &e); err != nil {
		return ""
	}
	return e.Error
}

// learn makes the entry know tenant's home by one request through it.
func (e *testEnv) learn(tenant string) {
	e.t.Helper()
	if r := e.do("GET", "/t/"+tenant+"/items/0", nil, ""); r.header.Get("Fenec-Shard") != "1" {
		e.t.Fatalf("learning %s: %d %s", tenant, r.status, r.body)
	}
	if _, ok := e.homes.Lookup(tenant); !ok {
		e.t.Fatalf("home of %s not learned", tenant)
	}
}

func TestLearnsHomeThenGoesStraightThere(t *testing.T) {
	e := newEnv(t)
	// acme lives in eu; the entry knows nothing and starts at the default, us.
	r := e.do("GET", "/t/acme/echo", nil, "")
	if r.status != 200 || e.direct("us") != 1 || e.direct("eu") != 0 {
		t.Fatalf("first request: %d, direct us=%d eu=%d", r.status, e.direct("us"), e.direct("eu"))
	}
	if r.header.Get("Fenec-Home") != "" {
		t.Error("Fenec-Home reached the client")
	}
	if reg, ok := e.homes.Lookup("acme"); !ok || reg != 0 {
		t.Fatalf("home = %d %v, want eu (0)", reg, ok)
	}
	r = e.do("GET", "/t/acme/echo", nil, "")
	if r.status != 200 || e.direct("eu") != 1 || e.direct("us") != 1 {
		t.Fatalf("second request: %d, direct us=%d eu=%d; want straight to eu", r.status, e.direct("us"), e.direct("eu"))
	}
}

// Row: answer with Fenec-Shard, 5xx, Fenec-Home present -> the answer; no
// other region is tried.
func TestRowHome5xxIsTheAnswer(t *testing.T) {
	for _, method := range []string{"GET", "POST"} {
		t.Run(method, func(t *testing.T) {
			e := newEnv(t)
			// acme's home routers (eu) take the relayed request and reset:
			// the us router answers its own 502 naming the home.
			e.fault("eu", 0, "reset_after_request")
			e.fault("eu", 1, "reset_after_request")
			path := "/t/acme/items"
			if method == "GET" {
				path = "/t/acme/items/1"
			}
			r := e.do(method, path, nil, "")
			if r.status != 502 || !strings.Contains(r.body, "home_unreachable") {
				t.Fatalf("got %d %s, want the router's own 502", r.status, r.body)
			}
			if n := e.direct("eu"); n != 0 {
				t.Errorf("entry asked eu %d times after a 502 naming the home", n)
			}
		})
	}
}

// Row: answer with Fenec-Shard, 5xx, no Fenec-Home -> retryable: the next
// region; otherwise the answer.
func TestRowShard5xxWithoutHome(t *testing.T) {
	t.Run("GET goes to the next region", func(t *testing.T) {
		e := newEnv(t)
		e.fault("us", 0, "marked_5xx_no_home")
		e.fault("us", 1, "marked_5xx_no_home")
		r := e.do("GET", "/t/acme/echo", nil, "")
		if r.status != 200 || e.direct("eu") != 1 {
			t.Fatalf("got %d, eu asked %d times; want 200 from eu", r.status, e.direct("eu"))
		}
		if n := e.direct("us"); n != 1 {
			t.Errorf("us asked %d times, want 1 (a router's answer skips the region's other routers)", n)
		}
	})
	t.Run("keyed POST goes to the next region", func(t *testing.T) {
		e := newEnv(t)
		e.fault("us", 0, "marked_5xx_no_home")
		r := e.do("POST", "/t/acme/items", map[string]string{"Idempotency-Key": "k1"}, "x")
		if r.status != 201 || len(e.applies("acme")) != 1 {
			t.Fatalf("got %d, applies %d; want 201 once", r.status, len(e.applies("acme")))
		}
	})
	t.Run("POST gets the answer", func(t *testing.T) {
		e := newEnv(t)
		e.fault("us", 0, "marked_5xx_no_home")
		r := e.do("POST", "/t/acme/items", nil, "x")
		if r.status != 503 || r.header.Get("Fenec-Shard") != "1" {
			t.Fatalf("got %d %s, want the router's 503", r.status, r.body)
		}
		if e.direct("eu") != 0 || len(e.applies("acme")) != 0 {
			t.Errorf("eu asked %d, applies %d; want neither", e.direct("eu"), len(e.applies("acme")))
		}
	})
	t.Run("every region answers 5xx: the last router answer, not the entry's", func(t *testing.T) {
		e := newEnv(t)
		for _, reg := range []string{"eu", "us"} {
			e.fault(reg, 0, "marked_5xx_no_home")
			e.fault(reg, 1, "marked_5xx_no_home")
		}
		r := e.do("GET", "/t/acme/echo", nil, "")
		if r.status != 503 || r.header.Get("Fenec-Shard") != "1" {
			t.Fatalf("got %d %s", r.status, r.body)
		}
	})
}

// Row: connection never made -> the next router, whatever the request.
func TestRowNeverMade(t *testing.T) {
	for _, method := range []string{"GET", "POST"} {
		t.Run(method, func(t *testing.T) {
			e := newEnv(t)
			e.learn("acme")
			e.fault("eu", 0, "refuse")
			e.fault("eu", 1, "ok")
			path := "/t/acme/items"
			if method == "GET" {
				path = "/t/acme/items/1"
			}
			before := len(e.applies("acme"))
			r := e.do(method, path, nil, "x")
			if r.header.Get("Fenec-Shard") != "1" || r.status >= 500 {
				t.Fatalf("got %d %s, want the second router's answer", r.status, r.body)
			}
			if method == "POST" && len(e.applies("acme"))-before != 1 {
				t.Errorf("applies = %d, want 1", len(e.applies("acme"))-before)
			}
		})
	}
	t.Run("every router of every region refuses", func(t *testing.T) {
		e := newEnv(t)
		for _, reg := range []string{"eu", "us"} {
			e.fault(reg, 0, "refuse")
			e.fault(reg, 1, "refuse")
		}
		r := e.do("POST", "/t/acme/items", nil, "x")
		if r.status != 502 || errCode(t, r) != codeNoRegionReachable {
			t.Fatalf("got %d %s, want 502 no_region_reachable", r.status, r.body)
		}
		if r.header.Get("Content-Type") != "application/json" {
			t.Errorf("Content-Type = %q", r.header.Get("Content-Type"))
		}
	})
}

// Row: failed after the request may have been written, or a 5xx without
// Fenec-Shard -> retryable: the next router; otherwise 502 may_have_run, and
// the region's next request starts at its next router.
func TestRowMayHaveReached(t *testing.T) {
	for _, fault := range []string{"reset_after_request", "unmarked_5xx", "blackhole"} {
		t.Run(fault+"/POST without key is never re-sent", func(t *testing.T) {
			e := newEnv(t, withConfig(func(c *Config) { c.AnswerTimeout = 300 * 1e6 }))
			e.learn("acme")
			e.fault("eu", 0, fault)
			r := e.do("POST", "/t/acme/items", nil, "x")
			if r.status != 502 || errCode(t, r) != codeMayHaveRun {
				t.Fatalf("got %d %s, want 502 may_have_run", r.status, r.body)
			}
			if n := len(e.seenAt("eu", 1)); n != 0 {
				t.Errorf("second eu router saw %d requests; the write was re-sent", n)
			}
			if e.direct("us") != 1 { // only the learning GET
				t.Errorf("us asked %d times; the write went to another region", e.direct("us"))
			}
			applied := len(e.applies("acme"))
			if fault == "reset_after_request" && applied != 1 {
				t.Errorf("applies = %d, want exactly the one that ran before the reset", applied)
			} else if fault != "reset_after_request" && applied != 0 {
				t.Errorf("applies = %d, want 0", applied)
			}
			// The region's next request starts at its next router.
			e.fault("eu", 0, "ok")
			r = e.do("POST", "/t/acme/items", nil, "y")
			if r.status != 201 || len(e.seenAt("eu", 1)) != 1 {
				t.Errorf("next write: %d, second router saw %d; want it to start there", r.status, len(e.seenAt("eu", 1)))
			}
		})
		t.Run(fault+"/GET goes to the next router", func(t *testing.T) {
			e := newEnv(t, withConfig(func(c *Config) { c.AnswerTimeout = 300 * 1e6 }))
			e.learn("acme")
			e.fault("eu", 0, fault)
			r := e.do("GET", "/t/acme/echo", nil, "")
			if r.status != 200 || len(e.seenAt("eu", 1)) != 1 {
				t.Fatalf("got %d, second router saw %d", r.status, len(e.seenAt("eu", 1)))
			}
		})
		t.Run(fault+"/keyed POST applied once", func(t *testing.T) {
			e := newEnv(t, withConfig(func(c *Config) { c.AnswerTimeout = 300 * 1e6 }))
			e.learn("acme")
			e.fault("eu", 0, fault)
			r := e.do("POST", "/t/acme/items", map[string]string{"Idempotency-Key": "key-1"}, "x")
			if r.status != 201 {
				t.Fatalf("got %d %s, want 201 from the next router", r.status, r.body)
			}
			if n := len(e.applies("acme")); n != 1 {
				t.Errorf("applies = %d, want 1 for one key", n)
			}
		})
	}
}

// TestMarks is the failure marks of docs/REFERENCE.md, row by row, through the proxy and
// real stand-ins: how long a failure counts depends on the request being planned, not on
// the one that failed; a mark only reorders.
// reachAgain probes the regions this entry cannot reach and fails the test unless region is
// reached again: what is left is the fleet's mark alone (reach.go).
func (e *testEnv) reachAgain(region int) {
	e.t.Helper()
	e.h.Probe(context.Background(), time.Hour)
	if e.h.Unreachable(region) {
		e.t.Fatalf("region %d still unreachable from here after its routers mended and a probe", region)
	}
}

// The fleet's marks, with this entry's own reach restored by a probe after each failure (the
// reach is reach_test.go's).
func TestMarks(t *testing.T) {
	// failRead makes eu (acme's home) fail a read: both routers refuse, us relays, and the
	// relay's 502 names the home.
	failRead := func(e *testEnv) {
		e.t.Helper()
		e.fault("eu", 0, "refuse")
		e.fault("eu", 1, "refuse")
		if r := e.do("GET", "/t/acme/items/1", nil, ""); !e.homes.Marked(0, homes.Strict) {
			e.t.Fatalf("eu not marked after every router failed a read (got %d)", r.status)
		}
		e.fault("eu", 0, "ok")
		e.fault("eu", 1, "ok")
		e.reachAgain(0)
	}
	// failWrite makes eu fail a plain write after it may have run: may_have_run.
	failWrite := func(e *testEnv) {
		e.t.Helper()
		e.fault("eu", 0, "reset_after_request")
		if r := e.do("POST", "/t/acme/items", nil, "x"); errCode(e.t, r) != codeMayHaveRun || !e.homes.Marked(0, homes.Strict) {
			e.t.Fatalf("got %d %s, marked=%v; want may_have_run and eu marked", r.status, r.body, e.homes.Marked(0, homes.Strict))
		}
		e.fault("eu", 0, "ok")
		e.reachAgain(0)
	}
	read := func(e *testEnv) { e.do("GET", "/t/acme/items/1", nil, "") }
	plainWrite := func(e *testEnv) { e.do("POST", "/t/acme/items", nil, "x") }
	keyedWrite := func(e *testEnv) {
		e.do("POST", "/t/acme/items", map[string]string{"Idempotency-Key": fmt.Sprint("k-", e.clock.Now().UnixNano())}, "x")
	}
	tests := map[string]struct {
		fail   func(*testEnv)
		after  time.Duration // since the failure
		next   func(*testEnv)
		asksEU bool // the next request asks eu first (else us relays it)
	}{
		"read failure: reads ask it last":                         {failRead, 0, read, false},
		"read failure: keyed writes ask it last":                  {failRead, 0, keyedWrite, false},
		"read failure: plain writes ask it last":                  {failRead, 0, plainWrite, false},
		"read failure: reads ask it first after the backoff":      {failRead, 11 * time.Second, read, true},
		"read failure: keyed writes first after the backoff":      {failRead, 11 * time.Second, keyedWrite, true},
		"read failure: plain writes still last after the backoff": {failRead, 11 * time.Second, plainWrite, false},
		"write failure: reads ask it last within the backoff":     {failWrite, 5 * time.Second, read, false},
		"write failure: reads ask it first after the backoff":     {failWrite, 11 * time.Second, read, true},
		"write failure: plain writes last after a minute":         {failWrite, time.Minute, plainWrite, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.learn("acme") // home eu
			tt.fail(e)
			e.clock.Advance(tt.after)
			euBefore, usBefore := e.direct("eu"), e.direct("us")
			tt.next(e)
			askedEU := e.direct("eu") > euBefore && e.direct("us") == usBefore
			if askedEU != tt.asksEU {
				t.Errorf("asked eu first = %v, want %v (direct eu +%d, us +%d)", askedEU, tt.asksEU,
					e.direct("eu")-euBefore, e.direct("us")-usBefore)
			}
			// Either way a router of eu answered (directly or relayed): the mark is gone.
			if e.homes.Marked(0, homes.Strict) {
				t.Error("eu still marked after one of its routers answered")
			}
		})
	}
	t.Run("a relayed answer clears, and each state change is one info line", func(t *testing.T) {
		e := newEnv(t)
		e.learn("acme")
		failWrite(e)
		e.clock.Advance(time.Minute)
		// eu is asked last now: us relays the write home, and the answer of an eu router,
		// naming eu, clears the mark.
		usBefore := e.direct("us")
		plainWrite(e)
		if e.direct("us") != usBefore+1 {
			t.Error("failing eu was not asked last by a plain write")
		}
		if e.homes.Marked(0, homes.Strict) {
			t.Error("mark not cleared by a relayed answer from a router of the region")
		}
		logs := e.logs.String()
		for _, want := range []string{`"level":"info","region":"eu","request_id"`, `"level":"info","region":"eu","message":"region cleared`} {
			if strings.Count(logs, want) != 1 {
				t.Errorf("want one log line with %s:\n%s", want, logs)
			}
		}
	})
	t.Run("a failing healthy home still serves when it is the only way", func(t *testing.T) {
		e := newEnv(t)
		e.learn("globex") // home us
		e.homes.Mark(1)
		e.fault("eu", 0, "refuse")
		e.fault("eu", 1, "refuse")
		r := e.do("POST", "/t/globex/items", nil, "x")
		if r.status != 201 {
			t.Fatalf("got %d %s: a mark removed a healthy region", r.status, r.body)
		}
	})
}

// deadlineConn counts the deadlines set on it.
type deadlineConn struct {
	net.Conn
	sets []time.Time
}

func (d *deadlineConn) SetDeadline(t time.Time) error { d.sets = append(d.sets, t); return nil }
func (d *deadlineConn) Read([]byte) (int, error)      { return 0, io.EOF }

// The answer head's deadline is at least --answer-timeout after each send and at most 1/16
// of it more; one set for an earlier request is kept while it is in that window, so a busy
// connection sets one about every timeout/16 (1 s), not one a request.
func TestAnswerDeadlineKeptWhileInItsWindow(t *testing.T) {
	const timeout = 16 * time.Second
	dc := &deadlineConn{}
	c := &conn{nc: dc}
	t0 := time.Unix(1000, 0)
	for i := range 200 { // a request each 10 ms for 2 s
		sent := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		c.answerDeadline(sent, timeout)
		if c.deadline.Before(sent.Add(timeout)) || c.deadline.After(sent.Add(timeout+timeout/16)) {
			t.Fatalf("request %d: deadline %v after the send, want within [%v, %v]", i, c.deadline.Sub(sent), timeout, timeout+timeout/16)
		}
		c.inBody = true // its answer came
	}
	if n := len(dc.sets); n < 2 || n > 3 {
		t.Errorf("200 requests over 2 s set %d deadlines, want 2 or 3 (one a second)", n)
	}
	// The body read from the socket lifts it.
	c.Read(make([]byte, 1))
	if last := dc.sets[len(dc.sets)-1]; !last.IsZero() || !c.deadline.IsZero() {
		t.Errorf("a body read left the deadline %v", last)
	}
}

// A pooled connection whose last answer's deadline has passed is still seen alive: the
// deadline is kept between requests, and the check must look at the socket, not meet it.
func TestAliveWithAPastDeadline(t *testing.T) {
	nc, peer := testutil.TCPPair(t)
	c := newConn(nc, nil)
	c.deadline = time.Now().Add(-time.Second)
	nc.SetDeadline(c.deadline)
	if !c.alive() {
		t.Error("an open, idle connection with a past deadline was seen dead")
	}
	peer.Close()
	time.Sleep(50 * time.Millisecond)
	if c.alive() {
		t.Error("a connection the router closed was seen alive")
	}
}
