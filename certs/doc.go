// Package certs owns the entry's certificates: the client listener's, served from a
// certificate and a key file and loaded again when they change (so a renewal needs no
// restart), and the extra CAs trusted for routers reached over https. It knows nothing of
// node's flags or Config (its errors say which file; node names the flag), of proxy, or of
// HTTP beyond crypto/tls.
package certs
