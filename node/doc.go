// Package node is one entry: its configuration (Config, DefaultConfig, a pure Validate, the
// one table of what a reload applies), its wiring (the home table, the proxy, the Prometheus
// registry), its lifecycle (New, Start, Drain, Close, Reload) and its admin listener
// (/metrics, /healthz, /readyz, /status, /status.json). One process serves it all, on every
// CPU Go gives it.
//
// node reads no environment variable and parses no command line or flag syntax:
// cmd/fenec-entry does that and hands over a typed Config. It must not hold a mechanism of
// its own beyond wiring the parts: it knows the request path only as a proxy.Handler and the
// home table only through package homes. Who the client is and where (its address, the PROXY
// listener, its continent) is package clientinfo's: node builds it from its Config and hands
// the proxy the two functions it calls. The certificates (the client listener's, reloaded when
// its files change, and the routers' CAs) are package certs'; gossip, all of it, is package
// gossip's. node fills a status.Status from its parts; package status renders it (/status,
// /status.json) and turns the gossip counters into rates.
//
// Errors a fixed configuration cannot recover from are *ConfigError (their text starts with
// the flag, "--routers: ..."); everything else New, Start and Run return is a runtime failure.
package node
