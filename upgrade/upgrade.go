// Package upgrade replaces a running entry with a new binary on the same host, on the same
// sockets, without a refused connection (docs/OPERATIONS.md, "Upgrading the binary"). It wraps
// cloudflare/tableflip, which passes the listening sockets to a new process started from the
// same path with the same arguments and environment, waits until that process says it is
// ready, and kills it if it does not within a bound, leaving the old one serving.
//
// What an entry adds to tableflip:
//   - the home table: the old process writes it in the state file's format (package state)
//     to an unlinked file passed with the sockets; the new one reads it before it serves, so
//     no tenant heard before the upgrade is relayed again;
//   - the gossip address: memberlist binds its own sockets, so they cannot be passed; the old
//     process stops its gossip without leaving, once the new one is ready, and then closes
//     a pipe the new one holds the other end of; the new one starts gossip when the pipe
//     reads end of file (or the old process died), under the same node name: peers see the
//     same member, refuting a suspicion at most, never a leave and a join.
//
// One Process per process (tableflip allows one Upgrader): New returns the same one again.
package upgrade

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cloudflare/tableflip"
)

// Timeout bounds a new process's start: from its start until it says it is ready. Past it
// the new process is killed and the old one keeps serving.
const Timeout = 30 * time.Second

// Names of the files passed besides the sockets.
const (
	fileTable  = "fenec-entry-homes"
	fileGossip = "fenec-entry-gossip"
	fileCounts = "fenec-entry-upgrades"
)

// Process is this process's side of upgrades: the sockets and table it inherited, if an
// upgrade started it, and the upgrade of itself to a new binary.
type Process struct {
	upg     *tableflip.Upgrader
	pidFile string        // --pid-file, absolute; "" for none
	table   *os.File      // the inherited table; nil if none
	free    chan struct{} // closed once the previous process stopped its gossip (or none was)

	mu      sync.Mutex
	release *os.File // during and after an upgrade: the write end of the gossip pipe
	counts  counts   // the upgrades of the processes before this one, and this one's failed ones
}

// counts are the upgrades in place of a line of processes, each started by the one before:
// ready, those done (one a process: it then drains and exits), failed, those whose new binary
// did not become ready. Each process passes them on, so that the process serving now shows
// every upgrade that led to it (fenec_entry_upgrades_total), where the one that did the work
// no longer answers.
type counts struct{ ready, failed int }

var (
	once    sync.Once
	process *Process
	newErr  error
)

// New makes this process's upgrader, once: a second call returns the first's result (a
// process serves once; its tests may serve more than once). pidFile, if set, is written with
// this process's PID each time it is ready (systemd's PIDFile=, so that it follows the new
// process).
func New(pidFile string) (*Process, error) {
	once.Do(func() { process, newErr = newProcess(pidFile) })
	return process, newErr
}

func newProcess(pidFile string) (*Process, error) {
	// The PID file is this package's to write (writePIDFile), not tableflip's: its file has
	// no newline at the end, which tools that read a PID file line by line expect.
	if pidFile != "" {
		abs, err := filepath.Abs(pidFile) // relative to the directory the entry started in
		if err != nil {
			return nil, fmt.Errorf("upgrade: --pid-file: %w", err)
		}
		pidFile = abs
	}
	upg, err := tableflip.New(tableflip.Options{UpgradeTimeout: Timeout})
	if err != nil {
		return nil, fmt.Errorf("upgrade: %w", err)
	}
	p := &Process{upg: upg, free: make(chan struct{}), pidFile: pidFile}
	if p.table, err = upg.File(fileTable); err != nil {
		return nil, fmt.Errorf("upgrade: the inherited home table: %w", err)
	}
	if f, err := upg.File(fileCounts); err != nil {
		return nil, fmt.Errorf("upgrade: the inherited counts: %w", err)
	} else if f != nil {
		p.counts, err = readCounts(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("upgrade: the inherited counts: %w", err)
		}
	}
	gossip, err := upg.File(fileGossip)
	if err != nil {
		return nil, fmt.Errorf("upgrade: the inherited gossip pipe: %w", err)
	}
	if gossip == nil {
		close(p.free)
	} else {
		go func() {
			defer close(p.free)
			defer gossip.Close()
			io.Copy(io.Discard, gossip) // until the previous process closes its end, or dies
		}()
	}
	return p, nil
}

// Listen returns the TCP listener the previous process passed as name (a flag) for addr, or
// binds a new one; either way the next upgrade passes it on. Listeners are known by name and
// address together: two flags on port 0 stay apart, and an address changed in --config
// between the two processes is bound anew.
func (p *Process) Listen(name, addr string) (net.Listener, error) {
	key := name + " " + addr
	if ln, err := p.upg.Listener("tcp", key); err != nil || ln != nil {
		return ln, err
	}
	ln, err := net.Listen("tcp", addr) // its error as is: "listen tcp ...: address already in use"
	if err != nil {
		return nil, err
	}
	if err := p.upg.AddListener("tcp", key, ln.(*net.TCPListener)); err != nil {
		ln.Close()
		return nil, fmt.Errorf("upgrade: keep %s for upgrades: %w", name, err)
	}
	return ln, nil
}

