// Package gossip shares what entries learn (tenant homes, region failures and their clears)
// with every other entry, all over one address, memberlist's (--gossip-bind): membership,
// marks and clears as hashicorp/serf user events; homes in direct packets from the entry that
// learned them to every member, on memberlist's UDP port; the whole table for a joining entry
// and periodic anti-entropy repair as authenticated HTTP exchanges on memberlist's TCP port.
// Everything sealed follows serf's keyring, so `serf keys` rotates it.
//
// This package is the face and the membership: one type, Gossip, with its Config (from
// DefaultConfig, where every setting's default is; the parts' own settings are its Spread
// and Sync, handed to them as they are), owns serf (started again if it shuts itself down),
// the joiner, the tags, serf's member snapshot, the bootstrap and the repair loop, and wires
// the parts below it. Each of them owns one thing, has one face, and knows of serf's
// membership only what it is handed; none imports gossip:
//
//   - internal/spread publishes the table's change feed and applies what peers send: direct
//     homes, relays and their acks, the send budget;
//   - internal/wire is the bytes of that: event payloads, direct packets, acks;
//   - internal/tablesync is the joiner's table and repair, and their proofs of the key;
//   - internal/mux sorts the direct packets and the table's streams out of memberlist's ports;
//   - internal/keyring, internal/validate and internal/stablehash are the keys, the checks of
//     what a peer sends, and the hash every entry computes alike.
//
// It meets the request path only through package homes: spread reads the table's change feed,
// and what peers send is applied with homes.Apply and homes.ApplyMark. It knows nothing of
// HTTP requests to routers, and nothing of what travels in a direct packet, a serf user event
// or a table stream beyond the first byte or the event name that routes it.
package gossip
