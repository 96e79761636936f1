// Package memnet is an in-process network for clusters of memberlist (and so
// serf) nodes in tests: one Network, one Transport per node, with per-link
// latency, packet loss, partitions and killed hosts.
//
// It exists because memberlist's own MockNetwork hands packets over
// unbuffered, so two nodes that ping each other deadlock, and after a node
// shuts down dials to it ignore their timeout and packet sends to it block
// (measured with serf's own). memnet behaves like UDP and TCP instead:
//
//   - Packets (WriteTo) never block the sender. Each node has a bounded inbox;
//     a packet is dropped and counted when it is lost, when it crosses a
//     partition, when its destination is killed or shut down, or when the
//     inbox is full. Delivery happens after the link's latency, scheduled by
//     one goroutine per node, whatever the number of packets in flight.
//   - Streams (DialTimeout) are reliable, in-memory net.Pipe pairs. A dial
//     across a partition, to a killed node or from one waits for its timeout
//     and fails with an error matching os.ErrDeadlineExceeded; a dial to a
//     shut-down node fails at once (after the link's latency) with
//     ErrRefused.
//
// Addresses are fake: node i gets 127.1.x.y:7946. They name transports inside
// one Network and are never dialled on a real network; they are taken from
// the loopback range so that a misconfigured test that did dial one would
// stay on its own machine.
//
// A Network is safe for concurrent use: transports may be created, and
// latency, loss, partitions and kills changed, while nodes run. Its random
// draws (latency, loss) come from one source seeded by New, so a run's
// sequence of draws is repeatable; which packet meets which draw still
// depends on goroutine scheduling.
//
// memnet knows nothing of serf or of fenec-entry's gossip: it only implements
// memberlist.NodeAwareTransport.
package memnet
