//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// kindCount is one connection kind's share of a scenario's requests.
type kindCount struct{ Requests, Errors int }

// byKind formats one figure of every connection kind, in connKind order.
func byKind(ks [numConnKinds]kindCount, f func(kindCount) int) string {
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprint(f(k)))
	}
	return strings.Join(parts, " / ")
}

// summary is one row of the table printed at the end of the run.
type summary struct {
	Scenario      string
	Seed          int64
	Requests      int
	Writes        int // writes sent (plain and keyed, client retries included)
	Applies       int // rows of the stand-in ledger
	Duplicates    int // applies beyond the first of one plain write (request id) or one key
	KeyedLost     int // keys the client saw succeed with no apply
	PlainLost     int // plain writes the client saw succeed with no apply
	False502      int // no_region_reachable while some router was healthy the whole request
	MarkRefusals  int // no_region_reachable while the tenant's home had a healthy router
	AfterRefusal  int // applies of a write that got an entry-made 5xx other than may_have_run
	WrongRegion   int // applies outside the tenant's home at that instant
	Unexpected5xx int // 5xx with no router fault and no home move around the request
	MayHaveRun    int
	ClientErrors  int
	Lost          int           // requests an entry accepted and did not answer, no disruption of the scenario explaining it
	LostPrevious  int           // the same at an entry running the previous release (counted, not failed)
	Malformed     int           // malformed requests sent (raw bytes, apart from the counts above)
	MalRefused    int           // of them, answered 4xx or 5xx by the entry itself
	FalseSuccess  int           // malformed requests answered 2xx, or applied (they or their smuggled twin)
	Converge      time.Duration // after the last fault: every entry holds the same homes
	Digest        string        // the table digest every entry showed then ("differ": none)
	TableProbe    string        // the routing probe: ok / n mismatches
	Leak          string        // ok or what grew
	Failures      []string

	Kinds [numConnKinds]kindCount // requests and client errors by connection kind
}

var (
	summaryMu sync.Mutex
	summaries []*summary
)

func printSummary(w io.Writer) {
	summaryMu.Lock()
	defer summaryMu.Unlock()
	if len(summaries) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "By kind: %s (keep-alive plain, new connection plain, keep-alive TLS, new connection TLS).\n\n", strings.Join(connNames[:], " / "))
	fmt.Fprintln(w, "| scenario | seed | requests | writes | applies | duplicate applies | keyed writes lost | false 502s | unexpected 5xx | may_have_run | client errors | lost | requests by kind | client errors by kind | malformed | malformed refused | false successes | time to converge | table digest | table probe | leak | verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range summaries {
		fmt.Fprintln(w, s.row())
	}
	fmt.Fprintln(w)
}

func (s *summary) row() string {
	verdict := "PASS"
	if len(s.Failures) > 0 {
		verdict = fmt.Sprintf("FAIL (%d)", len(s.Failures))
	}
	conv := "-"
	if s.Converge >= 0 {
		conv = s.Converge.Round(100 * time.Millisecond).String()
	}
	digest := s.Digest
	if digest == "" {
		digest = "-"
	}
	lost := fmt.Sprint(s.Lost)
	if s.LostPrevious > 0 {
		lost += fmt.Sprintf(" (+%d at %s)", s.LostPrevious, previousRelease)
	}
	return fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s | %s | %s | %d | %d | %d | %s | %s | %s | %s | %s |",
		s.Scenario, s.Seed, s.Requests, s.Writes, s.Applies, s.Duplicates, s.KeyedLost, s.False502,
		s.Unexpected5xx, s.MayHaveRun, s.ClientErrors, lost,
		byKind(s.Kinds, func(k kindCount) int { return k.Requests }), byKind(s.Kinds, func(k kindCount) int { return k.Errors }),
		s.Malformed, s.MalRefused, s.FalseSuccess, conv, digest, s.TableProbe, s.Leak, verdict)
}

func (s *summary) fail(format string, args ...any) {
	s.Failures = append(s.Failures, fmt.Sprintf(format, args...))
}

