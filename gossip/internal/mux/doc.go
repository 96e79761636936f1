// Package mux owns the one gossip address's sorting (docs/REFERENCE.md, "Configuration"): a
// Transport under memberlist that takes out the packets beginning with the byte it is given (direct
// homes, relays, acks) and the streams beginning with SyncMagic (the table's HTTP
// exchanges), and hands memberlist everything else, unchanged; and the Listener the sync
// streams (and serf's RPC connections) are pushed to.
//
// It must not know what it sorts: a packet is bytes for its handler, a sync stream is a
// connection for its Listener. Nothing here opens, decodes or authenticates what they carry,
// or counts more of it than its bytes (Bytes); it knows memberlist's transport and nothing of
// serf, the table or the keys.
package mux
