package homes

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestSetRegionsAddKeepsIDs(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	tbl.Learn("acme", us)
	ch, err := tbl.SetRegions([]string{"sa", "eu", "us", "ap"}) // a new region, listed first
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ch.Added, []string{"sa"}) || ch.Removed != nil || ch.Forgotten != 0 {
		t.Fatalf("change %+v, want sa added only", ch)
	}
	for name, want := range map[string]int{"eu": eu, "us": us, "ap": ap, "sa": 3} {
		if id, ok := tbl.RegionID(name); !ok || id != want {
			t.Errorf("RegionID(%s) = %d, %v; want %d", name, id, ok, want)
		}
	}
	if reg, ok := tbl.Lookup("acme"); !ok || reg != us {
		t.Errorf("acme after adding a region: %d, %v; want us", reg, ok)
	}
	if !tbl.LearnName("zed", "sa") {
		t.Error("LearnName in the added region changed nothing")
	}
	if h, _, _ := tbl.Get("zed"); h.Region != "sa" {
		t.Errorf("zed's home %q, want sa", h.Region)
	}
}

func TestSetRegionsRemoveForgets(t *testing.T) {
	tbl, clk := newTestTable(t, nil)
	for i := range 10 {
		tbl.Learn(fmt.Sprintf("eu-%d", i), eu)
		tbl.Learn(fmt.Sprintf("us-%d", i), us)
	}
	tbl.Mark(us)
	drain(tbl)
	ch, err := tbl.SetRegions([]string{"eu", "ap"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ch.Removed, []string{"us"}) || ch.Forgotten != 10 {
		t.Fatalf("change %+v, want us removed with 10 homes", ch)
	}
	if st := tbl.Stats(); st.Homes != 10 || st.Local != 10 || st.RegionRemoved != 10 || st.Marked != 0 {
		t.Errorf("stats after removal %+v", st)
	}
	if _, ok := tbl.Lookup("us-3"); ok {
		t.Error("a home of the removed region is still held")
	}
	if _, ok := tbl.RegionID("us"); ok {
		t.Error("RegionID finds the removed region")
	}
	if _, ok := tbl.RegionName(us); ok {
		t.Error("RegionName names the removed region")
	}
	before := tbl.Stats().UnknownRegion
	if tbl.Learn("late", us) || tbl.LearnName("late", "us") || tbl.Mark(us) ||
		tbl.Apply(Home{Tenant: "late", Region: "us", Version: ver(5, "e2")}) ||
		tbl.ApplyMark(Mark{Region: "us", Observer: "e2", At: clk.Now(), Version: ver(5, "e2")}) {
		t.Error("the removed region still takes homes or marks")
	}
	if got := tbl.Stats().UnknownRegion - before; got != 4 {
		t.Errorf("unknown region counted %d times, want 4 (Learn, LearnName, Apply, ApplyMark)", got)
	}
	if tbl.MarkedSet(Strict) != 0 || len(tbl.Marks()) != 0 {
		t.Errorf("marks of the removed region remain: %b %v", tbl.MarkedSet(Strict), tbl.Marks())
	}
	var order []string
	tbl.Range(func(h Home, _ Source) bool { order = append(order, h.Tenant); return true })
	want := []string{}
	for i := range 10 {
		want = append(want, fmt.Sprintf("eu-%d", i))
	}
	if !slices.Equal(order, want) {
		t.Errorf("Range after removal %v, want %v (insertion order kept)", order, want)
	}

	// The same name added back takes its old ID, empty.
	ch, err = tbl.SetRegions([]string{"eu", "us", "ap"})
	if err != nil || !slices.Equal(ch.Added, []string{"us"}) {
		t.Fatalf("adding us back: %+v, %v", ch, err)
	}
	if id, _ := tbl.RegionID("us"); id != us {
		t.Errorf("us came back as ID %d, want %d", id, us)
	}
	if _, ok := tbl.Lookup("us-3"); ok {
		t.Error("a forgotten home came back with its region")
	}
}

func TestSetRegionsEvictionAfterRemoval(t *testing.T) {
	tbl, _ := newTestTable(t, func(c *Config) { c.Capacity = 4 })
	tbl.Learn("a", eu)
	tbl.Learn("b", us)
	tbl.Learn("c", eu)
	tbl.Learn("d", us)
	if _, err := tbl.SetRegions([]string{"eu", "ap"}); err != nil {
		t.Fatal(err)
	}
	// Room for two more before the oldest kept (a) goes; a re-learned b must not be evicted
	// by its forgotten first copy.
	tbl.Learn("b", eu)
	tbl.Learn("e", eu)
	if tbl.Len() != 4 {
		t.Fatalf("len %d, want 4", tbl.Len())
	}
	tbl.Learn("f", eu)
	for tenant, want := range map[string]bool{"a": false, "b": true, "c": true, "e": true, "f": true} {
		if _, ok := tbl.Lookup(tenant); ok != want {
			t.Errorf("%s held %v, want %v", tenant, ok, want)
		}
	}
}

func TestSetRegionsRefused(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	for _, names := range [][]string{nil, {"eu", "eu"}, {""}, {string(make([]byte, MaxRegionNameLen+1))}} {
		if _, err := tbl.SetRegions(names); !errors.Is(err, ErrConfig) {
			t.Errorf("SetRegions(%q) = %v, want ErrConfig", names, err)
		}
	}
	if got := tbl.Regions(); !slices.Equal(got, testRegions) {
		t.Errorf("regions after refusals %v, want %v unchanged", got, testRegions)
	}
	// IDs are never reused: 61 more names fill the 64, the next one is refused.
	names := slices.Clone(testRegions)
	for i := range MaxRegions - len(testRegions) {
		names = append(names, fmt.Sprintf("r%d", i))
	}
	if _, err := tbl.SetRegions(names); err != nil {
		t.Fatalf("64 regions: %v", err)
	}
	if _, err := tbl.SetRegions([]string{"eu", "new"}); !errors.Is(err, ErrConfig) {
		t.Errorf("a 65th name: %v, want ErrConfig", err)
	}
	if tbl.NumRegions() != MaxRegions {
		t.Errorf("NumRegions %d after a refused change, want %d", tbl.NumRegions(), MaxRegions)
	}
	if _, err := tbl.SetRegions([]string{"eu", "r60"}); err != nil {
		t.Errorf("names already held need no new ID: %v", err)
	}
}

func TestSetReadBackoff(t *testing.T) {
	tbl, clk := newTestTable(t, nil)
	tbl.Mark(eu)
	clk.Advance(5 * time.Second)
	if !tbl.Marked(eu, Lenient) {
		t.Fatal("not marked 5 s after with the default 10 s backoff")
	}
	tbl.SetReadBackoff(2 * time.Second)
	if tbl.Marked(eu, Lenient) || tbl.MarkedSet(Lenient) != 0 {
		t.Error("still marked for reads after the backoff was shortened to 2 s")
	}
	if !tbl.Marked(eu, Strict) {
		t.Error("a plain write stopped avoiding the region")
	}
}

// Under -race: learning, looking up, ranging and marking while regions come and go.
func TestSetRegionsConcurrent(t *testing.T) {
	tbl, _ := newTestTable(t, func(c *Config) { c.Capacity = 500 })
	done := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(done)
		for i := range 200 {
			names := []string{"eu", "us", "ap"}
			if i%2 == 0 {
				names = []string{"eu", "ap"}
			}
			if _, err := tbl.SetRegions(names); err != nil {
				errs <- err
				return
			}
		}
	}()
	for i := 0; ; i++ {
		select {
		case <-done:
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			if n, held := tbl.Len(), countRange(tbl); n != held {
				t.Fatalf("Len %d, Range visits %d", n, held)
			}
			return
		default:
		}
		tenant := fmt.Sprintf("t%d", i%700)
		tbl.Learn(tenant, i%3)
		tbl.Lookup(tenant)
		tbl.MarkedSet(Lenient)
		if i%50 == 0 {
			tbl.Mark(i % 3)
			tbl.Marks()
			countRange(tbl)
		}
	}
}

func countRange(tbl *Table) int {
	n := 0
	tbl.Range(func(Home, Source) bool { n++; return true })
	return n
}

func TestCheckRegionsChangesNothing(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	tbl.Learn("acme", us)
	if err := tbl.CheckRegions([]string{"eu", "sa"}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.CheckRegions([]string{"eu", "eu"}); !errors.Is(err, ErrConfig) {
		t.Errorf("a repeated name: %v", err)
	}
	if got := tbl.Regions(); !slices.Equal(got, testRegions) {
		t.Errorf("regions %v after checks, want %v", got, testRegions)
	}
	if _, ok := tbl.Lookup("acme"); !ok {
		t.Error("a check forgot a home")
	}
}
