// Package proxy is the request path of one entry: it takes a client's request for
// /t/<tenant>/..., plans the order of regions and routers to ask (known home
// first, marked regions last), sends the request to one router at a time, and
// decides from the outcome of each attempt, by the table in docs/REFERENCE.md, "Which region, which
// router" (see decide in outcome.go), whether to answer, try the next router, try the
// next region, or refuse with 502 may_have_run because a write may have run.
//
// It owns header hygiene in both directions, request body buffering, the
// Fenec-Client address mark, CORS preflights, streaming answers to the client as
// they arrive, and the entry's own JSON errors.
//
// It knows the home table and the region marks only through package homes, and
// knows nothing of gossip. It talks HTTP/1.1 to routers over its own small
// keep-alive pool (client.go) rather than net/http.Transport, so that every
// retry is one this package decided on: the standard transport silently replays
// some requests on a reused connection, and it classifies failures only by
// error strings and types that hide whether the request was written.
package proxy
