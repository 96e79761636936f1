//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// previousRelease is the last release before upgrades in place: the fleet starts on it, is
// upgraded entry by entry to this build, and one entry goes back to it.
const previousRelease = "1ba8bf2"

// maxRelayPermille bounds the share of requests for tenants already heard that a router had
// to relay (the entry asked a region other than the home first): 1 in 1,000, in every phase.
const maxRelayPermille = 1

// markTenant is homed in ap, which no tenant of the rolling scenario's traffic is: a fault on
// ap's routers makes a mark only where the scenario sends markTenant, and nothing but the
// scenario's probes clears it.
const markTenant = "t03"

// buildRelease builds ./cmd/fenec-entry as of commit (git archive into a temporary
// directory, then go build there) into bin.dir and returns the binary's path. A commit this
// clone lacks (a shallow clone) fails the test when CI is set, and skips it otherwise.
func buildRelease(t *testing.T, commit string) string {
	t.Helper()
	unavailable := func(why string) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("the previous release %s cannot be built: %s (CI is set: the rolling upgrade must run; fetch the whole history, e.g. actions/checkout with fetch-depth: 0, or git fetch --unshallow)", commit, why)
		}
		t.Skipf("the previous release %s cannot be built: %s (a shallow clone? git fetch --unshallow)", commit, why)
	}
	if _, err := exec.LookPath("git"); err != nil {
		unavailable("no git: " + err.Error())
	}
	if out, err := exec.Command("git", "-C", bin.root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		unavailable(fmt.Sprintf("commit not in the clone at %s: %v %s", bin.root, err, strings.TrimSpace(string(out))))
	}
	start := time.Now()
	src := t.TempDir()
	archive := exec.Command("git", "-C", bin.root, "archive", commit)
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	var archErr strings.Builder
	archive.Stderr = &archErr
	if err := archive.Start(); err != nil {
		t.Fatalf("git archive %s: %v", commit, err)
	}
	untarOut, untarErr := untar.CombinedOutput()
	if err := archive.Wait(); err != nil {
		t.Fatalf("git archive %s: %v: %s", commit, err, archErr.String())
	}
	if untarErr != nil {
		t.Fatalf("tar -x of git archive %s: %v: %s", commit, untarErr, untarOut)
	}
	out := filepath.Join(bin.dir, "fenec-entry-"+commit)
	build := exec.Command("go", "build", "-o", out, "./cmd/fenec-entry")
	build.Dir = src
	// No VCS in an archive; its go.sum may lack what this build's module cache resolved.
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/fenec-entry of %s: %v\n%s", commit, err, b)
	}
	t.Logf("built fenec-entry %s (the previous release) in %v", commit, time.Since(start).Round(100*time.Millisecond))
	return out
}

// phases names the spans of a scenario, for figures by phase.
type phases struct {
	mu    sync.Mutex
	names []string
	at    []time.Time
}

func (p *phases) begin(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.names, p.at = append(p.names, name), append(p.at, time.Now())
}

// of is the index of the phase under way at t (0 before the first began).
func (p *phases) of(t time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := 0
	for j, a := range p.at {
		if !t.Before(a) {
			i = j
		}
	}
	return i
}

// seenWatch reads the stand-in's record of requests (GET /_standin/seen) as the scenario
// runs, so that no record is lost to its capacity: for each request id the first record of
// it from outside (no Fenec-Router: an entry's try) and whether a router relayed it (a record
// with From set).
type seenWatch struct {
	h       *harness
	mu      sync.Mutex
	cursor  uint64
	first   map[string]seen // request id -> first record from an entry
	relayed map[string]bool // request id -> some router relayed it
	gap     string          // records forgotten before they were read
	errs    int
	stop    chan struct{}
	done    chan struct{}
}

