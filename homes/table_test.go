package homes

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestLookupLearnGet(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	if r, ok := tbl.Lookup("acme"); ok || r != -1 {
		t.Fatalf("Lookup in an empty table = %d, %v; want -1, false", r, ok)
	}
	if !tbl.Learn("acme", us) {
		t.Fatal("Learn of a new tenant returned false")
	}
	if r, ok := tbl.Lookup("acme"); !ok || r != us {
		t.Errorf("Lookup = %d, %v; want %d, true", r, ok, us)
	}
	h, src, ok := tbl.Get("acme")
	if !ok || h.Tenant != "acme" || h.Region != "us" || src != SourceLocal {
		t.Errorf("Get = %+v, %v, %v; want acme at us, local", h, src, ok)
	}
	if h.Version.Origin != "e1" || !h.Version.Time().Equal(t0) {
		t.Errorf("version %v, want made here (e1) at the clock's time %v", h.Version, t0)
	}
	if _, src, ok := tbl.Get("globex"); ok || src != 0 {
		t.Errorf("Get of an unknown tenant = %v, %v", src, ok)
	}
	if tbl.Len() != 1 {
		t.Errorf("Len %d, want 1", tbl.Len())
	}
}

func TestLearnFeed(t *testing.T) {
	tests := map[string]struct {
		steps     func(*Table) bool // returns what the last Learn returned
		want      bool
		wantFeed  []string // region of each ChangeHome
		wantUnkn  uint64
		wantAtReg int // region held for acme at the end, -1: none
	}{
		"new tenant": {
			steps: func(t *Table) bool { return t.Learn("acme", eu) },
			want:  true, wantFeed: []string{"eu"}, wantAtReg: eu,
		},
		"same region again": {
			steps: func(t *Table) bool { t.Learn("acme", eu); return t.Learn("acme", eu) },
			want:  false, wantFeed: []string{"eu"}, wantAtReg: eu,
		},
		"moved": {
			steps: func(t *Table) bool { t.Learn("acme", eu); return t.Learn("acme", ap) },
			want:  true, wantFeed: []string{"eu", "ap"}, wantAtReg: ap,
		},
		"region out of range": {
			steps: func(t *Table) bool { return t.Learn("acme", 3) },
			want:  false, wantUnkn: 1, wantAtReg: -1,
		},
		"negative region": {
			steps: func(t *Table) bool { return t.Learn("acme", -1) },
			want:  false, wantUnkn: 1, wantAtReg: -1,
		},
		"by name": {
			steps: func(t *Table) bool { return t.LearnName("acme", "us") },
			want:  true, wantFeed: []string{"us"}, wantAtReg: us,
		},
		"unknown name": {
			steps: func(t *Table) bool { return t.LearnName("acme", "mars") },
			want:  false, wantUnkn: 1, wantAtReg: -1,
		},
		"same region as gossiped": {
			steps: func(t *Table) bool {
				t.Apply(Home{"acme", "us", ver(0, "e2")})
				return t.Learn("acme", us)
			},
			want: false, wantAtReg: us,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tbl, _ := newTestTable(t, nil)
			if got := tt.steps(tbl); got != tt.want {
				t.Errorf("Learn returned %v, want %v", got, tt.want)
			}
			var feed []string
			var last Version
			for _, c := range drain(tbl) {
				if c.Kind != ChangeHome || c.Home.Tenant != "acme" || c.Home.Version.Origin != "e1" {
					t.Errorf("change %+v, want a home of acme made by e1", c)
				}
				if !last.Less(c.Home.Version) {
					t.Errorf("change versions not increasing: %v then %v", last, c.Home.Version)
				}
				last = c.Home.Version
				feed = append(feed, c.Home.Region)
			}
			if !reflect.DeepEqual(feed, tt.wantFeed) {
				t.Errorf("feed %q, want %q", feed, tt.wantFeed)
			}
			if got := tbl.Stats().UnknownRegion; got != tt.wantUnkn {
				t.Errorf("UnknownRegion %d, want %d", got, tt.wantUnkn)
			}
			if r, _ := tbl.Lookup("acme"); r != tt.wantAtReg {
				t.Errorf("acme at region %d, want %d", r, tt.wantAtReg)
			}
		})
	}
}

