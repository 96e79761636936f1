// Package simcluster runs a cluster of fenec-entry gossip entries in one process, for tests
// and for the convergence benchmark (bench/gossipsim).
//
// Each Entry is what node wires for a real entry (node/cluster.go): a homes.Table and a
// gossip.Gossip on a memnet transport (no serf RPC listener). Everything entries say to each
// other, the joiner's table and repair included, travels on memnet as it travels on
// memberlist's port in production (gossip/internal/mux), so partitions and kills cut it all.
//
// A Cluster owns every goroutine it starts (repair loops) and Close waits for
// them; serf and memberlist stop theirs on Gossip.Close. simcluster knows nothing of the
// request path: it drives the table directly (Learn) and reads it back (Has, WaitHomes).
package simcluster
