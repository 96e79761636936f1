//go:build pprof

package main

// Built with -tags pprof (profiling the hot path, see bench/README.md), the
// binary serves net/http/pprof on FENEC_ENTRY_PPROF_ADDR (default
// 127.0.0.1:6060), and /debug/runtime-metrics: every scalar of runtime/metrics
// as "name value" lines (goroutines created, heap allocations, GC cycles and CPU),
// and each histogram's count of samples as "name:count value", which
// `go run ./bench profile` reads before and after its load to count them per request.
// Release builds carry no profiler.

import (
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime/metrics"
)

func init() {
	buildEnv[envPrefix+"PPROF_ADDR"] = true // read here, not a flag: no "set and ignored" warning
	addr := os.Getenv(envPrefix + "PPROF_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6060"
	}
	http.HandleFunc("/debug/runtime-metrics", serveRuntimeMetrics)
	go http.ListenAndServe(addr, nil)
}

func serveRuntimeMetrics(w http.ResponseWriter, _ *http.Request) {
	descs := metrics.All()
	samples := make([]metrics.Sample, len(descs))
	for i, d := range descs {
		samples[i].Name = d.Name
	}
	metrics.Read(samples)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	for _, s := range samples {
		switch s.Value.Kind() {
		case metrics.KindUint64:
			fmt.Fprintf(w, "%s %d\n", s.Name, s.Value.Uint64())
		case metrics.KindFloat64:
			fmt.Fprintf(w, "%s %g\n", s.Name, s.Value.Float64())
		case metrics.KindFloat64Histogram:
			var n uint64
			for _, c := range s.Value.Float64Histogram().Counts {
				n += c
			}
			fmt.Fprintf(w, "%s:count %d\n", s.Name, n)
		}
	}
}
