// Package keyring owns the gossip keys (Keys): memberlist's keyring, which serf's key manager
// rotates, seen as the primary key to seal and prove with and every installed key to open and
// check with.
//
// It must not know what the keys seal or prove (direct packets, table streams, memberlist's
// own traffic) nor how a rotation is run: it only reads the ring that memberlist and serf
// hold.
package keyring
