package gossip

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/serf/serf"
)

// leaveJoinWait bounds how long Leave waits for a join in flight to take its peer's answer (a
// live peer answers in milliseconds; one that does not is not waited for longer).
const leaveJoinWait = time.Second

// joiner resolves Join and JoinDNS every JoinInterval and joins the addresses that are not
// alive members: the first join (retried until a peer answers; meanwhile the entry serves
// alone), and the rejoin after a restart or a healed partition, when the other side's
// members are failed here. It stops at Leave or Close. One goroutine.
func (g *Gossip) joiner(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := g.serfOrNil()
		if s == nil || s.State() != serf.SerfAlive {
			// Shut down and being started again (supervise): nothing to join with yet.
			t.Reset(g.cfg.JoinInterval)
			continue
		}
		if targets := g.joinTargets(ctx, s); len(targets) > 0 && ctx.Err() == nil {
			// Leave waits for this join to return (leaveJoinWait at most); after Leave, none
			// starts.
			g.mu.Lock()
			if g.left {
				g.mu.Unlock()
				return
			}
			joining := make(chan struct{})
			g.joining = joining
			g.mu.Unlock()
			// Old events are not replayed: a joiner gets the table by snapshot.
			n, err := s.Join(targets, true)
			g.mu.Lock()
			g.joining = nil
			g.mu.Unlock()
			close(joining)
			ev := g.log.Debug()
			if err != nil && n == 0 {
				ev = g.log.Info()
			}
			ev.Err(err).Strs("targets", targets).Int("joined", n).Msg("gossip: join")
		}
		t.Reset(g.cfg.JoinInterval)
	}
}

// joinTargets returns the resolved Join and JoinDNS addresses, ip:port, that are not alive
// or leaving members (this entry among them); until a first peer has been seen alive, the
// members serf's snapshot listed too (a restarted entry whose Join and JoinDNS do not answer
// keeps trying the members it knew, where serf tries each once).
func (g *Gossip) joinTargets(ctx context.Context, s *serf.Serf) []string {
	members := make(map[string]bool)
	for _, m := range s.Members() {
		if m.Status == serf.StatusAlive || m.Status == serf.StatusLeaving {
			members[memberAddr(m)] = true
		}
	}
	var out []string
	add := func(ip net.IP, port int) {
		a := net.JoinHostPort(ip.String(), strconv.Itoa(port))
		if !members[a] {
			members[a] = true // once
			out = append(out, a)
		}
	}
	resolve := func(host string) []net.IP {
		if ip := net.ParseIP(host); ip != nil {
			return []net.IP{ip}
		}
		rctx, cancel := context.WithTimeout(ctx, g.cfg.JoinInterval)
		defer cancel()
		ips, err := g.cfg.LookupIP(rctx, host)
		if err != nil {
			g.log.Debug().Err(err).Str("host", host).Msg("gossip: resolving a join target failed")
		}
		return ips
	}
	for _, j := range g.cfg.Join {
		host, port, _ := splitHostPort(j) // validated
		for _, ip := range resolve(host) {
			add(ip, port)
		}
	}
	if g.cfg.JoinDNS != "" {
		port := g.bindPort()
		for _, ip := range resolve(g.cfg.JoinDNS) {
			add(ip, port)
		}
	}
	if !g.Joined() {
		for _, a := range g.known {
			if !members[a] {
				members[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// memberAddr is a member's memberlist address, ip:port.
func memberAddr(m serf.Member) string {
	return net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port)))
}
