package main

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The joiner at a small size (make test): real processes, A restores 20,000 homes, B joins
// with load running through A, and is ready with all of them. The million-home numbers are
// the command's (docs/BENCHMARKS.md); this keeps the command working.
func TestJoinerAtASmallSize(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts real entries")
	}
	bin := filepath.Join(t.TempDir(), "fenec-entry")
	// -pgo=off, as the e2e tests' build: no minute of compiling beside the suite's other tests.
	build := exec.Command("go", "build", "-pgo=off", "-o", bin, "github.com/fenec/fenec-entry/cmd/fenec-entry")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const n = 20_000
	res, err := run(bin, n, 2, time.Second, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.HomesAtReady != n || res.ReadySeconds <= 0 || res.ReadySeconds > 5 {
		t.Errorf("B ready after %.2f s with %d homes; want every one of %d within 5 s", res.ReadySeconds, res.HomesAtReady, n)
	}
	if res.IdleP99us <= 0 || res.DuringSamples == 0 {
		t.Errorf("no latencies measured: idle p99 %v µs, %d samples during the join", res.IdleP99us, res.DuringSamples)
	}
}
