package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/homes"
)

// A worker process (workers.go): it serves clients on the socket its master gave it, with a
// copy of the master's home table, and does nothing else an entry does (no gossip, no admin
// listener, no --state-dir, no DNS names: the master sends the routers it found).

// Worker file descriptors, as the master passes them (exec.Cmd.ExtraFiles).
const (
	workerCtrlFD   = 3
	workerListenFD = 4
	workerInitWait = 10 * time.Second // the master's first message
)

// RunWorker runs this process as a worker of the master that started it with WorkerArg, and
// returns its exit status: 0 once the master stopped it, 1 when the master went away or the
// worker failed (the master starts another), 2 when what the master sent cannot be used. Logs
// go to stderr, as the master's. SIGINT, SIGTERM and SIGHUP are the master's to handle: a
// Ctrl-C at a terminal reaches the whole process group, and the master drains the workers.
func RunWorker(stderr io.Writer) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	fail := func(code int, msg string, err error) int {
		fmt.Fprintf(stderr, "fenec-entry worker: %s: %v\n", msg, err)
		return code
	}
	ctrl, err := net.FileConn(os.NewFile(workerCtrlFD, "worker-control"))
	if err != nil {
		return fail(2, "control socket (fd 3)", err)
	}
	defer ctrl.Close()
	r := bufio.NewReaderSize(ctrl, 64<<10)
	var init wireMsg
	ctrl.SetReadDeadline(time.Now().Add(workerInitWait))
	if err := readFrame(r, &init); err != nil || init.Kind != wInit || init.Settings == nil {
		return fail(2, "the master's first message", fmt.Errorf("kind %d, %v", init.Kind, err))
	}
	ctrl.SetReadDeadline(time.Time{})
	cfg, err := decodeWorkerConfig(init.Config)
	if err != nil {
		return fail(2, "the configuration", err)
	}
	// The worker is a server of clients only.
	cfg.Workers, cfg.StateDir, cfg.GossipKey, cfg.InsecureGossip, cfg.AdaptProcs = 0, "", nil, false, false
	cfg.Join, cfg.JoinDNS = nil, "" // gossip off, so these would be refused without a key
	all := cfg
	all.LogLevel = zerolog.TraceLevel.String()
	logger := NewLogger(all, stderr).With().Int("worker", init.Index).Logger()
	zerolog.SetGlobalLevel(parseLevel(init.Settings.LogLevel))

	n, err := newNode(cfg, logger, true)
	if err != nil {
		return fail(2, "building the worker", err)
	}
	defer n.Close()
	if err := n.applyWorkerSettings(init.Settings); err != nil {
		return fail(2, "the routing", err)
	}
	ln, err := net.FileListener(os.NewFile(workerListenFD, "worker-listen"))
	if err != nil {
		return fail(2, "client socket (fd 4)", err)
	}
	w := &ctrlWriter{conn: ctrl, w: bufio.NewWriterSize(ctrl, 64<<10)}
	return n.runWorker(ln, r, w)
}

// ctrlWriter writes frames to the master, one writer at a time, each flushed.
type ctrlWriter struct {
	mu   sync.Mutex
	conn net.Conn
	w    *bufio.Writer
}

func (c *ctrlWriter) send(m *wireMsg) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conn.SetWriteDeadline(time.Now().Add(workerWriteTimeout))
	if err := writeFrame(c.w, m); err != nil {
		return err
	}
	return c.w.Flush()
}

// parseLevel is a --log-level as zerolog's level (validated already; info if not).
func parseLevel(s string) zerolog.Level {
	l, err := zerolog.ParseLevel(s)
	if err != nil || s == "" {
		return zerolog.InfoLevel
	}
	return l
}

// applyWorkerSettings applies what a reload or a DNS round changed, as the master sent it.
func (n *Node) applyWorkerSettings(s *wireSettings) error {
	rt, err := s.routing()
	if err != nil {
		return err
	}
	if err := n.proxy.SetRouting(rt); err != nil {
		return err
	}
	if s.ReadBackoff > 0 {
		n.homes.SetReadBackoff(s.ReadBackoff)
	}
	zerolog.SetGlobalLevel(parseLevel(s.LogLevel))
	return nil
}

