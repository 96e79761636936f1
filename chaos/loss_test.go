//go:build chaos

package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// disKind is what the scenario did to an entry, and so which of its requests may fail.
type disKind uint8

const (
	// disKilled: SIGKILL, until the next start. Every request the process had may fail, and
	// dials are refused (the entry is down).
	disKilled disKind = iota
	// disFrozen: SIGSTOP, until SIGCONT. Every request it had may fail (a client gives up
	// after 10 s); its kernel still accepts connections, so none is refused.
	disFrozen
	// disDrained: SIGTERM, until the process exits. Only event streams may end (the drain
	// ends them, as the contract allows); every other request it accepted must be answered.
	// Dials are refused from when it stops listening until the next start.
	disDrained
	// disHandedOver: SIGUSR2, until the old process exits once the new one serves. Only event
	// streams the old process held may end; no dial is refused (both share the sockets).
	disHandedOver
)

var disNames = [...]string{"killed (SIGKILL)", "frozen (SIGSTOP)", "drained (SIGTERM)", "handed over (SIGUSR2)"}

func (k disKind) String() string { return disNames[k] }

// startSlack bounds how long after a start an entry may still refuse dials: it binds its
// listener before it is ready, 50-160 ms after its start on the development VM.
const startSlack = 3 * time.Second

// disruption is one span of what the scenario did to an entry.
type disruption struct {
	entry     string
	kind      disKind
	from, to  time.Time // to: zero while it lasts
	downUntil time.Time // killed or drained: the next start (zero: not started again yet)
}

// disruptions records, as they happen, the kills, freezes, drains and upgrades the scenario
// makes (entryProc records its own), so that the loss check can tell the failures they
// explain from lost requests.
type disruptions struct {
	mu sync.Mutex
	ds []*disruption
}

func (d *disruptions) begin(entry string, kind disKind) *disruption {
	x := &disruption{entry: entry, kind: kind, from: time.Now()}
	d.mu.Lock()
	d.ds = append(d.ds, x)
	d.mu.Unlock()
	return x
}

// end ends the entry's spans of kind that last.
func (d *disruptions) end(entry string, kind disKind) {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, x := range d.ds {
		if x.entry == entry && x.kind == kind && x.to.IsZero() {
			x.to = now
		}
	}
}

func (d *disruptions) endAt(x *disruption, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if x.to.IsZero() {
		x.to = at
	}
}

// endDown: the entry starts again. A kill's span ends, and the entry is no longer down.
func (d *disruptions) endDown(entry string) {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, x := range d.ds {
		if x.entry != entry {
			continue
		}
		if x.kind == disKilled && x.to.IsZero() {
			x.to = now
		}
		if (x.kind == disKilled || x.kind == disDrained) && x.downUntil.IsZero() {
			x.downUntil = now
		}
	}
}

func (d *disruptions) all() []disruption {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]disruption, len(d.ds))
	for i, x := range d.ds {
		out[i] = *x
	}
	return out
}

// explains returns the span of the entry that explains a failure of a request that began at
// start and failed at end (streamCut: an event stream whose head came, ended early), or nil.
func (d *disruptions) explains(entry string, start, end time.Time, streamCut bool) *disruption {
	for _, x := range d.all() {
		if x.entry != entry || end.Before(x.from) || (!x.to.IsZero() && !start.Before(x.to)) {
			continue
		}
		switch x.kind {
		case disKilled, disFrozen:
			return &x
		case disDrained, disHandedOver:
			if streamCut {
				return &x
			}
		}
	}
	return nil
}

// down returns the span in which the entry was down (killed, or drained and not yet
// listening again) at t, or nil: a dial refused then sent nothing to a live entry.
func (d *disruptions) down(entry string, t time.Time) *disruption {
	for _, x := range d.all() {
		if x.entry != entry || (x.kind != disKilled && x.kind != disDrained) || t.Before(x.from) {
			continue
		}
		if x.downUntil.IsZero() || !t.After(x.downUntil.Add(startSlack)) {
			return &x
		}
	}
	return nil
}

// lossClass is what a client error was.
type lossClass uint8

const (
	// lossRefused: a dial refused while the entry was down (killed, or stopped by SIGTERM and
	// past its listening): nothing reached it, not a loss.
	lossRefused lossClass = iota
	// lossExpected: the scenario's own disruption of the entry explains it (a request in
	// flight at a kill or a freeze; an event stream a drain ended).
	lossExpected
	// lossLost: the entry had the request's connection (the TCP connection was made: its
	// kernel accepted it) and gave no whole answer: EOF, reset, a timeout, a TLS handshake or a
	// body cut. A LOST request fails the scenario.
	lossLost
	// lossRefusedUp: a dial refused while the entry should have been listening (in an upgrade
	// in place, say, which refuses none). Fails the scenario.
	lossRefusedUp
	// lossUnconnected: no connection, and not refused (a dial timeout): fails the scenario.
	lossUnconnected
)

