// Package door reads what a client sends over HTTP/1 strictly, before any server parses it,
// and refuses at the edge what two servers could read two ways (docs/REFERENCE.md, "At the
// door"; RFC 9112 sections 2-7; what nginx refuses by default).
//
// It owns the rules and the one reader that applies them: Reader sits between a connection
// and the server that parses it (h1's, and net/http's through Conn and Listen), holds each
// request head until it is whole and checked, checks each body's framing as it passes, and
// turns a refusal into a stand-in request that the handler answers (Refusal, BodyReason).
// Rule applies what can still be judged to an HTTP/2 request.
//
// It knows nothing of routers, tenants, gossip or metrics: the handler counts and answers.
package door
