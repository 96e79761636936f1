package homes

import (
	"fmt"
	"testing"
	"testing/synctest"
)

// TestFeedFullDrops runs in a synctest bubble: if a send blocked on the full feed, every
// goroutine in the bubble would be blocked and synctest fails the test at once.
func TestFeedFullDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tbl, _ := newTestTable(t, func(c *Config) { c.FeedSize = 2 })
		for i := range 5 {
			if !tbl.Learn(fmt.Sprint("t", i), eu) {
				t.Fatalf("Learn of t%d returned false", i)
			}
		}
		tbl.Mark(us) // marks take the same road
		tbl.Clear(us)
		if got := tbl.Stats().FeedDropped; got != 5 {
			t.Errorf("FeedDropped %d, want 5 (3 homes, a mark, a clear)", got)
		}
		feed := drain(tbl)
		if len(feed) != 2 || feed[0].Home.Tenant != "t0" || feed[1].Home.Tenant != "t1" {
			t.Fatalf("feed %+v, want the first two homes", feed)
		}
		// Room again: the next change is sent, and nothing more is dropped.
		tbl.Learn("t9", us)
		if feed := drain(tbl); len(feed) != 1 || feed[0].Home.Tenant != "t9" {
			t.Errorf("feed %+v, want t9", feed)
		}
		if got := tbl.Stats().FeedDropped; got != 5 {
			t.Errorf("FeedDropped %d, want still 5", got)
		}
		for i := range 5 { // every home was stored, whatever the feed did
			if _, ok := tbl.Lookup(fmt.Sprint("t", i)); !ok {
				t.Errorf("t%d not held", i)
			}
		}
	})
}

func TestChangesIsOneChannel(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	if a, b := tbl.Changes(), tbl.Changes(); a != b {
		t.Error("Changes returns a different channel on each call")
	}
}

func TestKindStrings(t *testing.T) {
	tests := map[string]fmt.Stringer{
		"local": SourceLocal, "gossip": SourceGossip, "Source(0)": Source(0),
		"lenient": Lenient, "strict": Strict, "Planned(9)": Planned(9),
		"home": ChangeHome, "mark": ChangeMark, "ChangeKind(0)": ChangeKind(0),
	}
	for want, v := range tests {
		if got := v.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", v, got, want)
		}
	}
}
