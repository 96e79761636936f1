// Package gossip shares what entries learn (tenant homes, region failure
// marks and their clears) with every other entry: homes in direct packets
// from the entry that learned them to every member, on memberlist's port and
// sealed with the gossip key (direct.go), marks and clears as hashicorp/serf
// user events on memberlist. It brings a joining entry the whole table over an
// authenticated HTTP snapshot from a live peer, with periodic anti-entropy
// repair for what gossip lost.
//
// It meets the request path only through package homes: it reads the
// table's change feed and applies what peers send with homes.Apply and
// homes.ApplyMark. It knows nothing of HTTP requests to routers.
package gossip
