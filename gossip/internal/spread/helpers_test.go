package spread

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/gossip/internal/gossiptest"
	"github.com/fenec/fenec-entry/gossip/internal/wire"
	"github.com/fenec/fenec-entry/homes"
)

// testRegions are the regions of the tests' tables, the ones gossiptest.Homes picks from.
var testRegions = gossiptest.Regions

var clusterKey = gossiptest.ClusterKey

// keysOf is Keys holding k alone (nil: insecure).
var keysOf = gossiptest.Keys

// testConfig is the Config of entry "a" on table, in clear, with every setting at its
// default (as gossip.Config's defaults hand them): no membership, nothing sent.
func testConfig(table *homes.Table) Config {
	return Config{
		NodeName: "a", Table: table, Now: time.Now, Logger: zerolog.Nop(),
		FlushInterval: DefaultFlushInterval, MaxFlushInterval: DefaultMaxFlushInterval,
		EventSizeLimit: wire.DefaultEventSizeLimit, MaxPending: DefaultMaxPending,
		MaxEventsPerFlush: DefaultMaxEventsPerFlush, QueueHigh: DefaultQueueHigh, QueueLow: DefaultQueueLow,
		RecvQueue: DefaultRecvQueue, DirectCopies: DefaultDirectCopies,
		DirectCopyInterval: DefaultDirectCopyInterval, DirectBudget: DefaultDirectBudget,
		RelayFlush: DefaultRelayFlush, RelayAckTimeout: DefaultRelayAckTimeout,
	}
}
