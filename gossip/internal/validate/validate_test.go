package validate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/homes"
)

func TestValidator(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v := New([]string{"eu", "us"}, func() time.Time { return now })
	ver := homes.Version{HLC: uint64(now.UnixMilli()) << 16, Origin: "a"}
	future := homes.Version{HLC: uint64(now.Add(2*time.Minute).UnixMilli()) << 16, Origin: "a"}
	homeRows := []struct {
		name string
		h    homes.Home
		ok   bool
	}{
		{"good", homes.Home{Tenant: "acme", Region: "eu", Version: ver}, true},
		{"unknown region", homes.Home{Tenant: "acme", Region: "ap", Version: ver}, false},
		{"empty tenant", homes.Home{Region: "eu", Version: ver}, false},
		{"long tenant", homes.Home{Tenant: strings.Repeat("a", 256), Region: "eu", Version: ver}, false},
		{"slash", homes.Home{Tenant: "a/b", Region: "eu", Version: ver}, false},
		{"NUL", homes.Home{Tenant: "a\x00b", Region: "eu", Version: ver}, false},
		{"bad utf8", homes.Home{Tenant: "a\xffb", Region: "eu", Version: ver}, false},
		{"zero version", homes.Home{Tenant: "acme", Region: "eu"}, false},
		{"no origin", homes.Home{Tenant: "acme", Region: "eu", Version: homes.Version{HLC: ver.HLC}}, false},
		{"far future", homes.Home{Tenant: "acme", Region: "eu", Version: future}, false},
	}
	for _, row := range homeRows {
		err := v.Home(row.h)
		if (err == nil) != row.ok || (err != nil && !errors.Is(err, errInvalid)) {
			t.Errorf("Home %s: %v", row.name, err)
		}
	}
	markRows := []struct {
		name string
		m    homes.Mark
		ok   bool
	}{
		{"failure", homes.Mark{Region: "eu", Observer: "a", At: now, Version: ver}, true},
		{"clear", homes.Mark{Region: "us", Clear: true, Observer: "a", At: now, Version: ver}, true},
		{"unknown region", homes.Mark{Region: "ap", Observer: "a", At: now, Version: ver}, false},
		{"no observer", homes.Mark{Region: "eu", At: now, Version: ver}, false},
		{"no time", homes.Mark{Region: "eu", Observer: "a", Version: ver}, false},
		{"time an hour ahead", homes.Mark{Region: "eu", Observer: "a", At: now.Add(time.Hour), Version: ver}, false},
		{"far future version", homes.Mark{Region: "eu", Observer: "a", At: now, Version: future}, false},
		{"no version", homes.Mark{Region: "eu", Observer: "a", At: now}, false},
	}
	for _, row := range markRows {
		err := v.Mark(row.m)
		if (err == nil) != row.ok {
			t.Errorf("Mark %s: %v", row.name, err)
		}
	}
}

// A table validator follows the table's regions: a region a reload adds is taken, a removed
// one refused, for homes and marks alike.
func TestTableValidatorFollowsReload(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tbl, err := homes.New(homes.Config{Regions: []string{"eu", "us"}, Origin: "a"})
	if err != nil {
		t.Fatal(err)
	}
	v := NewTable(tbl, func() time.Time { return now })
	ver := homes.Version{HLC: uint64(now.UnixMilli()) << 16, Origin: "b"}
	home := func(r string) error { return v.Home(homes.Home{Tenant: "acme", Region: r, Version: ver}) }
	mark := func(r string) error {
		return v.Mark(homes.Mark{Region: r, Observer: "b", At: now, Version: ver})
	}
	if home("us") != nil || mark("us") != nil || home("ap") == nil || mark("ap") == nil {
		t.Fatal("before the reload: us must pass, ap must not")
	}
	if _, err := tbl.SetRegions([]string{"eu", "ap"}); err != nil {
		t.Fatal(err)
	}
	if home("us") == nil || mark("us") == nil {
		t.Error("a removed region still passes")
	}
	if err := home("ap"); err != nil {
		t.Errorf("an added region refused: %v", err)
	}
	if err := mark("ap"); err != nil {
		t.Errorf("an added region's mark refused: %v", err)
	}
}
