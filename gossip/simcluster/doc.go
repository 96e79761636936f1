// Package simcluster runs a cluster of fenec-entry gossip entries in one process, for tests
// and for the convergence benchmark (bench/gossipsim).
//
// Each Entry is what node wires for a real entry (node/cluster.go): a homes.Table, a
// gossip.Gossip on a memnet transport (no serf RPC listener) and a gossip.Sync whose Handler
// is served on a real loopback HTTP listener. memnet gives entry i the fake address
// 127.1.x.y:7946; the entry's snapshot listener binds that same IP (every 127.0.0.0/8
// address is local on Linux) and its Sync client dials from it, so the snapshot and repair
// endpoints see each request come from the member's own address, as they require. The
// listener's port travels in the serf tag "snap", as node sets it.
//
// Partitions and kills apply to both networks: memnet drops the gossip packets and streams,
// and the Sync clients refuse to dial across a partition or to or from a killed entry (their
// HTTP is real TCP, which memnet does not carry). Keep-alives are off, so no connection
// outlives a partition.
//
// A Cluster owns every goroutine it starts (repair loops, HTTP servers) and Close waits for
// them; serf and memberlist stop theirs on Gossip.Close. simcluster knows nothing of the
// request path: it drives the table directly (Learn) and reads it back (Has, WaitHomes).
package simcluster
