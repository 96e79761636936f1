//go:build !linux

// Command bench drives the benchmarks on Linux only: they read /proc, pin CPUs with taskset
// and run nginx, wrk and perf (bench/README.md).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "bench: runs on Linux only (it reads /proc and pins CPUs)")
	os.Exit(1)
}
