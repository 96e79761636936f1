//go:build pprof

package main

// Built with -tags pprof (profiling the hot path, see bench/README.md), the
// binary serves net/http/pprof on FENEC_ENTRY_PPROF_ADDR (default
// 127.0.0.1:6060). Release builds carry no profiler.

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	addr := os.Getenv("FENEC_ENTRY_PPROF_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6060"
	}
	go http.ListenAndServe(addr, nil)
}
