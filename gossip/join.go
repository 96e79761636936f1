package gossip

import (
	"context"
	"math/rand/v2"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
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
//
// Each attempt is logged at debug; a failure is logged once, when it starts or when what
// fails changes (joinReport), and once when it ends.
func (g *Gossip) joiner(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	var rep joinReport
	var st settling
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
		if st.due(s, g.cfg.Clock.Now()) {
			g.exchange(s)
		}
		targets, unresolved := g.joinTargets(ctx, s)
		if len(targets) == 0 && !unresolved && ctx.Err() == nil {
			rep.members(g)
		} else if len(targets) > 0 && ctx.Err() == nil {
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
			g.log.Debug().Err(err).Strs("targets", targets).Int("joined", n).Msg("gossip: join attempt")
			rep.joined(g, s, targets, n, err)
		}
		now := g.cfg.Clock.Now()
		st.start(s, alivePeers(s, g.cfg.NodeName) > 0, now)
		t.Reset(st.wait(s, g.cfg.JoinInterval, now))
	}
}

// settleRounds are when, after an incarnation first has a peer, it exchanges the whole member
// list with one random alive member (memberlist's push/pull). When a fleet starts at once,
// every join's push/pull meets a seed that knows few members yet, and the rest are learned
// from the joins' broadcasts, which memberlist sends a bounded number of times: with 100
// real processes started within a second, one entry in three runs still lacked one to three
// peers after 30 s, until push/pull (every 30 s or more) came round. Four exchanges in the
// first 8 s, about 100 bytes a member each, carry what the broadcasts missed, both ways.
var settleRounds = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}

// settling is the joiner's schedule of settleRounds for one serf incarnation.
type settling struct {
	s    *serf.Serf // the incarnation the schedule is for
	from time.Time  // when it first had a peer
	next int        // the next round
}

// start begins the schedule when s (a new incarnation) first has a peer, now.
func (st *settling) start(s *serf.Serf, peered bool, now time.Time) {
	if st.s != s && peered {
		*st = settling{s: s, from: now}
	}
}

// due says whether s's next round is due now, and takes it.
func (st *settling) due(s *serf.Serf, now time.Time) bool {
	if st.s != s || st.next >= len(settleRounds) || now.Before(st.from.Add(settleRounds[st.next])) {
		return false
	}
	st.next++
	return true
}

// wait is how long the joiner sleeps from now: every (JoinInterval), or until the next round.
func (st *settling) wait(s *serf.Serf, every time.Duration, now time.Time) time.Duration {
	if st.s == s && st.next < len(settleRounds) {
		return max(0, min(every, st.from.Add(settleRounds[st.next]).Sub(now)))
	}
	return every
}

// exchange swaps the whole member list with one random alive member. memberlist's Join is a
// push/pull with a member it knows, too; serf's would also broadcast a join intent, which a
// member already joined does not need.
func (g *Gossip) exchange(s *serf.Serf) {
	var peers []string
	for _, m := range s.Members() {
		if m.Status == serf.StatusAlive && m.Name != g.cfg.NodeName {
			peers = append(peers, memberAddr(m))
		}
	}
	if len(peers) == 0 {
		return
	}
	to := peers[rand.IntN(len(peers))]
	_, err := s.Memberlist().Join([]string{to})
	g.log.Debug().Err(err).Str("with", to).Msg("gossip: member list exchanged")
}

// joinTargets returns the resolved Join and JoinDNS addresses, ip:port, that are not alive
// or leaving members (this entry among them); until a first peer has been seen alive, the
// members serf's snapshot listed too (a restarted entry whose Join and JoinDNS do not answer
// keeps trying the members it knew, where serf tries each once). unresolved says a name did
// not resolve.
func (g *Gossip) joinTargets(ctx context.Context, s *serf.Serf) (out []string, unresolved bool) {
	members := make(map[string]bool)
	for _, m := range s.Members() {
		if m.Status == serf.StatusAlive || m.Status == serf.StatusLeaving {
			members[memberAddr(m)] = true
		}
	}
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
			unresolved = true
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
	return out, unresolved
}