var lossNames = [...]string{"refused, entry down", "expected", "LOST", "refused while it should listen", "no connection, not refused"}

func (c lossClass) String() string { return lossNames[c] }

// verdict is a client error's class, the span that explains it, if any, and, for a failing
// class, the release the entry ran if not this build's: the previous release (the rolling
// upgrade's) is known to lose requests this build no longer does (its drain closed a
// kept-alive connection idle when it began, and an HTTPS one made in it, at once: 5208465;
// a stale epoll event ended a new connection under a storm: d222020), so a failure there is
// counted and logged but does not fail the scenario. The loss check is about this build.
type verdict struct {
	class   lossClass
	by      *disruption
	note    string // what else explains an expected failure (router faults)
	release string
}

// fails: the client error fails the scenario (this build lost it, or refused it while up).
func (v verdict) fails() bool { return v.class >= lossLost && v.release == "" }

// classify classifies a failed request to entry that began at start and failed at end, having
// got to stage (a stage constant); refused: its dial was refused; streamCut: an event stream
// whose head came, ended early.
func (h *harness) classify(entry string, start, end time.Time, stage int32, refused, streamCut bool) verdict {
	v := h.classifyAny(entry, start, end, stage, refused, streamCut)
	if v.class >= lossLost {
		v.release = h.entry(entry).releaseAt(start)
	}
	return v
}

func (h *harness) classifyAny(entry string, start, end time.Time, stage int32, refused, streamCut bool) verdict {
	if stage == stageNone {
		if refused {
			if d := h.dis.down(entry, start); d != nil {
				return verdict{class: lossRefused, by: d}
			}
			return verdict{class: lossRefusedUp}
		}
		if d := h.dis.explains(entry, start, end, false); d != nil {
			return verdict{class: lossExpected, by: d}
		}
		return verdict{class: lossUnconnected}
	}
	if d := h.dis.explains(entry, start, end, streamCut); d != nil {
		return verdict{class: lossExpected, by: d}
	}
	return verdict{class: lossLost}
}

// String is the class, with what explains it or the release that failed.
func (v verdict) String() string {
	s := v.class.String()
	if v.by != nil {
		s += " (" + v.by.entry + " " + v.by.kind.String() + ")"
	}
	if v.note != "" {
		s += " (" + v.note + ")"
	}
	if v.release != "" {
		s += " at the previous release " + v.release + " (not this build: counted, not failed)"
	}
	return s
}

// classifyRecord classifies a client error of a well-formed request (httptrace's stage).
//
// The entry bounds each attempt (--answer-timeout, 3 s here), not a request's: a retryable one
// whose home region's routers blackhole or crawl tries them and then other regions, whose
// relays to the home hang too, and may take longer than the client's 10 s. A client timeout
// while a router of the tenant's home was in a fault mode (not ok, nor slow below half the
// answer timeout) at some instant of the request is the router faults' doing: expected. An
// EOF or a reset is never: the entry must answer, 502 at worst.
func (h *harness) classifyRecord(r *record) verdict {
	v := h.classify(r.Entry, r.Start, r.End, r.StageN, r.StageN == stageNone && r.Err == "refused",
		r.Op == opSSE && r.Status == 200)
	if v.class == lossLost && r.Err == "timeout" && r.StageN >= stageWrote {
		homes := h.dirLog.homes(r.Tenant, r.Start, r.End)
		for _, rt := range h.standin.routers {
			if slices.Contains(homes, rt.Region) && !h.faults.healthyThroughout(rt.Addr, r.Start, r.End) {
				return verdict{class: lossExpected, note: "the client's timeout while its home's routers were faulted"}
			}
		}
	}
	return v
}

// classifyMalformed classifies a malformed request with no answer: its dial, the TLS
// handshake (the entry's kernel accepted the connection) or the read of the answer failed.
func (h *harness) classifyMalformed(m *malRecord) verdict {
	stage := stageWrote
	switch {
	case strings.HasPrefix(m.Err, "dial: "):
		stage = stageNone
	case strings.HasPrefix(m.Err, "handshake: "):
		stage = stageDialed
	}
	return h.classify(m.Entry, m.Start, m.End, stage, m.Err == "dial: refused", false)
}

// at is t as an offset from the start of the scenario's records, for the log.
func (h *harness) at(t time.Time) string {
	return "+" + t.Sub(h.rec.t0).Round(10*time.Millisecond).String()
}