func TestApplyOrdering(t *testing.T) {
	type want struct {
		applied bool
		region  string
		version Version
		src     Source
	}
	tests := map[string]struct {
		first Home // applied before, if Tenant is set
		in    Home
		want  want
	}{
		"absent tenant": {
			in:   Home{"acme", "us", ver(100, "b")},
			want: want{true, "us", ver(100, "b"), SourceGossip},
		},
		"newer clock": {
			first: Home{"acme", "eu", ver(100, "b")}, in: Home{"acme", "us", ver(101, "a")},
			want: want{true, "us", ver(101, "a"), SourceGossip},
		},
		"older clock": {
			first: Home{"acme", "eu", ver(100, "b")}, in: Home{"acme", "us", ver(99, "z")},
			want: want{false, "eu", ver(100, "b"), SourceGossip},
		},
		"same clock, greater origin": {
			first: Home{"acme", "eu", ver(100, "b")}, in: Home{"acme", "us", ver(100, "c")},
			want: want{true, "us", ver(100, "c"), SourceGossip},
		},
		"same clock, smaller origin": {
			first: Home{"acme", "eu", ver(100, "b")}, in: Home{"acme", "us", ver(100, "a")},
			want: want{false, "eu", ver(100, "b"), SourceGossip},
		},
		"duplicate": {
			first: Home{"acme", "eu", ver(100, "b")}, in: Home{"acme", "eu", ver(100, "b")},
			want: want{false, "eu", ver(100, "b"), SourceGossip},
		},
		"same version, greater region name": {
			first: Home{"acme", "eu", ver(100, "b")}, in: Home{"acme", "us", ver(100, "b")},
			want: want{true, "us", ver(100, "b"), SourceGossip},
		},
		"same version, smaller region name": {
			first: Home{"acme", "us", ver(100, "b")}, in: Home{"acme", "eu", ver(100, "b")},
			want: want{false, "us", ver(100, "b"), SourceGossip},
		},
		"newer, same region": {
			first: Home{"acme", "eu", ver(100, "b")}, in: Home{"acme", "eu", ver(200, "b")},
			want: want{true, "eu", ver(200, "b"), SourceGossip},
		},
		"unknown region": {
			first: Home{"acme", "eu", ver(100, "b")}, in: Home{"acme", "mars", ver(200, "b")},
			want: want{false, "eu", ver(100, "b"), SourceGossip},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tbl, _ := newTestTable(t, nil)
			if tt.first.Tenant != "" && !tbl.Apply(tt.first) {
				t.Fatalf("Apply(%+v) to an empty table returned false", tt.first)
			}
			if got := tbl.Apply(tt.in); got != tt.want.applied {
				t.Errorf("Apply(%+v) = %v, want %v", tt.in, got, tt.want.applied)
			}
			h, src, _ := tbl.Get("acme")
			if h.Region != tt.want.region || h.Version != tt.want.version || src != tt.want.src {
				t.Errorf("held %s %v %v, want %s %v %v", h.Region, h.Version, src, tt.want.region, tt.want.version, tt.want.src)
			}
			if c := drain(tbl); len(c) != 0 {
				t.Errorf("Apply sent %d changes on the feed, want none", len(c))
			}
			if tbl.Len() != 1 {
				t.Errorf("Len %d, want 1", tbl.Len())
			}
		})
	}
}

func TestApplyUnknownRegionCounted(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	if tbl.Apply(Home{"acme", "mars", ver(1, "e2")}) {
		t.Error("Apply of an unknown region returned true")
	}
	if st := tbl.Stats(); st.UnknownRegion != 1 || st.Homes != 0 {
		t.Errorf("stats %+v, want 1 unknown region and no home", st)
	}
}