func (h *harness) watchSeen() *seenWatch {
	w := &seenWatch{h: h, first: map[string]seen{}, relayed: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			w.read()
			select {
			case <-w.stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return w
}

// read takes the records since the cursor. Not h.seenSince: it runs off the test goroutine.
func (w *seenWatch) read() {
	w.mu.Lock()
	defer w.mu.Unlock()
	var xs []seen
	if err := w.h.admin(http.MethodGet, "seen", url.Values{"since": {strconv.FormatUint(w.cursor, 10)}}, &xs); err != nil {
		w.errs++
		return
	}
	for _, x := range xs {
		if x.Seq != w.cursor+1 && w.gap == "" {
			w.gap = fmt.Sprintf("records %d to %d forgotten before read", w.cursor+1, x.Seq-1)
		}
		w.cursor = x.Seq
		if x.From != "" {
			w.relayed[x.RequestID] = true
			continue
		}
		if _, ok := w.first[x.RequestID]; !ok {
			w.first[x.RequestID] = x
		}
	}
}

// end stops the watch after one last read.
func (w *seenWatch) end() {
	close(w.stop)
	<-w.done
	w.read()
}

// wasRelayed: the first region an entry asked for the request (a request that reached no
// router is not counted: ok false) was not the tenant's home, or a router relayed it.
func (w *seenWatch) wasRelayed(r *record, homes []string) (relayed, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f, ok := w.first[r.ID]
	if !ok {
		return false, false
	}
	return w.relayed[r.ID] || !slices.Contains(homes, f.Region), true
}

// relayShare checks that requests for tenants already heard (some entry had answered for the
// tenant, with a router's answer, before the request began) were not relayed: at most
// maxRelayPermille of them in each phase. learnIDs are the scenario's first requests for
// tenants heard nowhere, which an entry on another continent than the home must relay: the
// proof that the watch sees relays.
func (h *harness) relayShare(s *summary, w *seenWatch, ph *phases, learnIDs []string) {
	heard := map[string]time.Time{}
	for _, r := range h.rec.records() {
		if r.Shard && r.Status > 0 && r.Status < 500 && r.Err == "" {
			if at, ok := heard[r.Tenant]; !ok || r.End.Before(at) {
				heard[r.Tenant] = r.End
			}
		}
	}
	type count struct{ n, relayed int }
	byPhase := make([]count, len(ph.names))
	byEntry := map[string]*count{}
	var total count
	var examples []string
	for _, r := range h.rec.records() {
		at, ok := heard[r.Tenant]
		if r.Client < 0 || !ok || !r.Start.After(at) {
			continue
		}
		relayed, reached := w.wasRelayed(r, h.dirLog.homes(r.Tenant, r.Start, r.End))
		if !reached {
			continue
		}
		i := ph.of(r.Start)
		c := byEntry[r.Entry]
		if c == nil {
			c = &count{}
			byEntry[r.Entry] = c
		}
		byPhase[i].n++
		c.n++
		total.n++
		if relayed {
			byPhase[i].relayed++
			c.relayed++
			total.relayed++
			if len(examples) < 10 {
				examples = append(examples, fmt.Sprintf("%s %s %s via %s at +%s (%s)", r.Op, r.ID, r.Tenant, r.Entry,
					r.Start.Sub(h.rec.t0).Round(100*time.Millisecond), ph.names[i]))
			}
		}
	}
	share := func(c count) string {
		if c.n == 0 {
			return "0/0"
		}
		return fmt.Sprintf("%d/%d (%.3f %%)", c.relayed, c.n, 100*float64(c.relayed)/float64(c.n))
	}
	var parts []string
	for i, c := range byPhase {
		parts = append(parts, ph.names[i]+" "+share(c))
		if c.n == 0 {
			s.fail("relay share: no request for a heard tenant reached a router in phase %q: nothing measured", ph.names[i])
		} else if c.relayed*1000 > maxRelayPermille*c.n {
			s.fail("relay share in phase %q: %s of the requests for tenants already heard were relayed (bound %d in 1,000)",
				ph.names[i], share(c), maxRelayPermille)
		}
	}
	var ents []string
	for _, e := range h.entries {
		if c := byEntry[e.name]; c != nil {
			ents = append(ents, e.name+" "+share(*c))
		}
	}
	h.logf("relay share for tenants already heard: %s in all; by phase: %s; by entry: %s",
		share(total), strings.Join(parts, ", "), strings.Join(ents, ", "))
	if len(examples) > 0 {
		h.logf("relayed: %s", strings.Join(examples, "; "))
	}
	learnRelayed := 0
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range learnIDs {
		if r := w.first[id]; w.relayed[id] || r.Region != "" && r.Region != h.dirLog.home(r.Tenant) {
			learnRelayed++
		}
	}
	h.logf("the watch saw %d of the %d first requests for unheard tenants relayed (requests seen: %d, read errors: %d)",
		learnRelayed, len(learnIDs), len(w.first), w.errs)
	if learnRelayed == 0 {
		s.fail("relay share: the watch saw none of the %d first requests for unheard tenants relayed: it cannot tell a relay", len(learnIDs))
	}
	if w.gap != "" {
		s.fail("relay share: the stand-in's seen records: %s", w.gap)
	}
}

// repairRounds is an entry's successful repair rounds (pulled or in_sync) and failed ones.
func (e *entryProc) repairRounds() (ok, failed int) {
	for _, l := range e.metricLines("fenec_entry_repair_rounds_total") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch {
		case strings.Contains(f[0], `result="pulled"`), strings.Contains(f[0], `result="in_sync"`):
			ok += int(v)
		case strings.Contains(f[0], `result="error"`):
			failed += int(v)
		}
	}
	return ok, failed
}

// snapshotFetched is how many times the entry fetched a peer's table whole
// (fenec_entry_snapshot_fetches_total{result="ok"}).
func (e *entryProc) snapshotFetched() int {
	for _, l := range e.metricLines("fenec_entry_snapshot_fetches_total") {
		if f := strings.Fields(l); len(f) == 2 && strings.Contains(f[0], `result="ok"`) {
			v, _ := strconv.ParseFloat(f[1], 64)
			return int(v)
		}
	}
	return 0
}

// nonZero keeps the metric lines whose value is not 0.
func nonZero(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !strings.HasSuffix(l, " 0") {
			out = append(out, l)
		}
	}
	return out
}

