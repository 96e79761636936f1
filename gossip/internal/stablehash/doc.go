// Package stablehash owns the one hash that entries must compute alike: FNV-1a 64 folded with
// murmur3's finaliser, the same in every process and every release. Repair's digest buckets
// and sums and the relays' groups, shards and rendezvous scores are made of it, so two entries
// of different releases agree on them.
//
// It must not know what it hashes: tenants, regions and node names are strings to it, and
// changing a single bit of it splits the fleet.
package stablehash
