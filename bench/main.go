//go:build linux

// Command bench drives the benchmarks that start real processes on loopback: fenec-entry
// beside nginx and the upstream alone (proxies), what each loses in a storm (storm), where a
// request's CPU goes (profile), the profile the entry's build is optimized with (pgo), the
// door's conformance beside nginx (conformance) and the entry's memory at a million homes
// (memory); and the processes they run: the upstream every target proxies to, and connhold,
// the clients that hold connections and count every request. bench/README.md says what each
// measures and how to read it.
//
//	go run ./bench proxies [flags]       # or: make bench-proxies, make bench-protocols
//	go run ./bench storm [flags]         # or: make bench-storm
//	go run ./bench profile [flags]
//	go run ./bench pgo [flags]
//	go run ./bench conformance [flags]
//	go run ./bench memory -bin BIN [flags]
//	go run ./bench connhold -addr HOST:PORT [flags]
//
// Every process a run starts is its own (run.go): started on the CPUs the layout gives it,
// stopped by PID (SIGTERM, a second one a second later, SIGKILL 4 s after that) when the run
// ends, also on Ctrl-C or failure, and its temp dir removed unless -keep.
package main

import (
	"fmt"
	"os"
)

var commands = map[string]func(args []string) error{
	"proxies":     proxiesMain,
	"storm":       stormMain,
	"profile":     profileMain,
	"pgo":         pgoMain,
	"conformance": conformanceMain,
	"memory":      memoryMain,
	"connhold":    connholdMain,
	"upstream":    upstreamMain,
	"span":        spanMain, // profile's perf workload: the upstream's count at its start and end
}

func main() {
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: go run ./bench proxies|storm|profile|pgo|conformance|memory|connhold [flags] (-h for each)")
		os.Exit(2)
	}
	if err := commands[os.Args[1]](os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
