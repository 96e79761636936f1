package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/proxy"
)

// An entry with --workers N is a master and N worker processes (docs/DECISIONS.md, "A master
// and a worker per CPU"). The master is the entry as the cluster and the operator see it: the
// serf member, the home table, the admin listener, --state-dir, the DNS names, reloads and
// the drain. It binds the client listener N times (SO_REUSEPORT: the kernel spreads new
// connections over the sockets) and serves no client. Each worker is this binary again
// (WorkerArg), on one P, with one of those sockets and a Unix socket to the master: it serves
// clients with its own copy of the home table, which the master keeps in step (every change,
// through homes.Config.Mirror), and sends up what it hears from routers (homes, marks), which
// the master adopts and gossips. A worker that exits is started again; its socket stays open
// in the master meanwhile, so connections the kernel gives it wait for the new worker rather
// than being refused.

// WorkerArg is the first argument of a worker process: the command's main hands such a process
// to RunWorker.
const WorkerArg = "_worker"

// WorkersAuto is Config.Workers's default: a worker per CPU the process may use, none on
// one CPU, and none where the kernel does not spread one port's connections over its sockets
// (SO_REUSEPORT balances on Linux only: reusePortSpreads).
const WorkersAuto = -1

// autoWorkers is WorkersAuto for a process of procs Ps (runtime.GOMAXPROCS(0) at start: the
// CPUs it may use, or the operator's GOMAXPROCS).
func autoWorkers(procs int) int {
	if procs <= 1 || !reusePortSpreads {
		return 0
	}
	return min(procs, MaxWorkers)
}

// Bounds of the master's side.
const (
	MaxWorkers         = 256              // --workers
	workerPendingMax   = 1 << 16          // changes waiting for one worker; past it the worker's table is sent again whole
	workerStartTimeout = 10 * time.Second // a worker not serving within it fails the start (or is started again)
	workerWriteTimeout = 5 * time.Second  // a worker that takes no frame within it is stopped and started again
	workerReportWait   = 2 * time.Second  // a report not back within it: the worker's last one is used
	workerReportEvery  = 2 * time.Second  // reports are also asked this often: a dead worker's counters are this recent, a stuck one is found
	workerMissedKill   = 5                // a worker that missed this many of those in a row is killed (and started again)
	workerRestartMin   = 100 * time.Millisecond
	workerRestartMax   = 5 * time.Second
	workerExitWait     = 2 * time.Second // after the grace, a worker still running is killed
)

// workerSet is the master's side: the client sockets and one workerProc each.
type workerSet struct {
	n     *Node
	exe   string
	socks []*os.File // the client sockets, one per worker; open until the master stops
	lns   []net.Listener
	procs []*workerProc
	ids   atomic.Uint64
	// stopping: no worker is started again from now on; stopped is closed then (once).
	stopping atomic.Bool
	stopped  chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	// retired holds the counters and histograms of worker processes that exited, from their
	// last report (workermetrics.go): bounded by the families' labels, not by the exits.
	retiredMu sync.Mutex
	retired   []*dto.MetricFamily

	restarts atomic.Uint64
	resyncs  atomic.Uint64
}

// workerProc is one worker's slot: the process running in it now, if any.
type workerProc struct {
	set *workerSet
	idx int

	mu      sync.Mutex
	cmd     *exec.Cmd // the process running in the slot; nil while none runs
	live    bool      // changes are queued for it (from its start until its exit)
	pending []wireHome
	marks   []wireMark
	ctrl    []wireMsg // control messages, in order, before the pending changes
	resync  bool      // the pending changes were too many: send the whole table
	asks    map[uint64]chan *wireReport
	last    *wireReport // the latest report of the process running now
	kick    chan struct{}

	// The CPU and memory of the slot's processes, for /metrics (workermetrics.go), under mu:
	// exitedCPU is the CPU time of the processes that exited (their rusage); lastCPU and
	// lastRSS the latest reading of the one running now; reaping is set while its exit is
	// waited for, when its pid may already name another process.
	exitedCPU time.Duration
	lastCPU   time.Duration
	lastRSS   int64
	reaping   bool

	serving  atomic.Bool
	served   atomic.Bool   // the process running now said it serves (wServing)
	restarts atomic.Uint64 // processes started again in this slot
	missed   atomic.Int32  // heartbeat reports the process running now did not answer in a row
	started  chan error    // the first start's outcome (nil: serving); capacity 1
	once     sync.Once     // guards the send on started
}