// rolling is the rolling scenario's state: the two binaries and what each entry runs.
type rolling struct {
	h        *harness
	tr       *traffic
	old, cur string
	runs     map[string]string // entry -> "old" or "new"
	learnIDs []string
}

func (ro *rolling) version(e *entryProc) string { return ro.runs[e.name] }

// learn makes e hear a tenant no entry holds yet (its first request, relayed unless e's
// continent is the home's) and returns the record.
func (ro *rolling) learn(e *entryProc, tenant string) *record {
	h := ro.h
	r := h.rec.probe(e, tenant, "learn")
	ro.learnIDs = append(ro.learnIDs, r.ID)
	if !r.Shard || r.Status >= 500 || r.Err != "" {
		h.t.Errorf("learning %s at %s (%s): %s", tenant, e.name, ro.version(e), r.outcome())
	}
	return r
}

// crosses learns tenant at e and waits for every entry to hold it, with equal digests.
func (ro *rolling) crosses(e *entryProc, tenant string) {
	h := ro.h
	ro.learn(e, tenant)
	others := ""
	for _, o := range h.entries {
		if o != e {
			others += fmt.Sprintf(" %s (%s)", o.name, ro.version(o))
		}
	}
	if a, took := h.waitAgree(homeSpread, fmt.Sprintf("%s learned at %s (%s)", tenant, e.name, ro.version(e))); a.ok {
		h.logf("%s learned at %s (%s) reached%s in %v (%s)", tenant, e.name, ro.version(e), others, took.Round(10*time.Millisecond), a.line)
	}
}

