package simcluster

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// pollInterval is how often the Wait methods look again.
const pollInterval = 10 * time.Millisecond

// poll calls cond every pollInterval until it returns "" (done) or ctx ends; then it
// returns ctx's error with cond's last word on what is missing.
func poll(ctx context.Context, what string, cond func() string) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		missing := cond()
		if missing == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("simcluster: %s: %w: %s", what, ctx.Err(), missing)
		case <-t.C:
		}
	}
}

// all returns idx, or every entry's index if idx is empty.
func (c *Cluster) all(idx []int) []int {
	if len(idx) > 0 {
		return idx
	}
	n := c.Len()
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// WaitMembers waits until each of the entries idx (all if none) sees every other one of
// them alive, or ctx ends.
func (c *Cluster) WaitMembers(ctx context.Context, idx ...int) error {
	idx = c.all(idx)
	return poll(ctx, "wait members", func() string {
		for _, i := range idx {
			e := c.Entry(i)
			alive := make(map[string]bool)
			for _, p := range e.Gossip.Peers() {
				alive[p.Name] = true
			}
			for _, j := range idx {
				if o := c.Entry(j); j != i && !alive[o.Name] {
					return fmt.Sprintf("%s does not see %s alive", e.Name, o.Name)
				}
			}
		}
		return ""
	})
}

// WaitHomes waits until each of the entries idx (all if none) holds every home of want
// (tenant -> region), or ctx ends; the error then says who lacks what.
func (c *Cluster) WaitHomes(ctx context.Context, want map[string]string, idx ...int) error {
	idx = c.all(idx)
	tenants := make([]string, 0, len(want))
	for t := range want {
		tenants = append(tenants, t)
	}
	slices.Sort(tenants)
	return poll(ctx, "wait homes", func() string {
		short, first := 0, ""
		for _, i := range idx {
			e := c.Entry(i)
			for _, t := range tenants {
				if !e.Has(t, want[t]) {
					if short++; first == "" {
						first = fmt.Sprintf("%s lacks %s=%s", e.Name, t, want[t])
					}
				}
			}
		}
		if short == 0 {
			return ""
		}
		return fmt.Sprintf("%d (entry, home) pairs missing, e.g. %s", short, first)
	})
}

// Holders returns the indexes of the entries idx (all if none) whose table holds tenant at
// region.
func (c *Cluster) Holders(tenant, region string, idx ...int) []int {
	var out []int
	for _, i := range c.all(idx) {
		if c.Entry(i).Has(tenant, region) {
			out = append(out, i)
		}
	}
	return out
}