// startedAs reports the first start's outcome to startWorkers, once.
func (p *workerProc) startedAs(err error) { p.once.Do(func() { p.started <- err }) }

// startWorkers binds the client sockets and starts the workers; it returns once every
// worker serves, or with the first failure (then nothing is left running).
func (n *Node) startWorkers(ctx context.Context) (net.Addr, error) {
	exe, err := masterExe()
	if err != nil {
		return nil, fmt.Errorf("--workers: the binary to start: %w", err)
	}
	s := &workerSet{n: n, exe: exe, stopped: make(chan struct{})}
	lc := net.ListenConfig{Control: reusePort}
	addr := n.cfg.Listen
	if !n.cfg.ReusePort {
		// The workers' sockets share the port (SO_REUSEPORT), and so would any other's that
		// asks: without --reuse-port the port must be free, as a one-process entry's must.
		// A plain bind fails if any socket holds it; the sockets follow at once.
		var plain net.ListenConfig
		l, err := plain.Listen(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("--listen: %w", err)
		}
		addr = l.Addr().String()
		l.Close()
	}
	for i := range n.cfg.Workers {
		l, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			s.closeSockets()
			return nil, fmt.Errorf("--listen: %w", err)
		}
		if i == 0 {
			addr = l.Addr().String() // a port 0 is the kernel's choice once, then the same for all
		}
		f, err := l.(*net.TCPListener).File()
		if err != nil {
			l.Close()
			s.closeSockets()
			return nil, fmt.Errorf("--listen: %w", err)
		}
		s.lns = append(s.lns, l)
		s.socks = append(s.socks, f)
	}
	for i := range n.cfg.Workers {
		s.procs = append(s.procs, &workerProc{set: s, idx: i, kick: make(chan struct{}, 1), started: make(chan error, 1),
			asks: map[uint64]chan *wireReport{}})
	}
	n.workers.Store(s)
	for _, p := range s.procs {
		s.wg.Go(p.supervise)
	}
	t := time.NewTimer(workerStartTimeout)
	defer t.Stop()
	for _, p := range s.procs {
		select {
		case err := <-p.started:
			if err != nil {
				s.stop(0)
				return nil, fmt.Errorf("--workers: worker %d: %w", p.idx, err)
			}
		case <-t.C:
			s.stop(0)
			return nil, fmt.Errorf("--workers: worker %d not serving within %v", p.idx, workerStartTimeout)
		case <-ctx.Done():
			s.stop(0)
			return nil, ctx.Err()
		}
	}
	return s.lns[0].Addr(), nil
}

func (s *workerSet) closeSockets() {
	for _, l := range s.lns {
		l.Close()
	}
	for _, f := range s.socks {
		f.Close()
	}
}

// serving reports whether every worker serves now.
func (s *workerSet) serving() bool {
	for _, p := range s.procs {
		if !p.serving.Load() {
			return false
		}
	}
	return true
}

// supervise runs the slot's worker and starts it again when it exits, until the set stops.
func (p *workerProc) supervise() {
	wait := workerRestartMin
	first := true
	for !p.set.stopping.Load() {
		t0 := time.Now()
		err := p.run(first)
		if first {
			first = false
			if !p.serving.Load() && p.set.stopping.Load() {
				return
			}
		}
		if p.set.stopping.Load() {
			return
		}
		p.set.restarts.Add(1)
		p.restarts.Add(1)
		if time.Since(t0) > time.Minute {
			wait = workerRestartMin
		}
		p.set.n.log.Error().Int("worker", p.idx).Str("error", errText(err)).Stringer("restart_in", wait).
			Msg("worker stopped: starting it again")
		select {
		case <-time.After(wait):
		case <-p.set.stopped:
			return
		}
		wait = min(2*wait, workerRestartMax)
	}
}

