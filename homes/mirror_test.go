package homes

import (
	"testing"
	"time"
)

type mirrored struct {
	Change
	Src Source
}

// newMirrored returns a table whose Mirror calls are recorded.
func newMirrored(t *testing.T) (*Table, *[]mirrored) {
	t.Helper()
	var got []mirrored
	tbl, _ := newTestTable(t, func(c *Config) {
		c.Mirror = func(ch Change, src Source) { got = append(got, mirrored{ch, src}) }
	})
	return tbl, &got
}

// Every change to what the table holds is mirrored with the source it is held as; what
// changes nothing is not.
func TestMirrorEveryChange(t *testing.T) {
	tbl, got := newMirrored(t)
	check := func(step string, want ...mirrored) {
		t.Helper()
		if len(*got) != len(want) {
			t.Fatalf("%s: mirrored %+v, want %+v", step, *got, want)
		}
		for i := range want {
			g, w := (*got)[i], want[i]
			if g.Kind != w.Kind || g.Src != w.Src || g.Home.Tenant != w.Home.Tenant || g.Home.Region != w.Home.Region ||
				g.Mark.Region != w.Mark.Region || g.Mark.Clear != w.Mark.Clear {
				t.Fatalf("%s: mirrored[%d] = %+v, want %+v", step, i, g, w)
			}
		}
		*got = nil
	}
	home := func(tenant, region string, src Source) mirrored {
		return mirrored{Change{Kind: ChangeHome, Home: Home{Tenant: tenant, Region: region}}, src}
	}
	mark := func(region string, clear bool) mirrored {
		return mirrored{Change{Kind: ChangeMark, Mark: Mark{Region: region, Clear: clear}}, 0}
	}

	tbl.Learn("a", eu)
	check("Learn", home("a", "eu", SourceLocal))
	tbl.Learn("a", eu)
	check("Learn again")
	tbl.Apply(Home{Tenant: "b", Region: "us", Version: ver(10, "e2")})
	check("Apply", home("b", "us", SourceGossip))
	tbl.Apply(Home{Tenant: "b", Region: "ap", Version: ver(5, "e2")})
	check("Apply older")
	tbl.Restore(Home{Tenant: "c", Region: "ap", Version: ver(1, "e1")}, SourceLocal)
	check("Restore", home("c", "ap", SourceLocal))
	tbl.Adopt(Home{Tenant: "b", Region: "ap", Version: ver(20, "e1")})
	check("Adopt", home("b", "ap", SourceLocal))
	tbl.Mark(us)
	check("Mark", mark("us", false))
	tbl.Mark(us)
	check("Mark within a second of the last sent")
	tbl.Clear(us)
	check("Clear", mark("us", true))
	tbl.Clear(us)
	check("Clear a region not failing")
	tbl.ApplyMark(Mark{Region: "ap", Observer: "e2", Version: ver(30, "e2"), At: t0})
	check("ApplyMark", mark("ap", false))
	tbl.ApplyMark(Mark{Region: "ap", Observer: "e2", Version: ver(30, "e2"), At: t0})
	check("ApplyMark again")
	tbl.AdoptMark(Mark{Region: "ap", Clear: true, Observer: "e1", Version: ver(40, "e1"), At: t0})
	check("AdoptMark", mark("ap", true))
}

// Adopt stores a worker's observation as this entry's own: SourceLocal, on the feed, with
// the Version the worker made, and only if newer than what is held.
func TestAdopt(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	v := ver(50, "e1")
	if !tbl.Adopt(Home{Tenant: "t1", Region: "us", Version: v}) {
		t.Fatal("Adopt of a new tenant: false")
	}
	h, src, ok := tbl.Get("t1")
	if !ok || h.Region != "us" || h.Version != v || src != SourceLocal {
		t.Fatalf("Get = %+v %v %v, want us at %v, local", h, src, ok, v)
	}
	feed := drain(tbl)
	if len(feed) != 1 || feed[0].Kind != ChangeHome || feed[0].Home.Version != v {
		t.Fatalf("feed = %+v, want the adopted home", feed)
	}
	if tbl.Adopt(Home{Tenant: "t1", Region: "eu", Version: ver(40, "e1")}) {
		t.Fatal("Adopt of an older observation changed the table")
	}
	if len(drain(tbl)) != 0 {
		t.Fatal("an Adopt that changed nothing was sent on the feed")
	}
	if tbl.Adopt(Home{Tenant: "t2", Region: "nowhere", Version: ver(60, "e1")}) || tbl.Stats().UnknownRegion != 1 {
		t.Fatalf("Adopt of an unknown region: stored, or not counted (%+v)", tbl.Stats())
	}
	// Homes learned here afterwards are newer than the adopted one.
	if !tbl.Learn("t1", eu) {
		t.Fatal("Learn after Adopt: false")
	}
	if h, _, _ := tbl.Get("t1"); !v.Less(h.Version) {
		t.Fatalf("Learn after Adopt made %v, not newer than %v", h.Version, v)
	}
}

// AdoptMark applies a worker's mark and sends it on the feed for the cluster; a repeat does
// neither.
func TestAdoptMark(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	m := Mark{Region: "us", Observer: "e1", At: t0, Version: ver(10, "e1")}
	if !tbl.AdoptMark(m) {
		t.Fatal("AdoptMark: false")
	}
	if !tbl.Marked(us, Strict) {
		t.Fatal("us not marked after AdoptMark")
	}
	if feed := drain(tbl); len(feed) != 1 || feed[0].Kind != ChangeMark || feed[0].Mark.Region != "us" {
		t.Fatalf("feed = %+v, want the mark", feed)
	}
	if tbl.AdoptMark(m) || len(drain(tbl)) != 0 {
		t.Fatal("a repeated AdoptMark changed the table or was sent")
	}
	clr := Mark{Region: "us", Clear: true, Observer: "e1", At: t0.Add(time.Second), Version: ver(20, "e1")}
	if !tbl.AdoptMark(clr) || tbl.Marked(us, Strict) {
		t.Fatal("AdoptMark of a newer clear did not clear us")
	}
}
