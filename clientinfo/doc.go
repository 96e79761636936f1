// Package clientinfo says who a client is and where: its address and its continent.
//
// The address (AddrFunc) is the TCP peer's, or the one a trusted proxy wrote in a header
// (X-Forwarded-For style, or Fly's Fly-Client-IP), or the source of the PROXY protocol v1 or
// v2 header that ProxyProtocol's listener reads first on every connection. The continent
// (Continents) is the first that answers of a MaxMind or DB-IP database (OpenGeoIP), a
// trusted proxy's country header (through the ISO 3166 table of countries.go) and the PoP's
// own continent; FlyContinent places Fly's regions. SourceHeaders names the headers the
// router must not see once they have done their work here.
//
// clientinfo knows nothing of node.Config, proxy or homes: it takes plain values (a mode,
// header names, trusted prefixes, an opened database, a logger, a registry) and hands back
// the two functions proxy.Config calls and a listener wrapper; node builds them from its
// Config. It reads no flag and no environment, but its log lines, metric help and errors
// name the flags an operator sets, without the "--flag: " prefix of node's errors. Everything
// it returns is safe for concurrent use and does not change after construction.
package clientinfo
