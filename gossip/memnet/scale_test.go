//go:build memnet100

package memnet

// Run with: go test -tags memnet100 -run Scale -v ./gossip/memnet
// (without -race for representative CPU figures).

import (
	"fmt"
	"io"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/fenec/fenec-entry/internal/testutil"
)

func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestScale starts clusters of 10 and 100 memberlist nodes with the WAN
// settings gossip's defaults were measured with and logs convergence time, goroutines, CPU
// and heap in steady state, and how fast the goroutines go after Shutdown.
func TestScale(t *testing.T) {
	const window = 10 * time.Second // steady-state measuring window
	for _, n := range []int{10, 100} {
		for _, lat := range [][2]time.Duration{{0, 0}, {10 * time.Millisecond, 150 * time.Millisecond}} {
			t.Run(fmt.Sprintf("%d nodes latency %v-%v", n, lat[0], lat[1]), func(t *testing.T) {
				base := runtime.NumGoroutine()
				nw := New(1)
				nw.SetLatency(lat[0], lat[1])
				var ms []*memberlist.Memberlist
				var names []string
				for i := range n {
					name := fmt.Sprintf("n%d", i)
					c := memberlist.DefaultWANConfig()
					c.Name = name
					c.Transport = nw.NewTransport(name)
					c.LogOutput = io.Discard
					c.GossipInterval = 100 * time.Millisecond
					c.GossipNodes = 4
					c.ProbeInterval = time.Second
					m, err := memberlist.Create(c)
					if err != nil {
						t.Fatal(err)
					}
					ms = append(ms, m)
					names = append(names, name)
				}
				seed, _ := nw.Addr("n0")
				start := time.Now()
				for _, m := range ms[1:] {
					if _, err := m.Join([]string{seed}); err != nil {
						t.Fatal(err)
					}
				}
				joined := time.Since(start)
				conv := testutil.Eventually(t, 60*time.Second, "converged", func() bool { return allSeeAlive(ms, names) })

				cpu0, wall0, st0 := cpuTime(t), time.Now(), nw.Stats()
				time.Sleep(window) // measuring, not synchronising
				cpu := cpuTime(t) - cpu0
				wall := time.Since(wall0)
				st := nw.Stats()
				var mem runtime.MemStats
				runtime.ReadMemStats(&mem)
				stillConverged := allSeeAlive(ms, names)
				t.Logf("joins %v, converged %v after; steady: %d goroutines (%d before), CPU %.1f%% of one core (%d cores), heap %d MiB, sys %d MiB; %.0f packets/s, %.0f KB/s, dropped %d; converged at end: %v",
					joined.Round(time.Millisecond), conv.Round(time.Millisecond),
					runtime.NumGoroutine(), base, 100*cpu.Seconds()/wall.Seconds(), runtime.NumCPU(),
					mem.HeapInuse>>20, mem.Sys>>20,
					float64(st.Sent-st0.Sent)/wall.Seconds(), float64(st.SentBytes-st0.SentBytes)/wall.Seconds()/1e3,
					st.DroppedQueueFull+st.DroppedLoss+st.DroppedDown+st.DroppedPartition, stillConverged)
				if !stillConverged {
					t.Error("cluster lost convergence in steady state")
				}

				for _, m := range ms {
					_ = m.Shutdown()
				}
				d := testutil.Eventually(t, 30*time.Second, "goroutines back to baseline", func() bool {
					return runtime.NumGoroutine() <= base+2
				})
				t.Logf("goroutines at baseline %v after Shutdown of all", d.Round(time.Millisecond))
			})
		}
	}
}