// runWorker serves clients on ln and the master's messages on r until the master stops it.
func (n *Node) runWorker(ln net.Listener, r *bufio.Reader, w *ctrlWriter) int {
	now := time.Now()
	n.startedAt.Store(&now)
	n.ready.Store(false) // until the master says
	n.mu.Lock()
	n.startCalled = true
	n.clientAddr = ln.Addr()
	n.mu.Unlock()
	n.serveClient(ln)
	if n.certs != nil {
		n.wg.Go(func() { n.certs.Watch(n.bg, n.certsEvery) })
	}
	n.wg.Go(n.runLatency)
	n.wg.Go(func() { n.forwardChanges(w) })

	msgs := make(chan wireMsg, 64)
	readErr := make(chan error, 1)
	go func() { // ends when the socket closes (RunWorker's defer)
		for {
			var m wireMsg
			if err := readFrame(r, &m); err != nil {
				readErr <- err
				return
			}
			msgs <- m
		}
	}()
	if err := w.send(&wireMsg{Kind: wServing}); err != nil {
		n.log.Error().Err(err).Msg("worker: the master went away")
		return 1
	}
	for {
		select {
		case err := <-n.failed:
			n.log.Error().Err(err).Msg("worker stopped")
			return 1
		case err := <-readErr:
			if !errors.Is(err, io.EOF) {
				n.log.Error().Err(err).Msg("worker: control socket")
			}
			return 1 // the master went away: stop at once (n.Close, deferred)
		case m := <-msgs:
			switch m.Kind {
			case wHomes:
				for _, h := range m.Homes {
					n.homes.Restore(h.home(), h.Src)
				}
			case wMarks:
				for _, mk := range m.Marks {
					n.homes.ApplyMark(mk.mark())
				}
			case wSettings:
				if m.Settings != nil {
					if err := n.applyWorkerSettings(m.Settings); err != nil {
						n.log.Error().Err(err).Msg("worker: routing from the master not applied")
					}
				}
			case wState:
				n.ready.Store(m.Ready)
				if m.Draining {
					n.workerDrain()
				}
			case wReportAsk:
				if err := w.send(&wireMsg{Kind: wReport, ID: m.ID, Report: n.workerReport()}); err != nil {
					return 1
				}
			case wStop:
				n.workerStop(m.Grace)
				return 0
			}
		}
	}
}

// workerDrain turns keep-alives off: every answer closes its connection from now on.
func (n *Node) workerDrain() {
	if n.draining.Swap(true) {
		return
	}
	n.client.SetKeepAlivesEnabled(false)
	if n.lean != nil {
		n.lean.StopKeepAlives()
	}
}

// workerStop stops listening, gives open requests grace, and ends them.
func (n *Node) workerStop(grace time.Duration) {
	n.workerDrain()
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := n.shutdownClient(ctx); err != nil {
		n.log.Warn().Int64("inflight", n.proxy.Inflight()).Msg("open requests ended at the end of the grace")
		n.closeClient()
	}
	n.proxy.Close()
	n.stopBackground()
}

// forwardChanges sends what this worker heard (its table's feed) to the master, in batches.
func (n *Node) forwardChanges(w *ctrlWriter) {
	feed := n.homes.Changes()
	for {
		var hs []wireHome
		var ms []wireMark
		add := func(c homes.Change) {
			switch c.Kind {
			case homes.ChangeHome:
				hs = append(hs, homeToWire(c.Home, homes.SourceLocal))
			case homes.ChangeMark:
				ms = append(ms, markToWire(c.Mark))
			}
		}
		select {
		case <-n.bg.Done():
			return
		case c := <-feed:
			add(c)
		}
	more:
		for len(hs)+len(ms) < wireBatch {
			select {
			case c := <-feed:
				add(c)
			default:
				break more
			}
		}
		err := error(nil)
		if len(hs) > 0 {
			err = w.send(&wireMsg{Kind: wHomes, Homes: hs})
		}
		if err == nil && len(ms) > 0 {
			err = w.send(&wireMsg{Kind: wMarks, Marks: ms})
		}
		if err != nil {
			// A master that takes nothing for workerWriteTimeout is gone or stuck: the worker
			// stops (closing the socket ends the main loop) rather than serve with a table
			// that no longer reaches the cluster; the master starts another when it can.
			n.log.Error().Err(err).Msg("worker: the master takes no more; stopping")
			w.conn.Close()
			return
		}
	}
}

// workerReport is this worker's part of the master's /metrics and /status.json.
func (n *Node) workerReport() *wireReport {
	rep := &wireReport{Inflight: n.proxy.Inflight(), Homes: n.homes.Len(), Failing: n.homes.Failing()}
	if fams, err := n.reg.Gather(); err == nil {
		var buf bytes.Buffer
		enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeProtoDelim))
		for _, f := range fams {
			if err := enc.Encode(f); err != nil {
				break
			}
		}
		rep.Metrics = buf.Bytes()
	}
	for _, st := range n.proxy.RouterStatus() {
		ws := wireRouterState{Region: st.Region, Router: st.Router, LastOutcome: st.LastOutcome,
			LastStatus: st.LastStatus, Failures: st.Failures}
		if !st.LastAt.IsZero() {
			ws.LastAt = st.LastAt.UnixNano()
		}
		rep.Routers = append(rep.Routers, ws)
	}
	return rep
}
