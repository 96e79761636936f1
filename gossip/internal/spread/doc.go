// Package spread owns the spreading of what entries learn: the publisher that turns the
// table's change feed into batches (every FlushInterval, widened under serf's backpressure,
// within a send budget), homes sent straight to every member DirectCopies times (direct.go),
// relays that carry them in groups of about sqrt(N) members in large fleets (relay.go) with
// acks and resends (acked.go), and the receiver that validates and applies what peers send.
// Spread is its one face: New and Run, and HandlePacket and HandleEvent for what the transport
// and serf deliver.
//
// It knows nothing of serf's membership beyond the member list it is handed (Setup.Peers and
// PeerAddr, and the relay Plan gossip makes of the alive members with NewPlan), and nothing of
// serf or the transport beyond the functions that hand serf an event and write a packet
// (Send, Depth, Write): it imports neither serf nor the packages beside it that sort the
// gossip address and sync the table. What its packets and events are made of is package
// wire's.
package spread