// TestApplyConverges delivers the same set of homes in many orders, with duplicates, and
// checks every table ends the same: the newest observation of each tenant.
func TestApplyConverges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tenants := []string{"acme", "globex", "initech", "umbrella"}
	origins := []string{"e1", "e2", "e3"}
	var set []Home
	for range 60 {
		set = append(set, Home{
			Tenant:  tenants[rng.IntN(len(tenants))],
			Region:  testRegions[rng.IntN(len(testRegions))],
			Version: ver(int64(rng.IntN(8)), origins[rng.IntN(len(origins))]), // many ties
		})
	}
	// The same version twice with different regions: only the region name can decide.
	set = append(set, Home{"acme", "eu", ver(50, "e2")}, Home{"acme", "ap", ver(50, "e2")})

	want := map[string]held{}
	for _, h := range set {
		w, ok := want[h.Tenant]
		if !ok || newer(h.Version, h.Region, w.Version, w.Region) {
			want[h.Tenant] = held{h, SourceGossip}
		}
	}
	if want["acme"].Region != "eu" {
		t.Fatalf("test set broken: acme's newest is %+v", want["acme"])
	}
	for i := range 200 {
		tbl, _ := newTestTable(t, nil)
		order := append([]Home(nil), set...)
		order = append(order, set[:rng.IntN(len(set))]...) // duplicates
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, h := range order {
			tbl.Apply(h)
		}
		if got := snapshot(tbl); !reflect.DeepEqual(got, want) {
			t.Fatalf("order %d: table\n%v\nwant\n%v", i, got, want)
		}
	}
}

func TestLearnAfterApplyWins(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	future := ver(int64(time.Hour/time.Millisecond), "e9") // a peer whose clock is an hour ahead
	tbl.Apply(Home{"acme", "us", future})
	if !tbl.Learn("acme", eu) {
		t.Fatal("Learn of a new region over a gossiped home returned false")
	}
	h, src, _ := tbl.Get("acme")
	if h.Region != "eu" || src != SourceLocal {
		t.Errorf("held %s %v, want eu local", h.Region, src)
	}
	if !future.Less(h.Version) {
		t.Errorf("local version %v does not order after the gossiped %v it replaced", h.Version, future)
	}
	if tbl.Apply(Home{"acme", "us", future}) {
		t.Error("the older gossiped home replaced the newer local one")
	}
	if r, _ := tbl.Lookup("acme"); r != eu {
		t.Errorf("acme at %d, want eu", r)
	}
}

func TestOlderNeverReplacesNewer(t *testing.T) {
	tbl, clk := newTestTable(t, nil)
	tbl.Learn("acme", eu) // local, at t0
	clk.Advance(time.Second)
	tbl.Learn("acme", us) // moved, at t0+1s
	for _, old := range []Home{
		{"acme", "ap", ver(0, "e2")},   // the first learning's millisecond
		{"acme", "ap", ver(500, "zz")}, // between the two
		{"acme", "eu", ver(1000, "a")}, // the same clock, a smaller origin than e1
	} {
		if tbl.Apply(old) {
			t.Errorf("Apply(%+v) replaced a newer home", old)
		}
	}
	if h, src, _ := tbl.Get("acme"); h.Region != "us" || src != SourceLocal {
		t.Errorf("held %s %v, want us local", h.Region, src)
	}
	newer := Home{"acme", "ap", ver(1001, "a")}
	if !tbl.Apply(newer) {
		t.Errorf("Apply(%+v) did not replace an older home", newer)
	}
}