// holds waits until e holds tenant's home: a GET of /status.json cannot name the tenants, so
// the count of homes held must reach want.
func (h *harness) holds(e *entryProc, want int, what string) {
	h.waitStatus(e, homeSpread, what, func(s statusDoc) bool { return s.Homes.Held >= want })
}

// restart is the operator's restart of e on binary (version: "old" or "new"): SIGTERM while
// clients go on sending to e through its drain (every request it accepts must be answered;
// dials are refused once it stops listening), exit 0 within 10 s, the same flags, ports and
// --state-dir, ready. down, if not nil, runs while e is stopped. The restarted entry must be
// ready holding at least the homes it held when it stopped, and the cluster whole again; then
// clients use it again. A repair round must then run between it and each peer (both sides
// count one), across versions when they differ.
func (ro *rolling) restart(e *entryProc, binary, version string, down func()) {
	h, t := ro.h, ro.h.t
	from := ro.version(e)
	before, _ := e.status()
	heldBefore := before.Homes.Held
	stopping := time.Now()
	if !e.stop(10 * time.Second) {
		t.Errorf("%s (%s) did not exit within 10 s of SIGTERM (killed)", e.name, from)
	} else if code := e.exitCode(); code != 0 {
		t.Errorf("%s (%s) exited %d after SIGTERM, want 0 (see %s)", e.name, from, code, e.logPath)
	}
	// Once e has exited, and until it is ready again in a whole cluster, clients avoid it: the
	// relay share counts every request for a heard tenant that reached a router, and one sent
	// to the new process before it holds its table would be relayed for a reason that is not
	// the version mix; and the check of what it holds at ready wants its table from its state
	// file and peers, not from its own clients. (Its drain, before the exit, had the traffic.)
	ro.tr.setAvoid(e.name, true)
	h.logf("%s (%s) stopped by SIGTERM under load: exit %d after %v; it held %d homes (%d local, %d gossip)", e.name, from, e.exitCode(),
		time.Since(stopping).Round(10*time.Millisecond), heldBefore, before.Homes.Local, before.Homes.Gossip)
	if down != nil {
		down()
	}
	peersOK := map[string]int{}
	for _, o := range h.entries {
		if o != e {
			peersOK[o.name], _ = o.repairRounds()
		}
	}
	e.binary = binary
	e.release = ""
	if binary == ro.old {
		e.release = previousRelease
	}
	ro.runs[e.name] = version
	e.start(t)
	var atReady statusDoc
	took, ok := h.waitStatus(e, 10*time.Second, e.name+" ("+version+") ready", func(s statusDoc) bool {
		atReady = s
		return s.Ready
	})
	h.logf("%s restarted %s -> %s: ready %v after its start, holding %d homes (%d local, %d gossip), digest %s; its state file: %s",
		e.name, from, version, took.Round(10*time.Millisecond), atReady.Homes.Held, atReady.Homes.Local, atReady.Homes.Gossip, atReady.Homes.Digest,
		strings.Join(nonZero(e.metricLines("fenec_entry_state_restore", "fenec_entry_state_restored_homes")), ", "))
	// The state file crosses versions: what the other version wrote at its drain is restored,
	// not moved aside (a start without it would still be ready, from a peer's table).
	if restored := e.metricLines("fenec_entry_state_restore"); !slices.Contains(restored, `fenec_entry_state_restore{result="restored"} 1`) {
		t.Errorf("%s (%s) did not restore the state file %s wrote: %s", e.name, version, from, strings.Join(nonZero(restored), ", "))
	}
	if ok && atReady.Homes.Held < heldBefore {
		t.Errorf("%s (%s) ready holding %d homes, fewer than the %d it held when it stopped (%s)", e.name, version, atReady.Homes.Held, heldBefore, from)
	}
	rejoin := h.waitCluster(15 * time.Second)
	h.logf("every entry sees three alive members %v after %s was ready", rejoin.Round(10*time.Millisecond), e.name)
	if a, took := h.waitAgree(homeSpread, e.name+" restarted ("+version+")"); a.ok {
		h.logf("tables agree %v after the cluster was whole (%s)", took.Round(10*time.Millisecond), a.line)
	}
	ro.tr.setAvoid(e.name, false)

	// Repair across the restart: the restarted entry with a peer that came alive, each peer
	// with it (its only member to come alive meanwhile). The previous release repairs only
	// with the peers that come alive after its first look, which peers already alive when it
	// starts are not (this build adds a round after its table's fetch): restarted onto it, the
	// entry may count no round, and its fetch of a peer's table stands for it.
	var line []string
	done := func() bool {
		line = line[:0]
		all := true
		mine, failed := e.repairRounds()
		line = append(line, fmt.Sprintf("%s (%s) %d ok %d failed", e.name, version, mine, failed))
		if mine == 0 && !(e.release != "" && e.snapshotFetched() > 0) {
			all = false
		}
		for _, o := range h.entries {
			if o == e {
				continue
			}
			n, f := o.repairRounds()
			line = append(line, fmt.Sprintf("%s (%s) %d ok since (%d failed in all)", o.name, ro.version(o), n-peersOK[o.name], f))
			if n <= peersOK[o.name] {
				all = false
			}
		}
		return all
	}
	deadline := time.Now().Add(rejoinSlack)
	for !done() && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if !done() {
		t.Errorf("repair rounds across %s's restart (%s), within %v: %s", e.name, version, rejoinSlack, strings.Join(line, ", "))
	} else {
		h.logf("repair rounds since %s's restart: %s; %s", e.name, strings.Join(line, ", "),
			strings.Join(e.metricLines("fenec_entry_snapshot_fetches_total"), ", "))
	}
}

