package standin

import (
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// Marks are checked against Config.Clock, which stamps the records too: a fake clock that does
// not move makes the rows 59 s and 120 s off exact.
func TestClientMarks(t *testing.T) {
	const token = "entry-secret"
	clk := testutil.NewClock(time.Unix(1_800_000_000, 0))
	c := startCluster(t, func(cfg *Config) { cfg.EntryToken = token; cfg.Clock = clk })
	client := newClient(t)
	now := clk.Now().Unix()
	tests := []struct {
		name   string
		header string // "" for none
		want   string
	}{
		{"named ipv4", testMark(token, "203.0.113.7", now), MarkNamed},
		{"named ipv6", testMark(token, "2001:db8::1", now), MarkNamed},
		{"named 59s ago", testMark(token, "203.0.113.7", now-59), MarkNamed},
		{"absent", "", MarkAbsent},
		{"other token", testMark("not-the-token", "203.0.113.7", now), MarkBad},
		{"bracketed ipv6", testMark(token, "[2001:db8::1]", now), MarkBad},
		{"not an address", testMark(token, "client", now), MarkBad},
		{"address changed", "198.51.100.1" + testMark(token, "203.0.113.7", now)[len("203.0.113.7"):], MarkBad},
		{"two fields", "203.0.113.7 123", MarkBad},
		{"empty", " ", MarkBad},
		{"stale", testMark(token, "203.0.113.7", now-120), MarkStale},
		{"from the future", testMark(token, "203.0.113.7", now+120), MarkStale},
	}
	var want MarkCounts
	for _, tt := range tests {
		h := map[string]string{}
		if tt.header != "" {
			h[hdrClient] = tt.header
		}
		// Through a relay: counted once, by the router the client reached.
		do(t, client, req{url: c.url("us", 0) + "/t/acme/echo", header: h})
		switch tt.want {
		case MarkNamed:
			want.Named++
		case MarkBad:
			want.BadMark++
		case MarkStale:
			want.Stale++
		case MarkAbsent:
			want.Absent++
		}
		if got := c.ClientMarks(); got != want {
			t.Errorf("%s: counts %+v, want %+v", tt.name, got, want)
			want = got
		}
	}
	testutil.Eventually(t, 5*time.Second, "the records", func() bool { return len(seenWhere(c, func(s Seen) bool { return s.End.IsZero() })) == 0 })
	var marks []string
	for _, s := range c.Seen() {
		if s.Region == "eu" && s.ClientMark != "" {
			t.Errorf("relayed request got a client mark %q at the home", s.ClientMark)
		}
		if s.Region == "us" {
			marks = append(marks, s.ClientMark)
		}
		if !s.Start.Equal(clk.Now()) || !s.End.Equal(clk.Now()) {
			t.Errorf("Seen from %v to %v, want the fake clock's %v", s.Start, s.End, clk.Now())
		}
	}
	for i, tt := range tests {
		if i < len(marks) && marks[i] != tt.want {
			t.Errorf("%s: Seen.ClientMark = %q, want %q", tt.name, marks[i], tt.want)
		}
	}
}

func TestClientMarksOffWithoutToken(t *testing.T) {
	c := startCluster(t, nil)
	do(t, newClient(t), req{url: c.url("eu", 0) + "/t/acme/echo"})
	if got := c.ClientMarks(); got != (MarkCounts{}) {
		t.Errorf("counts without a token: %+v", got)
	}
	if s := c.Seen(); len(s) != 1 || s[0].ClientMark != "" {
		t.Errorf("Seen = %+v, want no client mark", s)
	}
}