func TestFIFOEviction(t *testing.T) {
	tbl, _ := newTestTable(t, func(c *Config) { c.Capacity = 3 })
	tbl.Learn("a", eu)
	tbl.Learn("b", eu)
	tbl.Learn("c", eu)
	tbl.Learn("a", us)                       // update in place: a stays the oldest
	tbl.Apply(Home{"b", "ap", ver(9, "e2")}) // so does b
	tbl.Lookup("a")                          // and a lookup is not a use
	steps := []struct {
		add      func()
		gone     string
		wantHeld []string
	}{
		{func() { tbl.Learn("d", eu) }, "a", []string{"b", "c", "d"}},
		{func() { tbl.Learn("e", eu) }, "b", []string{"c", "d", "e"}},
		{func() { tbl.Apply(Home{"f", "us", ver(1, "e2")}) }, "c", []string{"d", "e", "f"}},
		{func() { tbl.Learn("a", eu) }, "d", []string{"e", "f", "a"}}, // forgotten, heard again: newest
	}
	for i, st := range steps {
		st.add()
		if _, ok := tbl.Lookup(st.gone); ok {
			t.Errorf("step %d: %s still held", i, st.gone)
		}
		var order []string
		tbl.Range(func(h Home, _ Source) bool { order = append(order, h.Tenant); return true })
		if !reflect.DeepEqual(order, st.wantHeld) {
			t.Errorf("step %d: held %q oldest first, want %q", i, order, st.wantHeld)
		}
		if got, want := tbl.Stats().Evicted, uint64(i+1); got != want {
			t.Errorf("step %d: Evicted %d, want %d", i, got, want)
		}
		if tbl.Len() != 3 {
			t.Errorf("step %d: Len %d, want 3", i, tbl.Len())
		}
	}
	checkInvariants(t, tbl)
}

func TestCapacityExact(t *testing.T) {
	const capacity, n = 100, 1000
	tbl, _ := newTestTable(t, func(c *Config) { c.Capacity = capacity })
	for i := range n {
		if i%2 == 0 {
			tbl.Learn(fmt.Sprint("t", i), i%3)
		} else {
			tbl.Apply(Home{fmt.Sprint("t", i), testRegions[i%3], ver(int64(i), "e2")})
		}
		if l := tbl.Len(); l > capacity {
			t.Fatalf("after %d insertions Len is %d, capacity %d", i+1, l, capacity)
		}
	}
	checkInvariants(t, tbl)
	st := tbl.Stats()
	if st.Homes != capacity || st.Evicted != n-capacity || st.Local+st.Gossip != capacity {
		t.Errorf("stats %+v, want %d homes, %d evicted", st, capacity, n-capacity)
	}
	i := n - capacity
	tbl.Range(func(h Home, _ Source) bool {
		if want := fmt.Sprint("t", i); h.Tenant != want {
			t.Errorf("Range gave %s, want %s (the newest %d, oldest first)", h.Tenant, want, capacity)
		}
		i++
		return true
	})
	if i != n {
		t.Errorf("Range visited %d homes, want %d", i-(n-capacity), capacity)
	}
}

func TestRange(t *testing.T) {
	t.Run("stops when fn returns false", func(t *testing.T) {
		tbl, _ := newTestTable(t, nil)
		for i := range 10 {
			tbl.Learn(fmt.Sprint("t", i), eu)
		}
		calls := 0
		tbl.Range(func(Home, Source) bool { calls++; return calls < 3 })
		if calls != 3 {
			t.Errorf("fn called %d times after returning false at 3", calls)
		}
	})
	t.Run("more than one step", func(t *testing.T) {
		tbl, _ := newTestTable(t, nil)
		const n = 3*rangeStep + 7
		for i := range n {
			tbl.Learn(fmt.Sprint("t", i), i%3)
		}
		seen := map[string]bool{}
		tbl.Range(func(h Home, src Source) bool {
			if seen[h.Tenant] {
				t.Errorf("%s visited twice", h.Tenant)
			}
			seen[h.Tenant] = true
			return true
		})
		if len(seen) != n {
			t.Errorf("visited %d homes, want %d", len(seen), n)
		}
	})
	t.Run("changes during the range", func(t *testing.T) {
		tbl, _ := newTestTable(t, func(c *Config) { c.Capacity = 4 })
		for _, k := range []string{"a", "b", "c", "d"} {
			tbl.Learn(k, eu)
		}
		var seen []string
		tbl.Range(func(h Home, src Source) bool {
			seen = append(seen, h.Tenant+"@"+h.Region)
			if h.Tenant == "a" {
				tbl.Learn("e", eu) // evicts a
				tbl.Learn("f", eu) // evicts b, not yet visited
				tbl.Learn("c", us) // moves c, not yet visited
			}
			return true
		})
		// b was forgotten before it was reached; e and f came after the range began.
		if want := []string{"a@eu", "c@us", "d@eu"}; !reflect.DeepEqual(seen, want) {
			t.Errorf("visited %q, want %q", seen, want)
		}
	})
}