// context describes, for a LOST request to entry that began at start, what the scenario was
// doing to that entry around it: the latest span that began before the request ended.
func (h *harness) context(entry string, start, end time.Time) string {
	var last *disruption
	for _, x := range h.dis.all() {
		if x.entry == entry && !x.from.After(end) {
			last = &x
		}
	}
	if last == nil {
		return "nothing done to " + entry + " before it"
	}
	s := fmt.Sprintf("%s %s at %s", entry, last.kind, h.at(last.from))
	if !last.to.IsZero() {
		s += ", ended " + h.at(last.to)
	}
	return s + fmt.Sprintf("; the request began %v after it", start.Sub(last.from).Round(time.Millisecond))
}

// checkNoLoss: every request an entry accepted was answered (the contract: every connection
// it accepted is answered before it is closed; an upgrade in place refuses none), but those
// the scenario's own disruptions explain. It counts LOST requests (and malformed requests with
// no answer, which must have been refused 400) in the summary and fails the scenario on each,
// with its kind, how far it got and the error; it also fails on a dial refused while the entry
// should have been listening, and on a request that got no connection at all but not refused.
// At the previous release the same are counted (LostPrevious) and logged, not failed.
func (h *harness) checkNoLoss(s *summary, ix *ledgerIndex) {
	ix.verdicts = map[*record]verdict{}
	count := map[string]int{}
	judge := func(v verdict, what, entry string, start, end time.Time, malformed bool) {
		key := v.class.String()
		if malformed {
			key = "malformed " + key
		}
		if v.by != nil {
			key += ": " + v.by.entry + " " + v.by.kind.String()
		}
		if v.note != "" {
			key += ": " + v.note
		}
		if v.release != "" {
			key += " at " + v.release
		}
		count[key]++
		if v.class < lossLost {
			return
		}
		line := fmt.Sprintf("%s: %s; %s", v.class, what, h.context(entry, start, end))
		if v.class == lossLost {
			if v.release != "" {
				s.LostPrevious++
			} else {
				s.Lost++
			}
		}
		if v.fails() {
			s.fail("%s", line)
		} else {
			h.logf("at the previous release %s (counted, not failed): %s", v.release, line)
		}
	}
	for _, r := range ix.recs {
		if r.Err == "" {
			continue
		}
		v := h.classifyRecord(r)
		ix.verdicts[r] = v
		judge(v, fmt.Sprintf("%s %s %s via %s (%s) at %s after %v: %s (%s; %s)", r.Op, r.ID, r.Tenant, r.Entry, r.Conn,
			h.at(r.Start), r.End.Sub(r.Start).Round(time.Millisecond), r.outcome(), r.Stage, r.ErrText), r.Entry, r.Start, r.End, false)
	}
	for _, m := range ix.mal {
		if m.Err == "" {
			continue
		}
		judge(h.classifyMalformed(m), fmt.Sprintf("malformed %s %s %s via %s (%s) at %s after %v: no answer: %s", m.Kind, m.ID, m.Tenant, m.Entry, m.Conn,
			h.at(m.Start), m.End.Sub(m.Start).Round(time.Millisecond), m.Err), m.Entry, m.Start, m.End, true)
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(count)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, count[k]))
	}
	if len(parts) == 0 {
		parts = []string{"none"}
	}
	h.logf("client errors by class: %s", strings.Join(parts, ", "))
	for _, x := range h.dis.all() {
		line := fmt.Sprintf("%s %s at %s", x.entry, x.kind, h.at(x.from))
		if !x.to.IsZero() {
			line += ", to " + h.at(x.to)
			line += "; " + h.during(ix, x)
		}
		if !x.downUntil.IsZero() {
			line += "; started again " + h.at(x.downUntil)
		}
		h.logf("disruption: %s", line)
	}
}

// during counts the requests sent to x's entry that began within x (a drain, say): those
// answered, by connection kind, and the client errors by class.
func (h *harness) during(ix *ledgerIndex, x disruption) string {
	var answered [numConnKinds]int
	errs := map[string]int{}
	n := 0
	for _, r := range ix.recs {
		if r.Entry != x.entry || r.Start.Before(x.from) || !r.Start.Before(x.to) {
			continue
		}
		n++
		if r.Err == "" {
			answered[r.Conn]++
			continue
		}
		errs[ix.verdicts[r].class.String()]++
	}
	var ks []string
	for k, c := range answered {
		ks = append(ks, fmt.Sprintf("%s %d", connKind(k), c))
	}
	s := fmt.Sprintf("%d requests to %s began in it, answered: %s", n, x.entry, strings.Join(ks, ", "))
	for _, k := range slices.Sorted(maps.Keys(errs)) {
		s += fmt.Sprintf("; %s %d", k, errs[k])
	}
	return s
}