func errText(err error) string {
	if err == nil {
		return "exited"
	}
	return err.Error()
}

// run starts one worker process and serves its control socket until it exits.
func (p *workerProc) run(first bool) error {
	s := p.set
	fds, err := controlSocketpair()
	if err != nil {
		return p.fail(first, err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "worker-control"), os.NewFile(uintptr(fds[1]), "worker-control")
	conn, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		theirs.Close()
		return p.fail(first, err)
	}
	cmd := exec.Command(s.exe, WorkerArg)
	cmd.Args[0] = os.Args[0]                            // what ps shows: "fenec-entry _worker"
	cmd.ExtraFiles = []*os.File{theirs, s.socks[p.idx]} // fd 3 and fd 4
	cmd.Env = workerEnv(os.Environ())
	cmd.Stdout, cmd.Stderr = s.n.workerOut, s.n.workerOut
	cmd.SysProcAttr = workerProcAttr()
	if err := cmd.Start(); err != nil {
		theirs.Close()
		conn.Close()
		return p.fail(first, err)
	}
	theirs.Close()

	// Not under p.mu: workerInit takes reloadMu, which a reload holds while it takes p.mu.
	init, err := s.n.workerInit(p.idx)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		conn.Close()
		return p.fail(first, err)
	}
	p.served.Store(false)
	p.missed.Store(0)
	p.mu.Lock()
	p.cmd, p.live, p.resync, p.last = cmd, true, true, nil
	p.lastCPU, p.lastRSS, p.reaping = 0, 0, false
	p.pending, p.marks = nil, nil
	// A reload between workerInit and here queued nothing for this process (not live yet):
	// the state and the settings of this moment follow the init.
	p.ctrl = append(p.ctrl[:0], init, s.n.workerState())
	p.mu.Unlock()
	s.n.reloadMu.Lock()
	p.send(wireMsg{Kind: wSettings, Settings: settingsToWire(s.n.proxy.Routing(), s.n.cur)})
	s.n.reloadMu.Unlock()
	p.poke()

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { p.write(conn, done) })
	readErr := p.read(conn, first)
	close(done)
	conn.Close()
	wg.Wait()
	p.mu.Lock()
	p.reaping = true
	p.mu.Unlock()
	waitErr := cmd.Wait()

	p.mu.Lock()
	if ps := cmd.ProcessState; ps != nil {
		p.exitedCPU += max(ps.UserTime()+ps.SystemTime(), p.lastCPU)
	} else {
		p.exitedCPU += p.lastCPU
	}
	p.lastCPU, p.lastRSS = 0, 0
	p.cmd, p.live = nil, false
	last := p.last
	p.last = nil
	for id, ch := range p.asks {
		close(ch)
		delete(p.asks, id)
	}
	p.mu.Unlock()
	p.serving.Store(false)
	s.retire(last)
	if first {
		p.startedAs(fmt.Errorf("exited before serving: %v", errText(waitErr)))
	}
	if !errors.Is(readErr, io.EOF) && !errors.Is(readErr, net.ErrClosed) {
		return readErr // the socket failed before the process exited
	}
	return waitErr
}

// fail reports a start that failed: on the first start, to startWorkers.
func (p *workerProc) fail(first bool, err error) error {
	if first {
		p.startedAs(err)
	}
	return err
}

// workerEnv is the master's environment for a worker: one P (the point of a worker), and the
// rest as the master has it.
func workerEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, e := range env {
		if !strings.HasPrefix(e, "GOMAXPROCS=") {
			out = append(out, e)
		}
	}
	return append(out, "GOMAXPROCS=1")
}

