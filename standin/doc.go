// Package standin runs stand-in Fenec routers: enough of a router to develop, test, benchmark
// and demo the entry against, with faults on demand. It shows what a real Fenec router must do
// for the entry (Fenec-Shard on every answer, Fenec-Home when asked, the relay to the home
// region with Fenec-Router, the Fenec-Client check, a write applied once): see
// cmd/fenec-standin/README.md.
//
// One [Cluster] runs every router of every region in one process, each on its own listener,
// sharing one tenant directory, one ledger of applied writes and one record of the requests
// seen. A router answers for the tenants homed in its region and relays every other tenant's
// request to a router of the home region, so a write is applied once, in the home region only,
// whatever router the entry picked.
//
// What a test or the chaos suite can check:
//   - [Cluster.Ledger]: every write applied, in order (unbounded: one entry per write);
//   - [Cluster.Seen]: the last [SeenCapacity] requests received by any router, with their
//     headers, the client mark, the fault in force, the status answered and whether the client
//     went away;
//   - [Cluster.ClientMarks]: how many requests from outside carried a valid, forged, stale or
//     no Fenec-Client mark.
//
// The same operations are served over HTTP under /_standin/ on every router (see admin.go), for
// tests that run the stand-in as a separate process (cmd/fenec-standin, whose README has a curl
// line for each).
//
// The package must not import the entry's packages (proxy, homes, node, gossip): it is what
// the entry is tested against, so it implements the contract on its own. Every exported method
// is safe for concurrent use.
package standin
