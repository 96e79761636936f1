package homes

import (
	"errors"
	"fmt"
	"time"

	"github.com/fenec/fenec-entry/internal/clock"
)

// Defaults and bounds of Config.
const (
	DefaultCapacity    = 50000            // homes kept when Config.Capacity is 0 (--homes)
	DefaultReadBackoff = 10 * time.Second // read mark lifetime when Config.ReadBackoff is 0 (--read-backoff)
	DefaultFeedSize    = 4096             // change feed buffer when Config.FeedSize is 0
	MaxRegions         = 64               // most regions a Table holds: the one region limit (marks are a 64-bit set)
	MaxRegionNameLen   = 64               // longest region name, in bytes
)

// Config configures a Table. Zero-valued optional fields take the defaults above.
type Config struct {
	// Regions are the configured regions in --routers order; a region's ID is its index.
	// Required: 1 to MaxRegions names, each non-empty and unique.
	Regions []string

	// Capacity is how many homes the table keeps (--homes); 0 means DefaultCapacity.
	// The first heard is forgotten first: FIFO by first insertion, not LRU, and an update in
	// place does not move a home. Each home takes about 57 bytes plus its name, the index
	// for Capacity homes taken at New and the slab as homes come (4 MB at the default with
	// 19-byte names; ring.go).
	Capacity int

	// ReadBackoff is how long a read mark lasts (--read-backoff); 0 means DefaultReadBackoff.
	// It also caps how far ahead of the local clock a peer's read mark may expire.
	ReadBackoff time.Duration

	// Origin is this entry's node name (--node), stamped on every Version it makes and used
	// as the Observer of its marks. Required: a peer orders equal clocks by it.
	Origin string

	// Clock is the time source of Versions and mark expiries; nil: the system clock. Only its
	// wall-clock reading is used: those times travel to peers and into the state file.
	Clock clock.Clock

	// FeedSize is the capacity of the change feed; 0 means DefaultFeedSize. A change that
	// finds the feed full is dropped and counted (Stats.FeedDropped).
	FeedSize int
}

// ErrConfig is wrapped by every error New and Config.Validate return.
var ErrConfig = errors.New("homes: bad config")

// Validate reports the first thing wrong with c, naming the field and what is wrong, wrapped
// around ErrConfig. It does not change c.
func (c Config) Validate() error {
	if n := len(c.Regions); n == 0 || n > MaxRegions {
		return fmt.Errorf("%w: Regions: need 1 to %d regions, got %d", ErrConfig, MaxRegions, n)
	}
	seen := make(map[string]int, len(c.Regions))
	for i, r := range c.Regions {
		if r == "" || len(r) > MaxRegionNameLen {
			return fmt.Errorf("%w: Regions[%d]: region name %q: need 1 to %d bytes", ErrConfig, i, r, MaxRegionNameLen)
		}
		if j, dup := seen[r]; dup {
			return fmt.Errorf("%w: Regions[%d]: region %q already listed at Regions[%d]", ErrConfig, i, r, j)
		}
		seen[r] = i
	}
	if c.Capacity < 0 {
		return fmt.Errorf("%w: Capacity: %d is negative (0 means %d)", ErrConfig, c.Capacity, DefaultCapacity)
	}
	if c.ReadBackoff < 0 {
		return fmt.Errorf("%w: ReadBackoff: %v is negative (0 means %v)", ErrConfig, c.ReadBackoff, DefaultReadBackoff)
	}
	if c.Origin == "" {
		return fmt.Errorf("%w: Origin: empty; set this entry's node name", ErrConfig)
	}
	if c.FeedSize < 0 {
		return fmt.Errorf("%w: FeedSize: %d is negative (0 means %d)", ErrConfig, c.FeedSize, DefaultFeedSize)
	}
	return nil
}

// withDefaults returns c with its zero-valued optional fields set.
func (c Config) withDefaults() Config {
	if c.Capacity == 0 {
		c.Capacity = DefaultCapacity
	}
	if c.ReadBackoff == 0 {
		c.ReadBackoff = DefaultReadBackoff
	}
	if c.Clock == nil {
		c.Clock = clock.System
	}
	if c.FeedSize == 0 {
		c.FeedSize = DefaultFeedSize
	}
	return c
}