// poke wakes the slot's writer.
func (p *workerProc) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// send queues a control message for the running worker (dropped when none runs: the next
// one starts from the state of the moment).
func (p *workerProc) send(m wireMsg) bool {
	p.mu.Lock()
	ok := p.live
	if ok {
		p.ctrl = append(p.ctrl, m)
	}
	p.mu.Unlock()
	if ok {
		p.poke()
	}
	return ok
}

// mirror queues a change of the master's table for the running worker.
func (p *workerProc) mirror(c homes.Change, src homes.Source) {
	p.mu.Lock()
	if !p.live || p.resync {
		p.mu.Unlock()
		return // the whole table goes next, with this change in it
	}
	switch c.Kind {
	case homes.ChangeHome:
		p.pending = append(p.pending, homeToWire(c.Home, src))
	case homes.ChangeMark:
		p.marks = append(p.marks, markToWire(c.Mark))
	}
	if len(p.pending)+len(p.marks) > workerPendingMax {
		p.pending, p.marks, p.resync = nil, nil, true
		p.set.resyncs.Add(1)
	}
	p.mu.Unlock()
	p.poke()
}

// write sends the slot's queue to conn until done: control messages first, then the whole
// table if due, then the pending changes.
func (p *workerProc) write(conn net.Conn, done <-chan struct{}) {
	w := bufio.NewWriterSize(conn, 64<<10)
	flush := func(m *wireMsg) error { // a frame; the buffer goes out when full, and at the end
		conn.SetWriteDeadline(time.Now().Add(workerWriteTimeout))
		return writeFrame(w, m)
	}
	for {
		select {
		case <-done:
			return
		case <-p.kick:
		}
		p.mu.Lock()
		ctrl, resync, pending, marks := p.ctrl, p.resync, p.pending, p.marks
		p.ctrl, p.resync, p.pending, p.marks = nil, false, nil, nil
		p.mu.Unlock()
		err := func() error {
			for i := range ctrl {
				if err := flush(&ctrl[i]); err != nil {
					return err
				}
			}
			if resync {
				if err := p.set.n.sendTable(flush); err != nil {
					return err
				}
			}
			for len(pending) > 0 {
				k := min(len(pending), wireBatch)
				if err := flush(&wireMsg{Kind: wHomes, Homes: pending[:k]}); err != nil {
					return err
				}
				pending = pending[k:]
			}
			if len(marks) > 0 {
				if err := flush(&wireMsg{Kind: wMarks, Marks: marks}); err != nil {
					return err
				}
			}
			conn.SetWriteDeadline(time.Now().Add(workerWriteTimeout))
			return w.Flush()
		}()
		if err != nil {
			// A worker that cannot take what it is sent is stopped; its slot starts another.
			p.set.n.log.Error().Int("worker", p.idx).Err(err).Msg("worker control socket: write failed; stopping the worker")
			conn.Close()
			p.kill()
			return
		}
	}
}

func (p *workerProc) kill() {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		cmd.Process.Kill()
	}
}

// read handles what the worker sends until its socket ends.
func (p *workerProc) read(conn net.Conn, first bool) error {
	r := bufio.NewReaderSize(conn, 64<<10)
	t := p.set.n.homes
	for {
		var m wireMsg
		if err := readFrame(r, &m); err != nil {
			return err
		}
		switch m.Kind {
		case wHomes:
			for _, h := range m.Homes {
				if len(h.Tenant) > 0 && len(h.Tenant) <= 255 && h.Origin == p.set.n.cfg.Node {
					t.Adopt(h.home())
				}
			}
		case wMarks:
			for _, mk := range m.Marks {
				t.AdoptMark(mk.mark())
			}
		case wServing:
			p.served.Store(true)
			p.serving.Store(true)
			if first {
				p.startedAs(nil)
			}
			p.set.n.log.Debug().Int("worker", p.idx).Int("pid", p.pid()).Msg("worker serving")
		case wReport:
			if m.Report == nil {
				continue
			}
			p.mu.Lock()
			p.last = m.Report
			ch := p.asks[m.ID]
			delete(p.asks, m.ID)
			p.mu.Unlock()
			if ch != nil {
				ch <- m.Report
			}
		}
	}
}

