package spread

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/gossip/internal/gossiptest"
	"github.com/fenec/fenec-entry/homes"
)

// testRegions are the regions of the tests' tables, the ones gossiptest.Homes picks from.
var testRegions = gossiptest.Regions

var clusterKey = gossiptest.ClusterKey

// keysOf is Keys holding k alone (nil: insecure).
var keysOf = gossiptest.Keys

// testSetup is the Setup of entry "a" on table, in clear, with every setting at its default
// (DefaultConfig): no membership, nothing sent.
func testSetup(table *homes.Table) Setup {
	return Setup{Config: DefaultConfig(), NodeName: "a", Table: table, Now: time.Now, Logger: zerolog.Nop()}
}
