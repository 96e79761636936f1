package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fenec/fenec-entry/gossip/simcluster"
)

// readyWait bounds a restarted entry's wait for a peer and its table (WaitReady), far above
// the second or so it takes at 100 entries: past it the entry serves with what it has, as
// node does.
const readyWait = 30 * time.Second

// churnSet returns k distinct entries among 3..n-1, in the order they restart, drawn from
// seed alone (so that a run with -churn draws the tenants and origins as one without). The
// first three stay up: every entry, and every restarted one, joins through them.
func churnSet(seed int64, n, k int) []int {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x636875726e))
	out := rng.Perm(n - 3)[:k]
	for j := range out {
		out[j] += 3
	}
	return out
}

// churn restarts the entries of order, one at each of len(order) evenly spaced instants over
// over from t0 (the middle of each slot), each restarted entry then fetching a peer's table as
// node does before it reports ready. Restart replaces the entry's incarnation in the cluster,
// which the tracker then reads.
type churn struct {
	done      chan struct{}       // closed after the last restart
	restarted []*simcluster.Entry // the new incarnations; read after done
	err       error               // the first restart that failed; read after done
	ready     sync.WaitGroup      // the restarted entries' WaitReady
}

func startChurn(c *simcluster.Cluster, order []int, t0 time.Time, over time.Duration) *churn {
	ch := &churn{done: make(chan struct{})}
	go func() {
		defer close(ch.done)
		for k, i := range order {
			at := t0.Add(time.Duration((float64(k) + 0.5) / float64(len(order)) * float64(over)))
			time.Sleep(time.Until(at)) // pacing the restarts
			restart := time.Now()
			e, err := c.Restart(i)
			if err != nil {
				ch.err = fmt.Errorf("churn: %w", err)
				return
			}
			ch.restarted = append(ch.restarted, e)
			ch.ready.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), readyWait)
				defer cancel()
				if err := e.WaitReady(ctx); err != nil {
					logf("restart %d/%d: %s not ready: %v", k+1, len(order), e.Name, err)
					return
				}
				logf("restart %d/%d: %s ready %v after its restart, with %d homes", k+1, len(order), e.Name,
					time.Since(restart).Round(time.Millisecond), e.Table.Len())
			})
		}
	}()
	return ch
}

// wait waits for the restarts and the restarted entries' readiness, and returns the first
// restart error.
func (ch *churn) wait() error {
	<-ch.done
	ch.ready.Wait()
	return ch.err
}