// Table returns the home table the previous process handed over, positioned at its start,
// and forgets it (the caller closes it); nil if there is none.
func (p *Process) Table() (*os.File, error) {
	f := p.table
	p.table = nil
	if f == nil {
		return nil, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("upgrade: the inherited home table: %w", err)
	}
	return f, nil
}

// Inherited is what the processes before this one counted, the upgrade that started this one
// included (ready is 1 or more then; both are 0 for a process started otherwise).
func (p *Process) Inherited() (ready, failed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts.ready, p.counts.failed
}

// Ready says this process serves: an upgrade that started it ends (the previous process
// stops its gossip and drains), the PID file is written, and an upgrade of this one may
// begin.
func (p *Process) Ready() error {
	if p.pidFile != "" {
		if err := writePIDFile(p.pidFile, os.Getpid()); err != nil {
			return fmt.Errorf("upgrade: --pid-file: %w", err)
		}
	}
	return p.upg.Ready()
}

// writePIDFile writes pid and a newline to path, atomically: a file beside it, renamed over it,
// so that a reader (systemd's PIDFile=) never sees half of it.
func writePIDFile(path string, pid int) error {
	dir, name := filepath.Split(path)
	f, err := os.CreateTemp(dir, name+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a rename, nothing is left to remove
	if _, err := fmt.Fprintf(f, "%d\n", pid); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// HasParent says whether an upgrade in place started this process.
func (p *Process) HasParent() bool { return p.upg.HasParent() }

// GossipFree is closed once the previous process has stopped its gossip (at once if this one
// was not started by an upgrade).
func (p *Process) GossipFree() <-chan struct{} { return p.free }

// Upgrade starts the binary at this process's path (os.Args[0]) with its arguments,
// environment, listeners and the table writeTable writes, and waits until it is ready (nil)
// or has failed to start, exited or not become ready within Timeout (an error; it is killed,
// and this process goes on serving). After nil, the caller stops its gossip and then calls
// ReleaseGossip, and drains.
func (p *Process) Upgrade(writeTable func(io.Writer) error) (err error) {
	p.mu.Lock()
	next := counts{ready: p.counts.ready + 1, failed: p.counts.failed} // as the new process will show them
	p.mu.Unlock()
	defer func() {
		if err != nil {
			p.mu.Lock()
			p.counts.failed++
			p.mu.Unlock()
		}
	}()
	table, err := passedFile("the home table", writeTable)
	if err != nil {
		return err
	}
	defer table.Close()
	counts, err := passedFile("the counts", func(w io.Writer) error { _, err := fmt.Fprintf(w, "%d %d\n", next.ready, next.failed); return err })
	if err != nil {
		return err
	}
	defer counts.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("upgrade: gossip pipe: %w", err)
	}
	defer r.Close()
	if err := p.upg.AddFile(fileTable, table); err != nil {
		w.Close()
		return fmt.Errorf("upgrade: pass the home table: %w", err)
	}
	if err := p.upg.AddFile(fileGossip, r); err != nil {
		w.Close()
		return fmt.Errorf("upgrade: pass the gossip pipe: %w", err)
	}
	if err := p.upg.AddFile(fileCounts, counts); err != nil {
		w.Close()
		return fmt.Errorf("upgrade: pass the counts: %w", err)
	}
	if err := p.upg.Upgrade(); err != nil {
		w.Close()
		return fmt.Errorf("upgrade: the new process: %w", err)
	}
	p.mu.Lock()
	p.release = w
	p.mu.Unlock()
	return nil
}

// ReleaseGossip tells the new process that this one's gossip has stopped: it may bind the
// gossip address and join under the same name. Safe to call more than once.
func (p *Process) ReleaseGossip() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.release != nil {
		p.release.Close()
		p.release = nil
	}
}

// Stop ends upgrades and closes the copies of the listening sockets kept for them, so that a
// drain's closed listener refuses connections at once rather than leaving them in a backlog
// no one accepts from. A new process already ready is not affected.
func (p *Process) Stop() { p.upg.Stop() }

// readCounts reads what Upgrade wrote with the counts: "ready failed".
func readCounts(f *os.File) (counts, error) {
	var c counts
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return c, err
	}
	if _, err := fmt.Fscanf(f, "%d %d\n", &c.ready, &c.failed); err != nil {
		return counts{}, err
	}
	if c.ready < 0 || c.failed < 0 {
		return counts{}, fmt.Errorf("negative counts %d %d", c.ready, c.failed)
	}
	return c, nil
}

// passedFile writes what write writes to a file that has no name (created in the temporary
// directory and removed at once): the new process reads it through the descriptor it inherits.
// what names it in errors.
func passedFile(what string, write func(io.Writer) error) (*os.File, error) {
	f, err := os.CreateTemp("", "fenec-entry-upgrade-*")
	if err != nil {
		return nil, fmt.Errorf("upgrade: %s: %w", what, err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("upgrade: %s: %w", what, err)
	}
	if err := write(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("upgrade: write %s: %w", what, err)
	}
	return f, nil
}