// upgradeInPlace upgrades e in place (SIGUSR2; docs/OPERATIONS.md, "Upgrading the binary in
// place") under load, clients never avoiding it: binary is put at the path e runs from by a
// rename, then SIGUSR2. The new process must write its PID to --pid-file, the old one must
// exit 0 within 25 s (its drain, and 10 s for open requests) and the new one serve as version
// (its /status.json) with the homes the old one held, counting the upgrade; the peers must
// list e alive at every look (every 50 ms) throughout. No request to e may fail meanwhile,
// not even a refused dial, but event streams the old process ends at its drain (the loss
// check, disHandedOver).
func (ro *rolling) upgradeInPlace(e *entryProc, binary, version string) {
	h, t := ro.h, ro.h.t
	if e.pidFile == "" || e.binary == "" || e.binary == bin.entry {
		t.Fatalf("%s: an upgrade in place needs a binary path of its own and --pid-file", e.name)
	}
	// The new process outlives its parent, the process the suite started: the suite must be
	// its reaper to see it end and how (adopt).
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", err)
	}
	from := ro.version(e)
	before, _ := e.status()
	oldPID, oldDone := e.process()
	if pid, err := readPIDFile(e.pidFile); err != nil || pid != oldPID {
		t.Errorf("%s (%s): --pid-file says %d (%v), the process is %d", e.name, from, pid, err, oldPID)
	}
	replaceFile(t, binary, e.binary)

	var mu sync.Mutex
	looks, notAlive := 0, map[string]int{}
	stopWatch := make(chan struct{})
	var wg sync.WaitGroup
	for _, o := range h.entries {
		if o == e {
			continue
		}
		wg.Go(func() {
			for {
				select {
				case <-stopWatch:
					return
				case <-time.After(50 * time.Millisecond):
				}
				st, err := o.status()
				if err != nil {
					continue // the peer's own admin: not what this measures
				}
				mu.Lock()
				looks++
				if m := st.member(e.name); m != "alive" {
					notAlive[o.name+" listed "+e.name+" "+strconv.Quote(m)]++
				}
				mu.Unlock()
			}
		})
	}

	d := h.dis.begin(e.name, disHandedOver)
	asked := time.Now()
	e.signal(syscall.SIGUSR2)
	newPID := 0
	ctx, cancel := context.WithTimeout(context.Background(), 35*time.Second)
	took, err := testutil.Poll(ctx, 20*time.Millisecond, e.name+"'s --pid-file names a new process", func() error {
		pid, err := readPIDFile(e.pidFile)
		if err == nil && pid == oldPID {
			err = fmt.Errorf("still %d", pid)
		}
		newPID = pid
		return err
	})
	cancel()
	if err != nil {
		t.Fatalf("upgrade in place of %s (%s): %v (see %s)", e.name, from, err, e.logPath)
	}
	select {
	case <-oldDone:
	case <-time.After(25 * time.Second):
		t.Errorf("%s (%s): the old process did not exit within 25 s of the new one's PID", e.name, from)
		syscall.Kill(oldPID, syscall.SIGKILL)
		<-oldDone
	}
	h.dis.endAt(d, e.exitTime())
	oldExit, oldGone := e.exitCode(), e.exitTime().Sub(asked)
	if oldExit != 0 {
		t.Errorf("%s (%s): the old process exited %d after the upgrade in place, want 0 (see %s)", e.name, from, oldExit, e.logPath)
	}
	e.adopt(newPID)
	ro.runs[e.name] = version
	var st statusDoc
	h.waitStatus(e, 10*time.Second, e.name+" ("+version+") ready after the upgrade in place", func(s statusDoc) bool {
		st = s
		return s.Ready
	})
	if st.Version != inPlaceVersion || st.Homes.Held < before.Homes.Held {
		t.Errorf("%s after the upgrade in place: /status.json says version %q, %d homes; want %q and the %d homes the old process held",
			e.name, st.Version, st.Homes.Held, inPlaceVersion, before.Homes.Held)
	}
	counted := e.metricLines("fenec_entry_upgrades_total")
	if !slices.Contains(counted, `fenec_entry_upgrades_total{result="ready"} 1`) {
		t.Errorf("%s after the upgrade in place counts %s, want one ready", e.name, strings.Join(counted, ", "))
	}
	time.Sleep(time.Second) // the peers' looks go on a while with the new process alone
	close(stopWatch)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for what, n := range notAlive {
		t.Errorf("upgrade in place of %s: %s at %d of %d looks", e.name, what, n, looks)
	}
	h.logf("%s upgraded in place (SIGUSR2) %s -> %s under load: PID %d -> %d, the new PID written %v after the signal, the old process exited %d %v after it; "+
		"the new one ready as %s holding %d homes (the old held %d), %s; peers listed %s alive at all %d looks",
		e.name, from, version, oldPID, newPID, took.Round(10*time.Millisecond), oldExit, oldGone.Round(10*time.Millisecond),
		st.Version, st.Homes.Held, before.Homes.Held, strings.Join(nonZero(counted), ", "), e.name, looks)
}

