package homes

import (
	"testing"
)

// TestHotPathAllocs pins that the calls the request path makes on every request allocate
// nothing when they change nothing.
func TestHotPathAllocs(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	tbl.Learn("acme", us)
	tbl.Mark(ap)
	tenant := string([]byte("acme")) // not the stored string
	tests := map[string]func(){
		"Lookup hit":              func() { tbl.Lookup(tenant) },
		"Lookup miss":             func() { tbl.Lookup("globex") },
		"Get hit":                 func() { tbl.Get(tenant) },
		"Learn same region":       func() { tbl.Learn(tenant, us) },
		"LearnName same region":   func() { tbl.LearnName(tenant, "us") },
		"Marked not failing":      func() { tbl.Marked(eu, Lenient) },
		"Marked failing, lenient": func() { tbl.Marked(ap, Lenient) },
		"Marked failing, strict":  func() { tbl.Marked(ap, Strict) },
		"MarkedSet":               func() { tbl.MarkedSet(Lenient) },
		"Clear not failing":       func() { tbl.Clear(eu) },
		"Mark failing again":      func() { tbl.Mark(ap) },
		"Stats":                   func() { tbl.Stats() },
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			if n := testing.AllocsPerRun(100, fn); n != 0 {
				t.Errorf("%v allocations per call, want 0", n)
			}
		})
	}
	if c := drain(tbl); len(c) != 2 {
		t.Errorf("%d changes on the feed, want the 2 of the setup", len(c))
	}
}
