// Package certs owns the entry's certificates: the client listener's, served from a
// certificate and a key file and loaded again when they change (so a renewal needs no
// restart), its session ticket keys (tickets.go: rotated every TicketKeyPeriod and kept in the
// state directory, so that a restart resumes the clients' sessions), and the extra CAs trusted
// for routers reached over https. It knows nothing of node's flags or Config (its errors say
// which file; node names the flag), of proxy, or of HTTP beyond crypto/tls; of package state
// it uses only MoveAside, for a damaged key file.
package certs
