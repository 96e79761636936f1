package homes

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/clock"
)

func TestNewRejectsBadConfig(t *testing.T) {
	many := make([]string, MaxRegions+1)
	for i := range many {
		many[i] = "r" + string(rune('A'+i))
	}
	tests := map[string]struct {
		edit func(*Config)
		want string // in the error: the field and what is wrong
	}{
		"no regions":        {func(c *Config) { c.Regions = nil }, "Regions: need 1 to 64 regions, got 0"},
		"too many regions":  {func(c *Config) { c.Regions = many }, "Regions: need 1 to 64 regions, got 65"},
		"empty region":      {func(c *Config) { c.Regions = []string{"eu", ""} }, `Regions[1]: region name "": need 1 to 64 bytes`},
		"long region name":  {func(c *Config) { c.Regions = []string{strings.Repeat("r", 65)} }, `Regions[0]: region name "rrrr`},
		"duplicate region":  {func(c *Config) { c.Regions = []string{"eu", "us", "eu"} }, `Regions[2]: region "eu" already listed at Regions[0]`},
		"negative capacity": {func(c *Config) { c.Capacity = -1 }, "Capacity: -1 is negative"},
		"negative backoff":  {func(c *Config) { c.ReadBackoff = -time.Second }, "ReadBackoff: -1s is negative"},
		"no origin":         {func(c *Config) { c.Origin = "" }, "Origin: empty"},
		"negative feed":     {func(c *Config) { c.FeedSize = -2 }, "FeedSize: -2 is negative"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := Config{Regions: []string{"eu", "us"}, Origin: "e1"}
			tt.edit(&cfg)
			tbl, err := New(cfg)
			if err == nil {
				t.Fatalf("New accepted %+v", cfg)
			}
			if tbl != nil {
				t.Errorf("New returned a Table with error %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("error %q does not wrap ErrConfig", err)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	regions := []string{"eu", "us"}
	tbl, err := New(Config{Regions: regions, Origin: "e1"})
	if err != nil {
		t.Fatal(err)
	}
	if tbl.capacity != DefaultCapacity || tbl.ring.capacity != DefaultCapacity {
		t.Errorf("capacity %d, ring %d, want %d", tbl.capacity, tbl.ring.capacity, DefaultCapacity)
	}
	if time.Duration(tbl.backoff.Load()) != DefaultReadBackoff {
		t.Errorf("read backoff %v, want %v", time.Duration(tbl.backoff.Load()), DefaultReadBackoff)
	}
	if cap(tbl.feed) != DefaultFeedSize {
		t.Errorf("feed size %d, want %d", cap(tbl.feed), DefaultFeedSize)
	}
	if tbl.clock != clock.System {
		t.Errorf("clock %T, want the system clock", tbl.clock)
	}
	regions[0] = "changed"
	if name, _ := tbl.RegionName(0); name != "eu" {
		t.Errorf("the Table shares the caller's Regions slice: region 0 is %q", name)
	}
}

func TestRegionNames(t *testing.T) {
	tbl, _ := newTestTable(t, nil)
	if n := tbl.NumRegions(); n != 3 {
		t.Errorf("NumRegions %d, want 3", n)
	}
	for id, name := range testRegions {
		if got, ok := tbl.RegionID(name); !ok || got != id {
			t.Errorf("RegionID(%q) = %d, %v; want %d", name, got, ok, id)
		}
		if got, ok := tbl.RegionName(id); !ok || got != name {
			t.Errorf("RegionName(%d) = %q, %v; want %q", id, got, ok, name)
		}
	}
	if _, ok := tbl.RegionID("mars"); ok {
		t.Error("RegionID found an unconfigured region")
	}
	for _, id := range []int{-1, 3} {
		if _, ok := tbl.RegionName(id); ok {
			t.Errorf("RegionName(%d) found a region", id)
		}
	}
	if st := tbl.Stats(); st.UnknownRegion != 0 {
		t.Errorf("RegionID counted %d unknown regions; only learning counts", st.UnknownRegion)
	}
}