// finish ends a scenario: faults cleared, the table agreement and leak checks, the ledger
// invariants; it prints the row and fails the test on any violation. w was started when the
// last disruption ended (convergence is timed from it); convergeWithin bounds it.
func (h *harness) finish(w *convergeWatch, convergeWithin time.Duration, extra func(*summary)) *summary {
	t := h.t
	s := &summary{Scenario: h.scenario, Seed: h.seed, Converge: -1}
	if t.Failed() { // a check of the scenario itself, reported above
		s.fail("the scenario's own checks failed (see the errors above)")
	}
	h.clearFaults()
	h.rec.closeIdle()

	// Every entry holds the same homes: the tenants some router answered for.
	s.Converge = h.converge(s, w, convergeWithin)
	h.probeTables(s)
	h.checkLeaks(s)
	h.checkLedger(s)
	if extra != nil {
		extra(s)
	}

	summaryMu.Lock()
	summaries = append(summaries, s)
	summaryMu.Unlock()
	fmt.Printf("\nSUMMARY %s\n", s.row())
	for _, f := range s.Failures {
		t.Errorf("%s: %s", h.scenario, f)
	}
	return s
}

// learned is the set of tenants some router answered (below 500) for: every entry must hold
// their homes once the table has converged.
func (h *harness) learned() map[string]bool {
	out := map[string]bool{}
	for _, r := range h.rec.records() {
		if r.Shard && r.Status > 0 && r.Status < 500 {
			out[r.Tenant] = true
		}
	}
	return out
}

// agreement is one poll of every entry's table.
type agreement struct {
	ok     bool
	digest string // the digest every entry shows, when they agree
	line   string // what each holds, for the log
}

// agreeNow reports whether every entry is ready, sees every member alive, holds exactly the
// homes learned anywhere (homes.held) and shows the same table digest (homes.digest: the same
// homes, regions and versions), and what each holds. The routing probe (probeTables) then
// checks the values against the stand-in's directory.
func (h *harness) agreeNow() agreement {
	want := len(h.learned())
	a := agreement{ok: true}
	var held, digests []string
	for i, e := range h.entries {
		st, err := e.status()
		if err != nil || !st.Ready || st.alive() != len(h.entries) || st.Homes.Held != want || st.Homes.Digest == "" {
			a.ok = false
		}
		if i == 0 {
			a.digest = st.Homes.Digest
		} else if st.Homes.Digest != a.digest {
			a.ok = false
		}
		x := fmt.Sprintf("%s=%d", e.name, st.Homes.Held)
		if err != nil {
			x += "(" + err.Error() + ")"
		}
		held = append(held, x)
		digests = append(digests, e.name+"="+st.Homes.Digest)
	}
	a.line = fmt.Sprintf("want %d homes each, held %s", want, strings.Join(held, " "))
	if a.ok {
		a.line += ", digest " + a.digest + " at every entry"
	} else {
		a.digest = ""
		a.line += ", digests " + strings.Join(digests, " ")
	}
	return a
}

// waitAgree waits up to within for the tables to agree (agreeNow), and returns the agreement
// and how long it took; past within it fails the test with what each entry held.
func (h *harness) waitAgree(within time.Duration, what string) (agreement, time.Duration) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var a agreement
	took, err := testutil.Poll(ctx, 100*time.Millisecond, what+": tables agree", func() error {
		if a = h.agreeNow(); !a.ok {
			return errors.New(a.line)
		}
		return nil
	})
	if err != nil {
		h.t.Error(err)
	}
	return a, took
}

// convergeWatch polls agreement from the end of the last disruption, while traffic may still
// flow, and keeps the first instant it held.
type convergeWatch struct {
	since  time.Time
	mu     sync.Mutex
	agreed time.Time
	stop   chan struct{}
	done   chan struct{}
}

