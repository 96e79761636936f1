package homes

import (
	"testing"
)

// TestHotPathAllocs pins that the calls the request path makes on every request allocate
// nothing when they change nothing.
func TestHotPathAllocs(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	tbl.Learn("acme", us)
	tbl.Mark(ap, MarkRead)
	tbl.Mark(us, MarkWrite)
	tenant := string([]byte("acme")) // not the stored string
	tests := map[string]func(){
		"Lookup hit":              func() { tbl.Lookup(tenant) },
		"Lookup miss":             func() { tbl.Lookup("globex") },
		"Get hit":                 func() { tbl.Get(tenant) },
		"Learn same region":       func() { tbl.Learn(tenant, us) },
		"LearnName same region":   func() { tbl.LearnName(tenant, "us") },
		"Marked unmarked":         func() { tbl.Marked(eu) },
		"Marked read mark":        func() { tbl.Marked(ap) },
		"Marked write mark":       func() { tbl.Marked(us) },
		"Clear unmarked":          func() { tbl.Clear(eu) },
		"Mark write over write":   func() { tbl.Mark(us, MarkWrite) },
		"Mark read, same instant": func() { tbl.Mark(ap, MarkRead) },
		"Stats":                   func() { tbl.Stats() },
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			if n := testing.AllocsPerRun(100, fn); n != 0 {
				t.Errorf("%v allocations per call, want 0", n)
			}
		})
	}
	if c := drain(tbl); len(c) != 3 {
		t.Errorf("%d changes on the feed, want the 3 of the setup", len(c))
	}
}
