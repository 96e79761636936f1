// Package chaos is the chaos suite of fenec-entry (docs/CHAOS.md): it builds
// fenec-entry, fenec-standin and the serf CLI, runs three entries in one encrypted gossip
// cluster in front of stand-in routers on loopback (one of them, b, serving HTTPS), breaks
// them (kill -9, SIGSTOP, a packet-filter partition, router faults, home moves, a gossip key
// rotation) while clients send reads, writes with and without Idempotency-Key and event
// streams, on kept-alive and new connections, plain and TLS, and checks invariants from the
// stand-in ledger and the clients' records.
//
// The tests carry the build tag chaos, so the default `go test ./...` does not run them:
//
//	make chaos        # scenarios 1-4, 6 and 7 (CI-sized)
//	make chaos-long   # everything at once, longer (CHAOS_LONG=1)
package chaos