// TestRangeEvictedPastStep forgets, during the first step of a Range, tenants the next step
// would have copied: their slots in the ring now hold tenants inserted after the Range began,
// which it must not visit.
func TestRangeEvictedPastStep(t *testing.T) {
	const capacity = rangeStep + 10
	tbl, _ := newTestTable(t, func(c *Config) { c.Capacity = capacity })
	for i := range capacity {
		tbl.Learn(fmt.Sprint("old", i), eu)
	}
	var seen []string
	tbl.Range(func(h Home, _ Source) bool {
		if len(seen) == 0 {
			for i := range rangeStep + 5 { // forgets old0 to old(rangeStep+4)
				tbl.Learn(fmt.Sprint("new", i), us)
			}
		}
		seen = append(seen, h.Tenant)
		return true
	})
	want := []string{"old0"}
	for i := rangeStep + 5; i < capacity; i++ {
		want = append(want, fmt.Sprint("old", i))
	}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("visited %q, want %q", seen, want)
	}
}

func TestStatsSources(t *testing.T) {
	tbl, _ := newTestTable(t, func(c *Config) { c.Capacity = 3 })
	check := func(step string, homes, local, gossip int) {
		t.Helper()
		st := tbl.Stats()
		if st.Homes != homes || st.Local != local || st.Gossip != gossip {
			t.Errorf("%s: homes %d local %d gossip %d, want %d %d %d", step, st.Homes, st.Local, st.Gossip, homes, local, gossip)
		}
		checkInvariants(t, tbl)
	}
	tbl.Learn("a", eu)
	tbl.Learn("b", eu)
	check("two learned", 2, 2, 0)
	tbl.Apply(Home{"a", "us", ver(int64(time.Hour/time.Millisecond), "e2")})
	check("one told newer", 2, 1, 1)
	tbl.Apply(Home{"c", "us", ver(1, "e2")})
	check("one more told", 3, 1, 2)
	tbl.Learn("a", eu)
	check("learned back", 3, 2, 1)
	tbl.Learn("d", eu) // evicts a (local)
	check("evicted a local", 3, 2, 1)
	tbl.Learn("e", eu) // evicts b (local)
	tbl.Learn("f", eu) // evicts c (gossip)
	check("evicted the rest", 3, 3, 0)
}

// TestKeyNotRetained pins that the table never keeps the caller's string, which on the request
// path points into a whole decoded request path.
func TestKeyNotRetained(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	path := []byte("acme/items/42")
	tenant := unsafe.String(&path[0], 4) // "acme", inside the caller's buffer
	inside := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		base := uintptr(unsafe.Pointer(&path[0]))
		return p >= base && p < base+uintptr(len(path))
	}
	tbl.Learn(tenant, eu)
	tbl.Learn(tenant, us) // an update in place must not store the caller's string as the key
	tbl.Apply(Home{tenant, "ap", ver(int64(time.Hour/time.Millisecond), "e2")})
	for seq := tbl.ring.head; seq < tbl.ring.tail; seq++ {
		if sl := tbl.ring.at(tbl.ring.index(seq)); sl.live && inside(sl.key) {
			t.Errorf("the table keeps the caller's string %q", sl.key)
		}
	}
	for _, c := range drain(tbl) {
		if inside(c.Home.Tenant) {
			t.Errorf("the feed carries the caller's string")
		}
	}
	copy(path, "xxxx")
	if r, ok := tbl.Lookup("acme"); !ok || r != ap {
		t.Errorf("acme = %d, %v after the caller reused its buffer", r, ok)
	}
	if strings.Contains(fmt.Sprint(snapshot(tbl)), "xxxx") {
		t.Error("the table's tenant changed with the caller's buffer")
	}
}