// inPlaceVersion is main.version of the build an upgrade in place puts in place (buildStamped):
// the new process's /status.json shows it, so the new process runs the file put at the path.
const inPlaceVersion = "chaos-in-place"

// buildStamped builds this tree's ./cmd/fenec-entry with main.version set to version (the
// compiled packages come from the build cache: a link).
func buildStamped(t *testing.T, version string) string {
	t.Helper()
	start := time.Now()
	out := filepath.Join(bin.dir, "fenec-entry-"+version)
	cmd := exec.Command("go", "build", "-ldflags", "-X main.version="+version, "-o", out, "./cmd/fenec-entry")
	cmd.Dir = bin.root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/fenec-entry (version %s): %v\n%s", version, err, b)
	}
	t.Logf("built fenec-entry as version %s in %v", version, time.Since(start).Round(100*time.Millisecond))
	return out
}

// replaceFile puts a copy of from at to by a rename, as a package manager does: a process
// running from to keeps its own file.
func replaceFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to+".new", b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(to+".new", to); err != nil {
		t.Fatal(err)
	}
}

func readPIDFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// markCrosses: ap's routers refuse; by is asked for markTenant, and marks ap failing; every
// other entry must list ap failing as seen by by within homeSpread. Then ap's routers answer
// again; once reads at clearer ask ap first again, clearer is asked for markTenant, gets ap's
// answer and clears the mark, and within marksClear no entry may list ap failing.
func (ro *rolling) markCrosses(by, clearer *entryProc) {
	h, t := ro.h, ro.h.t
	const region = "ap"
	if h.dirLog.home(markTenant) != region {
		t.Fatalf("%s is not homed in %s", markTenant, region)
	}
	for _, r := range h.routersOf(region) {
		h.setFault(r.Addr, "refuse")
	}
	marking := time.Now()
	r := h.rec.probe(by, markTenant, "mark")
	h.logf("%s's routers refuse; %s via %s (%s): %s", region, markTenant, by.name, ro.version(by), r.outcome())
	var wg sync.WaitGroup
	for _, e := range h.entries {
		wg.Go(func() {
			took, ok := h.waitStatus(e, homeSpread, fmt.Sprintf("%s (%s) lists %s failing as seen by %s (%s)", e.name, ro.version(e), region, by.name, ro.version(by)),
				func(s statusDoc) bool {
					return slices.ContainsFunc(s.Marks, func(m markDoc) bool { return m.Region == region && m.Observer == by.name })
				})
			if ok && e != by {
				h.logf("%s (%s) lists %s failing, seen by %s (%s), %v after the request", e.name, ro.version(e), region, by.name, ro.version(by),
					took.Round(10*time.Millisecond))
			}
		})
	}
	wg.Wait()
	for _, r := range h.routersOf(region) {
		h.setFault(r.Addr, "ok")
	}
	h.waitStatus(clearer, readBackoff+3*time.Second, clearer.name+" reads ask "+region+" first again",
		func(s statusDoc) bool { return !s.markedForReads(region) })
	r = h.rec.probe(clearer, markTenant, "clear")
	h.logf("%s answers again; %s via %s (%s): %s", region, markTenant, clearer.name, ro.version(clearer), r.outcome())
	for _, e := range h.entries {
		wg.Go(func() {
			took, ok := h.waitStatus(e, marksClear, fmt.Sprintf("%s (%s) lists %s failing no more after %s (%s) cleared it", e.name, ro.version(e), region, clearer.name, ro.version(clearer)),
				func(s statusDoc) bool {
					return !slices.ContainsFunc(s.Marks, func(m markDoc) bool { return m.Region == region })
				})
			if ok && e != clearer {
				h.logf("%s (%s) lists %s failing no more %v after %s (%s) cleared it", e.name, ro.version(e), region, took.Round(10*time.Millisecond),
					clearer.name, ro.version(clearer))
			}
		})
	}
	wg.Wait()
	h.logf("mark of %s: made at %s (%s), cleared at %s (%s), %v in all", region, by.name, ro.version(by), clearer.name, ro.version(clearer),
		time.Since(marking).Round(10*time.Millisecond))
}

