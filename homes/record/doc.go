// Package record is the one encoding of a home and a mark, and of the stream that carries a
// table of them. Everything that takes a home or a mark out of the process writes these
// records: a gossip event's body (package gossip's wire), the sealed stream of the joiner's
// table and of repair (gossip's tablesync), and the state file (package state), which is that
// same stream with a key of its own.
//
//	home  [tenant, region, hlc, origin]
//	mark  [region, clear, observer, at, hlc, origin]
//
// msgpack arrays; origin and observer are "" when they are the writer (the event's sender,
// the stream's or the file's node); at is unix milliseconds on the observer's clock, 0 when
// unknown. The records decode from the map form that earlier entries sent in events ({t, r,
// v, o} and {r, c, b, w, v, o}), and such entries decode these arrays, field by field, into
// their own records: one encoding that both sides of an upgrade read.
//
// It must not know who writes to whom, or where the bytes go: no serf, no HTTP, no files,
// no keys of its own (a stream's key is its caller's).
package record