func (h *harness) watchConvergence() *convergeWatch {
	w := &convergeWatch{since: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			if h.agreeNow().ok {
				w.mu.Lock()
				w.agreed = time.Now()
				w.mu.Unlock()
				return
			}
			select {
			case <-w.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return w
}

// converge returns the time from w.since to the first agreement, waiting up to within from
// w.since; agreement must still hold once traffic has stopped.
func (h *harness) converge(s *summary, w *convergeWatch, within time.Duration) time.Duration {
	deadline := w.since.Add(within)
	select {
	case <-w.done:
	case <-time.After(time.Until(deadline)):
		close(w.stop)
		<-w.done
	}
	w.mu.Lock()
	agreed := w.agreed
	w.mu.Unlock()
	for {
		a := h.agreeNow()
		if a.ok {
			if agreed.IsZero() {
				agreed = time.Now()
			}
			d := agreed.Sub(w.since)
			s.Digest = a.digest
			h.logf("tables agree %v after the last disruption ended (%s)", d.Round(100*time.Millisecond), a.line)
			return d
		}
		if time.Now().After(deadline) {
			s.Digest = "differ"
			s.fail("tables do not agree within %v of the last disruption: %s", within, a.line)
			return -1
		}
		agreed = time.Time{} // it held while traffic flowed, not now: time it again
		time.Sleep(200 * time.Millisecond)
	}
}

// probeTables checks the values of every entry's table without reading it: once reads ask
// every region in order again, one GET per (entry, tenant) must reach a router of the
// tenant's home region first (an entry that did not know the home would ask its continent's
// region first, which relays). Only the first request of a pair tells, since it teaches the
// entry; tenants whose home region reads still ask last at an entry are skipped (a mark
// reorders). Then the marks: a region's mark ends when one of its routers answers, and the
// probes were such answers, so no mark may be left of a region that answered one.
func (h *harness) probeTables(s *summary) {
	// Reads ask a failing region last only for --read-backoff after its latest failure, so
	// the wait is bounded by the clock: traffic has stopped, no failure is newer than that.
	// The mark itself lasts (plain writes ask the region last) until a router of it answers,
	// which no traffic does now: the probes below will.
	var live []string
	for _, e := range h.entries {
		if st, err := e.status(); err == nil {
			live = append(live, st.marksLine(e.name)...)
		}
	}
	if len(live) > 0 {
		h.logf("failing regions after the faults ended: %s", strings.Join(live, "; "))
	}
	var forReads []string
	deadline := time.Now().Add(readBackoff + 3*time.Second)
	for {
		forReads = forReads[:0]
		for _, e := range h.entries {
			st, err := e.status()
			if err != nil {
				forReads = append(forReads, e.name+": "+err.Error())
				continue
			}
			for _, r := range st.Regions {
				if r.MarkedForReads {
					forReads = append(forReads, e.name+": "+r.Name)
				}
			}
		}
		if len(forReads) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(forReads) > 0 {
		h.logf("reads still ask a region last after a wait of %v (%s): probing around them",
			readBackoff+3*time.Second, strings.Join(forReads, ", "))
	}
	before := h.seenSince(0)
	var maxSeq uint64
	for _, x := range before {
		maxSeq = max(maxSeq, x.Seq)
	}
	want := h.learned()
	type pair struct {
		entry, tenant, home, id string
		answered                bool // a router answered it (below 500)
	}
	var probes []pair
	skipped := 0
	answered := map[string]bool{} // regions whose router answered a probe
	for _, e := range h.entries {
		st, _ := e.status()
		for _, tn := range tenants {
			if !want[tn] {
				continue
			}
			home := h.dirLog.home(tn)
			if st.markedForReads(home) {
				skipped++
				continue
			}
			r := h.rec.probe(e, tn, "tableprobe")
			probes = append(probes, pair{e.name, tn, home, r.ID, r.Shard && r.Status > 0 && r.Status < 500})
		}
	}
	first := map[string]seen{}
	for _, x := range h.seenSince(maxSeq) {
		if x.From != "" {
			continue
		}
		if f, ok := first[x.RequestID]; !ok || x.Seq < f.Seq {
			first[x.RequestID] = x
		}
	}
	var bad []string
	for _, p := range probes {
		x, ok := first[p.id]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s/%s: no router saw the probe", p.entry, p.tenant))
		} else if x.Region != p.home {
			bad = append(bad, fmt.Sprintf("%s/%s: asked %s first, home is %s", p.entry, p.tenant, x.Region, p.home))
		}
		if ok && p.answered && x.Region == p.home {
			answered[p.home] = true // asked first and answered: the home's router answered
		}
	}
	s.TableProbe = fmt.Sprintf("%d/%d ok", len(probes)-len(bad), len(probes))
	if skipped > 0 {
		s.TableProbe += fmt.Sprintf(" (%d marked)", skipped)
	}
	if len(bad) > 0 {
		s.fail("table probe: %d of %d (entry, tenant) pairs not routed to the home first: %s", len(bad), len(probes), strings.Join(bad, "; "))
	}
	h.checkMarksCleared(s, answered)
}

// marksClear bounds how long after its routers answered a failing region may still be listed:
// the entry that got the answer clears it at once, a peer within the gossip bound (3 s).
const marksClear = 5 * time.Second

// checkMarksCleared: once a router of a region has answered (the table probes, through every
// entry), no entry lists the region failing.
func (h *harness) checkMarksCleared(s *summary, answered map[string]bool) {
	start := time.Now()
	for {
		var left []string
		for _, e := range h.entries {
			st, err := e.status()
			if err != nil {
				left = append(left, e.name+": "+err.Error())
				continue
			}
			for _, m := range st.Marks {
				if answered[m.Region] {
					left = append(left, m.line(e.name))
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Since(start) > marksClear {
			s.fail("marks not cleared %v after the regions answered the table probes: %s", marksClear, strings.Join(left, "; "))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Leak tolerances: goroutines and file descriptors may exceed the baseline by a fixed slack
// plus 10 % (idle pooled router connections, a serf reconnect in flight); resident memory by
// 64 MiB or 50 %, whichever is larger (the Go heap does not shrink at once after a burst).
// A leak of one goroutine or descriptor per request, over thousands of requests, is far past it.
const (
	leakSlackGoroutines = 25
	leakSlackFDs        = 20
	leakSlackRSS        = 64 << 20
	leakSettle          = 20 * time.Second
)

func (h *harness) checkLeaks(s *summary) {
	h.rec.closeIdle()
	deadline := time.Now().Add(leakSettle)
	for {
		var grew []string
		for _, e := range h.entries {
			m, err := e.metrics()
			if err != nil {
				grew = append(grew, e.name+": "+err.Error())
				continue
			}
			b := e.base
			if m.goroutines > b.goroutines*1.1+leakSlackGoroutines {
				grew = append(grew, fmt.Sprintf("%s goroutines %.0f (baseline %.0f)", e.name, m.goroutines, b.goroutines))
			}
			if m.fds > b.fds*1.1+leakSlackFDs {
				grew = append(grew, fmt.Sprintf("%s fds %.0f (baseline %.0f)", e.name, m.fds, b.fds))
			}
			if m.rss > max(b.rss*1.5, b.rss+leakSlackRSS) {
				grew = append(grew, fmt.Sprintf("%s rss %.1f MiB (baseline %.1f MiB)", e.name, m.rss/(1<<20), b.rss/(1<<20)))
			}
		}
		if len(grew) == 0 {
			var parts []string
			for _, e := range h.entries {
				m, _ := e.metrics()
				parts = append(parts, fmt.Sprintf("%s: %v (baseline %v)", e.name, m, e.base))
			}
			h.logf("no leak: %s", strings.Join(parts, "; "))
			s.Leak = "ok"
			return
		}
		if time.Now().After(deadline) {
			s.Leak = "LEAK"
			s.fail("not back near the baseline %v after traffic stopped: %s", leakSettle, strings.Join(grew, "; "))
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkLedger joins the clients' records with the stand-in ledger (by request id and key)
// and checks each invariant of the ledger in its own function.
func (h *harness) checkLedger(s *summary) {
	ix := h.indexLedger(s)
	h.checkApplies(s, ix)
	checkNoDuplicates(s, ix)
	checkNothingLost(s, ix)
	h.checkNoFalse502(s, ix)
	h.checkNoUnexpected5xx(s, ix)
	h.checkMalformed(s, ix)
	h.checkNoLoss(s, ix)
	h.logOutcomes(ix)
	if len(s.Failures) > 40 { // keep the log readable
		n := len(s.Failures)
		s.Failures = append(s.Failures[:40], fmt.Sprintf("... and %d more", n-40))
	}
}

// ledgerIndex is the clients' records and the stand-in ledger, joined.
type ledgerIndex struct {
	recs         []*record
	led          []apply
	byID         map[string]*record
	keyOK        map[string]string     // key -> a request id that succeeded
	appliesByID  map[string][]apply    // plain writes
	appliesByKey map[string][]apply    // keyed writes, by tenant NUL key
	mal          []*malRecord          // the malformed requests
	malByID      map[string]*malRecord // by X-Request-Id, the smuggled twin's included
	malByKey     map[string]*malRecord // by Idempotency-Key, the smuggled twin's included
	verdicts     map[*record]verdict   // every client error's class (checkNoLoss)
}

// indexLedger joins records and ledger, and fills the summary's counts.
func (h *harness) indexLedger(s *summary) *ledgerIndex {
	ix := &ledgerIndex{recs: h.rec.records(), led: h.ledger(), byID: map[string]*record{}, keyOK: map[string]string{},
		appliesByID: map[string][]apply{}, appliesByKey: map[string][]apply{},
		mal: h.rec.malformed(), malByID: map[string]*malRecord{}, malByKey: map[string]*malRecord{}}
	for _, m := range ix.mal {
		ix.malByID[m.ID], ix.malByID[m.smuggledID()] = m, m
		ix.malByKey[m.Key], ix.malByKey[m.smuggledKey()] = m, m
	}
	s.Requests = len(ix.recs)
	s.Applies = len(ix.led)
	for _, r := range ix.recs {
		ix.byID[r.ID] = r
		if r.Op == opWrite || r.Op == opKeyed {
			s.Writes++
		}
		if r.Op == opKeyed && r.ok() {
			ix.keyOK[r.Key] = r.ID
		}
		s.Kinds[r.Conn].Requests++
		if r.Err != "" {
			s.ClientErrors++
			s.Kinds[r.Conn].Errors++
		}
		if r.EntryMade && r.Code == "may_have_run" {
			s.MayHaveRun++
		}
	}
	for _, a := range ix.led {
		if a.Key != "" {
			ix.appliesByKey[a.Tenant+"\x00"+a.Key] = append(ix.appliesByKey[a.Tenant+"\x00"+a.Key], a)
		} else {
			ix.appliesByID[a.RequestID] = append(ix.appliesByID[a.RequestID], a)
		}
	}
	return ix
}

// checkApplies: every apply was sent by a client, is a write, ran in the tenant's home region
// at the time, and did not follow an entry-made refusal.
func (h *harness) checkApplies(s *summary, ix *ledgerIndex) {
	unknown := 0
	for _, a := range ix.led {
		r := ix.byID[a.RequestID]
		if r == nil && ix.malByID[a.RequestID] != nil {
			continue // a malformed request applied: checkMalformed counts it a false success
		}
		if r == nil {
			unknown++
			continue
		}
		// Only in its home region at the time (the move windows allow either home).
		homes := h.dirLog.homes(a.Tenant, a.At.Add(-time.Millisecond), a.At.Add(time.Millisecond))
		if !slices.Contains(homes, a.Region) {
			s.WrongRegion++
			s.fail("write %s (%s) applied in %s at %s; home then %v", a.RequestID, a.Tenant, a.Region, a.At.Format(time.RFC3339Nano), homes)
		}
		// A client that got an entry-made 5xx other than may_have_run had no apply.
		if r.EntryMade && r.Status >= 500 && r.Code != "may_have_run" {
			s.AfterRefusal++
			s.fail("write %s got %d %s from entry %s (%s), yet was applied at %s", r.ID, r.Status, r.Code, r.Entry, r.Conn, a.Region)
		}
		if r.Op != opWrite && r.Op != opKeyed {
			s.fail("request %s (%s) appears in the ledger", r.ID, r.Op)
		}
	}
	if unknown > 0 {
		s.fail("%d applies carry a request id no client sent", unknown)
	}
}

// checkNoDuplicates: a plain write is applied at most once, a key at most once.
func checkNoDuplicates(s *summary, ix *ledgerIndex) {
	for _, id := range slices.Sorted(maps.Keys(ix.appliesByID)) {
		if as := ix.appliesByID[id]; len(as) > 1 {
			s.Duplicates += len(as) - 1
			s.fail("plain write %s applied %d times (%s), client saw %s", id, len(as), routersOf(as), ix.byID[id].outcomeKind())
		}
	}
	for _, k := range slices.Sorted(maps.Keys(ix.appliesByKey)) {
		if as := ix.appliesByKey[k]; len(as) > 1 {
			s.Duplicates += len(as) - 1
			s.fail("key %q applied %d times (%s)", strings.ReplaceAll(k, "\x00", "/"), len(as), routersOf(as))
		}
	}
}

// checkNothingLost: a write the client was told succeeded was applied.
func checkNothingLost(s *summary, ix *ledgerIndex) {
	for _, r := range ix.recs {
		if r.Op == opKeyed && r.ok() && len(ix.appliesByKey[r.Tenant+"\x00"+r.Key]) == 0 && ix.keyOK[r.Key] == r.ID {
			s.KeyedLost++
			s.fail("keyed write %s (key %s) via %s (%s) answered %d, never applied", r.ID, r.Key, r.Entry, r.Conn, r.Status)
		}
		if r.Op == opWrite && r.ok() && len(ix.appliesByID[r.ID]) == 0 {
			s.PlainLost++
			s.fail("plain write %s via %s (%s) answered %d, never applied", r.ID, r.Entry, r.Conn, r.Status)
		}
	}
}

// checkNoFalse502: no_region_reachable only when no router answered throughout, and a mark
// never removed a region (the tenant's home had a healthy router).
func (h *harness) checkNoFalse502(s *summary, ix *ledgerIndex) {
	for _, r := range ix.recs {
		if !r.EntryMade || r.Code != "no_region_reachable" {
			continue
		}
		var healthy, homeHealthy []string
		homes := h.dirLog.homes(r.Tenant, r.Start, r.End)
		for _, rt := range h.standin.routers {
			if h.faults.healthyThroughout(rt.Addr, r.Start, r.End) {
				healthy = append(healthy, rt.Region+"/"+rt.Addr)
				if slices.Contains(homes, rt.Region) {
					homeHealthy = append(homeHealthy, rt.Addr)
				}
			}
		}
		if len(healthy) > 0 {
			s.False502++
			s.fail("false 502: %s %s %s via %s (%s) got no_region_reachable after %v while %v answered throughout",
				r.Op, r.ID, r.Tenant, r.Entry, r.Conn, r.End.Sub(r.Start).Round(time.Millisecond), healthy)
		}
		if len(homeHealthy) > 0 {
			s.MarkRefusals++
			s.fail("mark removed a region: %s %s via %s (%s) refused while its home %v had %v healthy", r.ID, r.Tenant, r.Entry, r.Conn, homes, homeHealthy)
		}
	}
}

// checkNoUnexpected5xx: a 5xx only around a router fault or a home move.
func (h *harness) checkNoUnexpected5xx(s *summary, ix *ledgerIndex) {
	for _, r := range ix.recs {
		if r.Status >= 500 && !h.faults.anyFault(r.Start.Add(-time.Second), r.End) && !h.dirLog.moved(r.Tenant, r.Start.Add(-time.Second), r.End) {
			s.Unexpected5xx++
			s.fail("unexpected 5xx: %s %s %s via %s (%s): %s with no router fault or home move around it", r.Op, r.ID, r.Tenant, r.Entry, r.Conn, r.outcome())
		}
	}
}

// checkMalformed: no malformed request was answered 2xx or applied (by its key or request id,
// nor its smuggled twin): each is a false success; and no smuggled twin reached a router at
// all. It logs how the entry answered each kind, how many reached a router (a head the door
// let through whose body it then refused), and every answer other than the entry's own 400.
func (h *harness) checkMalformed(s *summary, ix *ledgerIndex) {
	s.Malformed = len(ix.mal)
	whyFalse := map[*malRecord][]string{}
	for _, m := range ix.mal {
		if m.refused() {
			s.MalRefused++
		}
		if m.falseSuccess() {
			whyFalse[m] = append(whyFalse[m], "answered "+m.outcome())
		}
	}
	for _, a := range ix.led {
		m := ix.malByID[a.RequestID]
		if m == nil && a.Key != "" {
			m = ix.malByKey[a.Key]
		}
		if m != nil {
			whyFalse[m] = append(whyFalse[m], fmt.Sprintf("applied as %s (key %s) at %s/%s", a.RequestID, a.Key, a.Region, a.Router))
		}
	}
	for _, m := range ix.mal {
		if why := whyFalse[m]; len(why) > 0 {
			s.FalseSuccess++
			s.fail("false success: malformed %s %s (%s via %s, %s, key %s): %s", m.Kind, m.ID, m.Tenant, m.Entry, m.Conn, m.Key, strings.Join(why, "; "))
		}
	}
	reached := map[string]int{}
	for _, x := range h.seenSince(0) {
		m := ix.malByID[x.RequestID]
		if m == nil {
			continue
		}
		if x.RequestID == m.smuggledID() {
			s.fail("smuggled request %s (in the body of malformed %s via %s, %s) reached router %s/%s", x.RequestID, m.ID, m.Entry, m.Conn, x.Region, x.Router)
			continue
		}
		if x.From == "" {
			reached[m.Kind.String()]++
		}
	}
	hist := map[string]int{}
	var odd []string
	for _, m := range ix.mal {
		hist[m.Kind.String()+" "+m.Conn.String()+" "+m.outcome()]++
		var notes []string
		if m.Status != 400 || m.Code != "bad_request" || m.Shard {
			notes = append(notes, m.outcome())
		}
		if m.NotClosed {
			notes = append(notes, fmt.Sprintf("connection still open %v after the answer", malformedDrain))
		}
		if m.After != "" {
			notes = append(notes, fmt.Sprintf("then %q", m.After))
		}
		if len(notes) == 0 {
			continue
		}
		around := "no router fault or home move around it"
		if h.faults.anyFault(m.Start.Add(-time.Second), m.End) || h.dirLog.moved(m.Tenant, m.Start.Add(-time.Second), m.End) {
			around = "during a router fault or home move"
		}
		if m.WriteErr != "" {
			around += ", write: " + m.WriteErr
		}
		odd = append(odd, fmt.Sprintf("%s %s via %s (%s) at +%s after %v: %s (%s)", m.Kind, m.ID, m.Entry, m.Conn,
			m.Start.Sub(h.rec.t0).Round(100*time.Millisecond), m.End.Sub(m.Start).Round(time.Millisecond),
			strings.Join(notes, ", "), around))
	}
	hk := make([]string, 0, len(hist))
	for k, n := range hist {
		hk = append(hk, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(hk)
	h.logf("malformed: %d sent, %d refused by the entry, %d false successes; %s", s.Malformed, s.MalRefused, s.FalseSuccess, strings.Join(hk, ", "))
	rk := make([]string, 0, len(reached))
	for k, n := range reached {
		rk = append(rk, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(rk)
	h.logf("malformed requests whose head reached a router (body refused after): %d kinds [%s]", len(rk), strings.Join(rk, ", "))
	for i, o := range odd {
		if i == 30 {
			h.logf("malformed: ... and %d more answers other than the entry's 400", len(odd)-30)
			break
		}
		h.logf("malformed, not the entry's 400: %s", o)
	}
}

// maxErrorLines bounds the client errors logged one by one.
const maxErrorLines = 40

// logOutcomes logs what the clients saw, by kind and outcome: which paths the faults
// exercised; then the requests by connection kind, the refused dials by entry, and every
// other client error (up to maxErrorLines) with its kind, how far it got and the client
// library's words.
func (h *harness) logOutcomes(ix *ledgerIndex) {
	var kinds [numConnKinds]kindCount
	errs := map[connKind]map[string]int{}
	var lines []string
	type span struct {
		n           int
		first, last time.Time
	}
	refused := map[string]*span{} // entry -> the refused dials: nothing was sent, the entry was down
	for _, r := range ix.recs {
		kinds[r.Conn].Requests++
		if r.Err == "" {
			continue
		}
		kinds[r.Conn].Errors++
		if errs[r.Conn] == nil {
			errs[r.Conn] = map[string]int{}
		}
		errs[r.Conn][r.Err]++
		if r.Err == "refused" && ix.verdicts[r].class == lossRefused {
			sp := refused[r.Entry]
			if sp == nil {
				sp = &span{first: r.Start}
				refused[r.Entry] = sp
			}
			sp.n++
			sp.first, sp.last = minTime(sp.first, r.Start), maxTime(sp.last, r.Start)
			continue
		}
		class := ix.verdicts[r].String()
		lines = append(lines, fmt.Sprintf("%s: %s %s %s via %s (%s) at +%s after %v: %s (%s; %s)", class, r.Op, r.ID, r.Tenant, r.Entry, r.Conn,
			r.Start.Sub(h.rec.t0).Round(100*time.Millisecond), r.End.Sub(r.Start).Round(time.Millisecond), r.outcome(), r.Stage, r.ErrText))
	}
	var parts []string
	for k, c := range kinds {
		p := fmt.Sprintf("%s %d requests, %d client errors", connKind(k), c.Requests, c.Errors)
		if m := errs[connKind(k)]; len(m) > 0 {
			var es []string
			for _, e := range slices.Sorted(maps.Keys(m)) {
				es = append(es, fmt.Sprintf("%s %d", e, m[e]))
			}
			p += " (" + strings.Join(es, ", ") + ")"
		}
		parts = append(parts, p)
	}
	h.logf("by connection kind: %s", strings.Join(parts, "; "))
	for _, e := range slices.Sorted(maps.Keys(refused)) {
		sp := refused[e]
		h.logf("client errors: %d connections refused by %s (nothing sent), from +%s to +%s", sp.n, e,
			sp.first.Sub(h.rec.t0).Round(100*time.Millisecond), sp.last.Sub(h.rec.t0).Round(100*time.Millisecond))
	}
	for i, l := range lines {
		if i == maxErrorLines {
			h.logf("client error: ... and %d more", len(lines)-maxErrorLines)
			break
		}
		h.logf("client error: %s", l)
	}
	hist := map[string]int{}
	for _, r := range ix.recs {
		o := r.outcome()
		if r.Status >= 200 && r.Status < 500 && r.Err == "" {
			o = fmt.Sprintf("%dxx", r.Status/100)
		}
		hist[r.Op.String()+" "+o]++
	}
	hk := make([]string, 0, len(hist))
	for k := range hist {
		hk = append(hk, fmt.Sprintf("%s: %d", k, hist[k]))
	}
	sort.Strings(hk)
	h.logf("outcomes: %s", strings.Join(hk, ", "))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func routersOf(as []apply) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, a.Region+"/"+a.Router)
	}
	return strings.Join(parts, ", ")
}

// outcomeKind is the outcome, with the entry and connection kind it came through.
func (r *record) outcomeKind() string {
	if r == nil {
		return r.outcome()
	}
	return fmt.Sprintf("%s via %s (%s)", r.outcome(), r.Entry, r.Conn)
}

func (r *record) outcome() string {
	if r == nil {
		return "nothing (no client record)"
	}
	if r.Err != "" && r.Status == 0 {
		return "error " + r.Err
	}
	s := fmt.Sprintf("%d", r.Status)
	if r.Code != "" {
		s += " " + r.Code
	}
	if r.EntryMade {
		s += " (entry)"
	} else if r.Shard {
		s += " (router)"
	}
	if r.Err != "" {
		s += " then " + r.Err
	}
	return s
}