// memberAddr is a member's memberlist address, ip:port.
func memberAddr(m serf.Member) string {
	return net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port)))
}

// joinReport is what the joiner last said of its joins at info or warn. serf retries a dead
// --join peer every JoinInterval, also while the entry is clustered through others; logging
// each failure would repeat the same lines forever. A failure is logged once when it starts,
// and again only when its text (each failing target and its reason) changes or the entry
// gains or loses its last peer; its end is logged once.
type joinReport struct {
	failing bool
	key     string // the failure last logged: its text without local addresses, and alone
}

// joined takes the outcome of one Join of targets: n joined, err why none did.
func (r *joinReport) joined(g *Gossip, s *serf.Serf, targets []string, n int, err error) {
	if n > 0 || err == nil {
		if r.failing {
			r.failing, r.key = false, ""
			g.log.Info().Strs("targets", targets).Int("joined", n).
				Msg("gossip: join recovered: a join target answered")
		}
		return
	}
	peers := alivePeers(s, g.cfg.NodeName)
	parts := joinFailures(err)
	keyed := false // a peer refused this entry for its gossip key
	for _, p := range parts {
		if target, ok := refusedTarget(p); ok {
			keyed = true
			g.keyRep.refusedJoin(target)
		}
	}
	text := strings.Join(parts, "; ")
	key := localAddr.ReplaceAllString(text, "") + "\x00" + strconv.FormatBool(peers == 0)
	if r.failing && key == r.key {
		return
	}
	r.failing, r.key = true, key
	ev, msg := g.log.Info(), "gossip: join failed; clustered through other members, trying again every "
	if peers == 0 {
		ev, msg = g.log.Warn(), "gossip: join failed; this entry has no peer, trying again every "
	}
	if keyed {
		msg = "gossip: join refused: a peer holds another gossip key, or none; " + keyHint + "; trying again every "
	}
	ev.Str("error", text).Strs("targets", targets).Int("peers", peers).
		Msg(msg + g.cfg.JoinInterval.String())
}

// members notes that there is nothing to join: every target is a member (a dead peer came
// back and joined this entry itself).
func (r *joinReport) members(g *Gossip) {
	if r.failing {
		r.failing, r.key = false, ""
		g.log.Info().Msg("gossip: join recovered: every join target is a member")
	}
}

// alivePeers counts the alive members other than self.
func alivePeers(s *serf.Serf, self string) int {
	n := 0
	for _, m := range s.Members() {
		if m.Status == serf.StatusAlive && m.Name != self {
			n++
		}
	}
	return n
}

// localAddr is the local end of a connection in an error (the "10.0.0.9:41234->" of "read
// tcp 10.0.0.9:41234->10.0.0.1:7946"): a new port at each attempt, not a change of what fails.
var localAddr = regexp.MustCompile(`[^ ]*->`)

// joinFailures flattens Join's error to lines. memberlist returns a hashicorp multierror,
// "1 error occurred:\n\t* failed to join 10.0.0.1:7946: <reason>\n\n"; these are its
// errors ("failed to join <target>: <reason>", "failed to resolve <name>: <reason>"), each
// with its white space collapsed, sorted. The join failure line joins them with "; ".
func joinFailures(err error) []string {
	var errs []error
	switch e := err.(type) {
	case interface{ WrappedErrors() []error }:
		errs = e.WrappedErrors()
	case interface{ Unwrap() []error }:
		errs = e.Unwrap()
	}
	var parts []string
	for _, e := range errs {
		if e != nil {
			parts = append(parts, strings.Join(strings.Fields(e.Error()), " "))
		}
	}
	if len(parts) == 0 {
		return []string{strings.Join(strings.Fields(err.Error()), " ")}
	}
	slices.Sort(parts)
	return parts
}

// refusedTarget is the target of one of joinFailures' lines if the join failed for the
// gossip key (keyMismatch): "failed to join <target>: <reason>".
func refusedTarget(part string) (string, bool) {
	rest, ok := strings.CutPrefix(part, "failed to join ")
	if !ok || !keyMismatch(rest) {
		return "", false
	}
	target, _, ok := strings.Cut(rest, ": ")
	return target, ok
}