// 7. A rolling upgrade from the previous release under load: the fleet starts on
// previousRelease, each entry in turn is restarted (SIGTERM, clients sending to it through
// its drain) on this build with the same flags, ports and --state-dir; then b is upgraded in
// place (SIGUSR2) to a build stamped inPlaceVersion, and goes back to the previous release.
// Homes learned at either version while the other runs, a home learned while an entry is
// down, and a region's mark and its clear must cross between versions; no request for a
// tenant already heard may be relayed (at most 0.1 % in each phase); no request this build
// accepted may go unanswered, none may fail in the upgrade in place; and the invariants.
func TestChaos7RollingUpgrade(t *testing.T) {
	old := buildRelease(t, previousRelease)
	inPlace := buildStamped(t, inPlaceVersion)
	general := []string{"t01", "t02", "t04", "t05", "t07", "t08"} // eu and us: ap is for the mark
	late := []string{"t06", "t09", "t10", "t11", "t12"}           // heard nowhere until learned below
	h := newHarnessWith(t, "rolling-upgrade", scenarioSeed(707), func(e *entryProc) {
		dir := filepath.Join(t.TempDir(), "state-"+e.name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		e.args = append(e.args, "--state-dir", dir)
		e.binary, e.release = old, previousRelease
	})
	ro := &rolling{h: h, old: old, cur: bin.entry, runs: map[string]string{"a": "old", "b": "old", "c": "old"}}
	a, b, c := h.entry("a"), h.entry("b"), h.entry("c")
	h.logf("a, b, c run the previous release %s (%s), each with its own --state-dir", previousRelease, old)
	h.warmup(append(slices.Clone(general), markTenant))
	sw := h.watchSeen()
	defer func() {
		select {
		case <-sw.done:
		default:
			close(sw.stop)
			<-sw.done
		}
	}()
	ph := &phases{}
	ph.begin("old fleet")
	ro.tr = h.startTraffic(h.seed, clients, general)
	time.Sleep(3 * time.Second)

	// a: old -> new. While it is down, old b learns a tenant: a's state file lacks it, and a
	// must get it from old peers (the joiner's table, or repair).
	ph.begin("a upgrading")
	ro.restart(a, bin.entry, "new", func() {
		want := len(h.learned()) + 1
		ro.learn(b, late[0])
		h.holds(c, want, fmt.Sprintf("c (old) holds %s, learned at b (old) while a was down", late[0]))
		h.logf("%s learned at b (old) while a was down", late[0])
	})
	ph.begin("a new, b c old")
	ro.crosses(a, late[1]) // new -> old
	ro.crosses(c, late[2]) // old -> new
	ro.markCrosses(c, a)   // a mark made at an old entry, cleared at a new one
	time.Sleep(2 * time.Second)

	// b runs this build from a path of its own, with --pid-file (the previous release has no
	// such flag), for its upgrade in place below.
	bPath := filepath.Join(t.TempDir(), "fenec-entry")
	replaceFile(t, bin.entry, bPath)
	b.pidFile = filepath.Join(t.TempDir(), "b.pid")
	ph.begin("b upgrading")
	ro.restart(b, bPath, "new", nil)
	ph.begin("a b new, c old")
	time.Sleep(3 * time.Second)

	ph.begin("c upgrading")
	ro.restart(c, bin.entry, "new", nil)
	ph.begin("all new")
	time.Sleep(3 * time.Second)

	// b: new -> new again, in place (SIGUSR2), the TLS entry under load with no client
	// avoiding it.
	ph.begin("b upgrading in place")
	ro.upgradeInPlace(b, inPlace, "new in place")
	ph.begin("all new, b in place")
	time.Sleep(2 * time.Second)

	// b: new -> old, the way back (SIGTERM to the process the upgrade in place started). While
	// it is down, new a learns a tenant: old b must get it from new peers.
	b.pidFile = ""
	ph.begin("b downgrading")
	ro.restart(b, old, "old", func() {
		want := len(h.learned()) + 1
		ro.learn(a, late[3])
		h.holds(c, want, fmt.Sprintf("c (new) holds %s, learned at a (new) while b was down", late[3]))
		h.logf("%s learned at a (new) while b was down", late[3])
	})
	ph.begin("b old, a c new")
	ro.crosses(b, late[4]) // old -> new
	ro.markCrosses(a, b)   // a mark made at a new entry, cleared at an old one
	time.Sleep(3 * time.Second)

	w := h.watchConvergence()
	ro.tr.stop()
	sw.end()
	h.finish(w, repairMax+rejoinSlack, func(s *summary) {
		h.relayShare(s, sw, ph, ro.learnIDs)
		var runs []string
		for _, e := range h.entries {
			runs = append(runs, fmt.Sprintf("%s %s (%d starts)", e.name, ro.runs[e.name], e.starts))
		}
		h.logf("at the end: %s", strings.Join(runs, ", "))
	})
}