func (p *workerProc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.cmd.Process != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// report asks the running worker for a report and waits for it until ctx ends; then, or
// when no worker runs, it returns the worker's last one (nil if none). fresh: the worker
// answered this ask.
func (p *workerProc) report(ctx context.Context) (r *wireReport, fresh bool) {
	id := p.set.ids.Add(1)
	ch := make(chan *wireReport, 1)
	p.mu.Lock()
	if !p.live {
		p.mu.Unlock()
		return nil, false
	}
	p.asks[id] = ch
	p.ctrl = append(p.ctrl, wireMsg{Kind: wReportAsk, ID: id})
	p.mu.Unlock()
	p.poke()
	select {
	case r, ok := <-ch:
		if ok {
			return r, true
		}
	case <-ctx.Done():
	}
	p.mu.Lock()
	delete(p.asks, id)
	last := p.last
	p.mu.Unlock()
	return last, false
}

// reports gathers every worker's report, in parallel, within workerReportWait.
func (s *workerSet) reports(ctx context.Context) []*wireReport {
	ctx, cancel := context.WithTimeout(ctx, workerReportWait)
	defer cancel()
	out := make([]*wireReport, len(s.procs))
	var wg sync.WaitGroup
	for i, p := range s.procs {
		wg.Go(func() { out[i], _ = p.report(ctx) })
	}
	wg.Wait()
	return out
}

// broadcast queues m for every running worker.
func (s *workerSet) broadcast(m wireMsg) {
	for _, p := range s.procs {
		p.send(m)
	}
}

// mirror passes a change of the master's table to every worker.
func (s *workerSet) mirror(c homes.Change, src homes.Source) {
	for _, p := range s.procs {
		p.mirror(c, src)
	}
}

// stop ends the workers: each is told to stop listening and to finish its open requests
// within grace (0: at once), and killed if it still runs workerExitWait after that. The
// master's copies of the client sockets close at the same time. It returns when every
// worker has exited.
func (s *workerSet) stop(grace time.Duration) {
	s.stopOnce.Do(func() {
		s.stopping.Store(true)
		close(s.stopped)
		s.closeSockets()
	})
	s.broadcast(wireMsg{Kind: wStop, Grace: grace})
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	t := time.NewTimer(grace + workerExitWait)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	for _, p := range s.procs {
		p.kill()
	}
	<-done
}

// sendTable writes the master's whole table (homes, then marks) through flush.
func (n *Node) sendTable(flush func(*wireMsg) error) error {
	batch := make([]wireHome, 0, wireBatch)
	var err error
	n.homes.Range(func(h homes.Home, src homes.Source) bool {
		batch = append(batch, homeToWire(h, src))
		if len(batch) == wireBatch {
			err = flush(&wireMsg{Kind: wHomes, Homes: batch})
			batch = batch[:0]
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	if len(batch) > 0 {
		if err := flush(&wireMsg{Kind: wHomes, Homes: batch}); err != nil {
			return err
		}
	}
	var marks []wireMark
	for _, m := range n.homes.Marks() {
		marks = append(marks, markToWire(m))
	}
	if len(marks) > 0 {
		return flush(&wireMsg{Kind: wMarks, Marks: marks})
	}
	return nil
}

// workerInit is the first message to worker idx: its configuration and the routing in force.
func (n *Node) workerInit(idx int) (wireMsg, error) {
	n.reloadMu.Lock()
	cur := n.cur
	n.reloadMu.Unlock()
	b, err := encodeWorkerConfig(cur)
	if err != nil {
		return wireMsg{}, err
	}
	return wireMsg{Kind: wInit, Index: idx, Config: b, Settings: settingsToWire(n.proxy.Routing(), cur)}, nil
}

// workerState is the state message of the moment: ready, draining.
func (n *Node) workerState() wireMsg {
	return wireMsg{Kind: wState, Ready: n.ready.Load(), Draining: n.draining.Load()}
}

// pushWorkerSettings sends the routing in force and the reloadable settings to the workers
// (after a reload or a DNS round changed them). reloadMu is held.
func (n *Node) pushWorkerSettings() {
	if s := n.workers.Load(); s != nil {
		s.broadcast(wireMsg{Kind: wSettings, Settings: settingsToWire(n.proxy.Routing(), n.cur)})
	}
}

// pushWorkerState sends ready and draining to the workers.
func (n *Node) pushWorkerState() {
	if s := n.workers.Load(); s != nil {
		s.broadcast(n.workerState())
	}
}

// refreshWorkerReports asks the workers for a report every workerReportEvery, until the
// entry stops: the counters of one that exits are then recent (workermetrics.go), and one
// that does not answer within workerReportWait (stopped, stuck) is counted down (not
// serving: /readyz says not ready) until it answers again; after workerMissedKill such
// misses in a row it is killed, and its slot starts another.
func (n *Node) refreshWorkerReports() {
	t := time.NewTicker(workerReportEvery)
	defer t.Stop()
	for {
		select {
		case <-n.bg.Done():
			return
		case <-t.C:
		}
		s := n.workers.Load()
		if s == nil {
			continue
		}
		var wg sync.WaitGroup
		for _, p := range s.procs {
			wg.Go(func() { p.heartbeat(n.bg) })
		}
		wg.Wait()
	}
}

// heartbeat asks the running worker for a report and notes whether it answered in time.
func (p *workerProc) heartbeat(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, workerReportWait)
	defer cancel()
	_, fresh := p.report(ctx)
	switch {
	case fresh:
		if p.missed.Swap(0) > 0 && p.served.Load() {
			p.serving.Store(true)
			p.set.n.log.Info().Int("worker", p.idx).Msg("worker answers again: serving")
		}
	case ctx.Err() != nil && p.set.n.bg.Err() == nil:
		n := p.missed.Add(1)
		if p.serving.Swap(false) {
			p.set.n.log.Warn().Int("worker", p.idx).Int("pid", p.pid()).Stringer("within", workerReportWait).
				Msg("worker does not answer: counted down (not ready) until it does")
		}
		if n >= workerMissedKill {
			p.set.n.log.Error().Int("worker", p.idx).Int("pid", p.pid()).Int("missed", int(n)).
				Msg("worker stuck: killing it; its slot starts another")
			p.kill()
		}
	}
}

// inflight is the entry's requests in flight: its own proxy's and, with --workers, the
// workers' (asked, within workerReportWait).
func (n *Node) inflight() int64 {
	v := n.proxy.Inflight()
	for _, r := range n.workerReports(context.Background()) {
		if r != nil {
			v += r.Inflight
		}
	}
	return v
}

// workerReports returns the workers' reports (nil without workers).
func (n *Node) workerReports(ctx context.Context) []*wireReport {
	if s := n.workers.Load(); s != nil {
		return s.reports(ctx)
	}
	return nil
}

// mergeRouterStates merges the workers' router states: per router, the one whose last attempt
// ended last.
func mergeRouterStates(base []proxy.RouterState, reports []*wireReport) []proxy.RouterState {
	type key struct{ region, router string }
	at := map[key]int{}
	for i, st := range base {
		at[key{st.Region, st.Router}] = i
	}
	for _, r := range reports {
		if r == nil {
			continue
		}
		for _, w := range r.Routers {
			i, ok := at[key{w.Region, w.Router}]
			if !ok {
				continue // a router of an older routing
			}
			// A worker that never asked the router says LastAt 0: nothing to take (the zero
			// time's UnixNano is far below 0, so "later than the base" must not be asked of it).
			if w.LastAt != 0 && (base[i].LastAt.IsZero() || w.LastAt > base[i].LastAt.UnixNano()) {
				base[i] = proxy.RouterState{Region: w.Region, Router: w.Router, LastOutcome: w.LastOutcome,
					LastStatus: w.LastStatus, LastAt: time.Unix(0, w.LastAt), Failures: w.Failures}
			}
		}
	}
	return base
}
