// Package tablesync owns the table's exchanges between two entries: the whole table for a
// joining entry (Sync.Bootstrap, Fetch), anti-entropy repair (Sync.Repair, Run: a digest of
// 256 buckets, then a pull of those that differ), the sealed stream that carries both
// (stream.go) and their proofs of the gossip key (auth.go). Sync, served by its Handler and
// calling peers through its Client, is its one face.
//
// It must not know serf or memberlist: who is a member, at which address, and which peers
// there are it is handed (Setup.MemberAddr, Peers), and how a request reaches a peer's
// gossip address is its Client's business. It spreads nothing: what a peer sends is
// validated and applied with Table.Apply and Table.ApplyMark, which keep what is newer.
package tablesync
