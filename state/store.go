package state

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/clock"
)

// Files in the state directory.
const (
	HomesFile    = "homes.state"   // the home table, written by Store
	SerfSnapshot = "serf.snapshot" // serf's member snapshot, written by serf (SerfSnapshotPath)
	BadSuffix    = ".bad"          // a damaged or foreign file goes to its name, this and a time (MoveAside)
	tempPattern  = HomesFile + ".tmp-*"
)

// WriteInterval is the least time between two writes of the home table: the write-behind
// checks the table this often and writes only when it changed. A write streams the whole
// table (about 31 bytes and 0.25 µs a home: 1.5 MB and some 12 ms for 50,000 homes, see
// docs/BENCHMARKS.md), so one every 5 s costs about 0.25 % of a core; a restart loses at most
// the last 5 s of learning, which peers and the routers give back.
const WriteInterval = 5 * time.Second

// writeShare bounds the write-behind's cost for large tables: after a write that took d, the
// next waits at least writeShare×d (so at most 1/writeShare of a core, 1 %). At 1,000,000
// homes a write takes about 0.2-0.7 s (the disk's sync), so the table is written every 20 s
// to about once a minute.
const writeShare = 100

// Config configures a Store.
type Config struct {
	// Dir is the state directory (--state-dir): an existing directory this process can
	// write. Required.
	Dir string

	// Table is the home table written and restored. Required.
	Table *homes.Table

	// Node is this entry's node name (--node). A file written under this name gives back
	// its local homes as local; a file written under another name (a volume moved to
	// another machine) gives them back as gossip: this entry did not hear them itself.
	Node string

	// MaxHomes bounds the records written (--homes); 0 means no bound beyond the table's.
	MaxHomes int

	// Interval is the least time between writes; 0 means WriteInterval.
	Interval time.Duration

	// Validate, if not nil, checks each restored home as a peer's would be checked (tenant
	// name, version not far in the future); a home it refuses is skipped and counted.
	Validate func(homes.Home) error

	// Clock is the time source of the header's write time, the age logged at a restore and
	// the name of a file moved aside; nil: the system clock. The write-behind's pacing
	// measures how long writes took, real work, on the system clock.
	Clock clock.Clock

	Logger  zerolog.Logger
	Metrics *Metrics // nil: no metrics
}

// Store writes the home table behind into Dir and restores it at start. Make one with Open;
// Restore once, then Run; Flush at the drain. All methods are safe for concurrent use (writes
// are serialised).
type Store struct {
	cfg  Config
	path string
	log  zerolog.Logger
	m    *Metrics

	create func(dir, pattern string) (tempFile, error) // os.CreateTemp; tests inject failures

	mu      sync.Mutex // serialises writes; guards written
	written uint64     // Table.Generation of the last file written or restored
	wrote   bool       // a file was written or restored: written is meaningful
}

// tempFile is what a write needs of an *os.File.
type tempFile interface {
	io.Writer
	Sync() error
	Close() error
	Name() string
}

// DirError says why Dir cannot hold the state; its text names no flag.
type DirError struct{ Msg string }

func (e *DirError) Error() string { return e.Msg }

// Open checks that cfg.Dir is a directory this process can write (by creating and removing
// a file in it), removes temporary files a crash left behind, and returns a Store. A
// directory that does not exist, is not a directory or is not writable is a *DirError.
func Open(cfg Config) (*Store, error) {
	if cfg.Table == nil {
		return nil, errors.New("state: open: no table")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = WriteInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System
	}
	fi, err := os.Stat(cfg.Dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &DirError{fmt.Sprintf("%q does not exist (create it, or use systemd's StateDirectory= or a Fly volume)", cfg.Dir)}
	case err != nil:
		return nil, &DirError{fmt.Sprintf("%q: %v", cfg.Dir, errors.Unwrap(err))}
	case !fi.IsDir():
		return nil, &DirError{fmt.Sprintf("%q is not a directory", cfg.Dir)}
	}
	probe, err := os.CreateTemp(cfg.Dir, tempPattern)
	if err != nil {
		return nil, &DirError{fmt.Sprintf("%q is not writable by this process: %v", cfg.Dir, errors.Unwrap(err))}
	}
	probe.Close()
	os.Remove(probe.Name())
	if stale, _ := filepath.Glob(filepath.Join(cfg.Dir, tempPattern)); len(stale) > 0 {
		for _, f := range stale {
			os.Remove(f)
		}
		cfg.Logger.Info().Int("files", len(stale)).Str("dir", cfg.Dir).
			Msg("state: removed the temporary files of an interrupted write")
	}
	m := cfg.Metrics
	if m == nil {
		m = NewMetrics(nil)
	}
	return &Store{
		cfg:    cfg,
		path:   filepath.Join(cfg.Dir, HomesFile),
		log:    cfg.Logger.With().Str("component", "state").Logger(),
		m:      m,
		create: osCreateTemp,
	}, nil
}

// Path is the home table's file.
func (s *Store) Path() string { return s.path }

// SerfSnapshotPath is where serf keeps its member snapshot (serf.Config.SnapshotPath).
func (s *Store) SerfSnapshotPath() string { return filepath.Join(s.cfg.Dir, SerfSnapshot) }

// Restored is what Restore found.
type Restored struct {
	Result  string // none (no file), restored, damaged, foreign or unreadable
	Homes   int    // homes put back (Local + Gossip)
	Local   int    // of which heard by this entry itself
	Gossip  int    // of which told by peers (or heard under another node name)
	Skipped [numSkip]int
	Written time.Time // when the file was written; zero unless restored
	Node    string    // the node that wrote it
}

// Why a record of a good file was not put back.
const (
	SkipUnknownRegion = iota // its region is no longer configured
	SkipInvalid              // Config.Validate refused it
	SkipNotNewer             // the table held the tenant at a version as new (a duplicate)
	numSkip
)

var skipReasons = [numSkip]string{"unknown_region", "invalid", "not_newer"}

// Restore reads the home table's file into the table: a first pass checks the whole file
// (structure, record count, checksum) without keeping anything, a second puts each home back
// with Table.Restore, oldest first. It never fails: no file is an empty start; a damaged or
// foreign file is logged (warn), moved aside with MoveAside (HomesFile+BadSuffix and the time,
// keeping the evidence from the next write; KeepBad of them at most) and the table stays empty;
// an unreadable one is logged (error) and left. Call it once, before the table is used.
func (s *Store) Restore() Restored {
	r := s.restore()
	s.m.restored(r)
	s.mu.Lock()
	s.written, s.wrote = s.cfg.Table.Generation(), r.Result == "restored"
	s.mu.Unlock()
	return r
}

func (s *Store) restore() Restored {
	// Stat first: opening a named pipe would wait for a writer.
	if fi, err := os.Stat(s.path); err == nil && !fi.Mode().IsRegular() {
		return s.reject(nil, Restored{Result: "foreign"}, fmt.Errorf("%w (not a regular file)", ErrForeign))
	}
	f, err := os.Open(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		s.log.Info().Str("file", s.path).Msg("state: no home table on disk yet: starting empty")
		return Restored{Result: "none"}
	}
	if err != nil {
		s.log.Error().Err(err).Str("file", s.path).Msg("state: cannot read the home table's file: starting empty")
		return Restored{Result: "unreadable"}
	}
	defer f.Close()
	r, n, err := readTable(f, s.cfg.Table, s.cfg.Node, s.cfg.Validate)
	if err != nil && r.Result != "restored" {
		if r.Result == "unreadable" {
			s.log.Error().Err(err).Str("file", s.path).Msg("state: cannot read the home table's file: starting empty")
			return r
		}
		return s.reject(f, r, err)
	}
	if err != nil { // the file changed between the passes: keep what came, say so
		s.log.Error().Err(err).Str("file", s.path).Msg("state: the home table's file changed while read")
	}
	ev := s.log.Info().Str("file", s.path).Uint64("records", n).Int("homes", r.Homes).Int("local", r.Local).
		Int("gossip", r.Gossip).Str("written_by", r.Node).Time("written", r.Written).
		Stringer("age", s.cfg.Clock.Now().Sub(r.Written).Round(time.Millisecond))
	for i, k := range r.Skipped {
		if k > 0 {
			ev = ev.Int("skipped_"+skipReasons[i], k)
		}
	}
	ev.Msg("state: home table restored")
	return r
}

// ReadTable puts back into t the table a WriteTable wrote to f: what Restore does with the
// file of --state-dir, for a table handed over by the process an upgrade replaces. node is
// this entry's name (a table written under another gives its homes back as gossip); validate,
// if not nil, checks each home. Result is "restored", or "damaged", "foreign" or
// "unreadable" with the error and nothing put back.
func ReadTable(f io.ReadSeeker, t *homes.Table, node string, validate func(homes.Home) error) (Restored, error) {
	r, _, err := readTable(f, t, node, validate)
	return r, err
}

// readTable is ReadTable, and the count of records in f. A first pass checks the whole
// stream (structure, record count, checksum) without keeping anything, a second puts each
// home back with Table.Restore, oldest first; an error of the second pass (the file changed
// between them) comes with Result "restored" and what was put back.
func readTable(f io.ReadSeeker, t *homes.Table, node string, validate func(homes.Home) error) (Restored, uint64, error) {
	h, n, err := decode(f, nil)
	if err != nil {
		switch {
		case errors.Is(err, ErrForeign):
			return Restored{Result: "foreign"}, 0, err
		case errors.Is(err, ErrDamaged):
			return Restored{Result: "damaged"}, 0, err
		}
		return Restored{Result: "unreadable"}, 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Restored{Result: "unreadable"}, 0, err
	}
	r := Restored{Result: "restored", Written: h.Written, Node: h.Node}
	own := h.Node == node
	_, _, err = decode(f, func(rec *fileHome) error {
		if _, ok := t.RegionID(rec.Home.Region); !ok {
			r.Skipped[SkipUnknownRegion]++
			return nil
		}
		if validate != nil && validate(rec.Home) != nil {
			r.Skipped[SkipInvalid]++
			return nil
		}
		src := rec.Source
		if !own {
			src = homes.SourceGossip
		}
		if !t.Restore(rec.Home, src) {
			r.Skipped[SkipNotNewer]++
		}
		return nil
	})
	st := t.Stats()
	r.Homes, r.Local, r.Gossip = st.Homes, st.Local, st.Gossip
	return r, n, err
}

// reject logs a damaged or foreign file and moves it aside (f, if open, is closed first).
func (s *Store) reject(f *os.File, r Restored, why error) Restored {
	if f != nil {
		f.Close()
	}
	ev := s.log.Warn().Str("file", s.path).Str("reason", why.Error())
	if a, err := MoveAside(s.path, s.cfg.Clock.Now()); err != nil {
		ev = ev.AnErr("move_aside", err)
	} else {
		ev = a.Log(ev)
	}
	ev.Msg("state: home table's file ignored (" + r.Result + "): starting empty")
	return r
}

// Run writes the table behind until ctx ends: every Interval, if it changed since the last
// write (or restore). A failed write is logged and counted, and tried again at the next tick.
//
// A write that took d delays the next by writeShare×d at least, so that the write-behind never
// takes more than 1 % of a core, whatever --homes is.
func (s *Store) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	var next time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// The system clock, as the ticker's: the pacing measures how long a write took.
		if clock.System.Now().Before(next) {
			continue
		}
		start := clock.System.Now()
		if _, err := s.Flush(); err != nil {
			s.log.Warn().Err(err).Str("file", s.path).Msg("state: writing the home table failed; trying again later")
		}
		next = start.Add(writeShare * clock.System.Now().Sub(start))
	}
}

// Flush writes the table now if it changed since the last write or restore (the drain calls
// it once requests have ended), and says whether it wrote. It returns the write's error,
// which is counted too.
func (s *Store) Flush() (wrote bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gen := s.cfg.Table.Generation()
	if s.wrote && gen == s.written {
		return false, nil
	}
	if !s.wrote && s.cfg.Table.Len() == 0 {
		return false, nil // nothing known and nothing on disk to replace
	}
	start := clock.System.Now() // a duration of real work
	n, size, err := s.writeLocked()
	took := clock.System.Now().Sub(start)
	s.m.wrote(err, took, n, size, s.cfg.Clock.Now())
	if err != nil {
		return false, err
	}
	s.written, s.wrote = gen, true
	s.log.Debug().Str("file", s.path).Int("homes", n).Int64("bytes", size).Dur("took_ms", took).Msg("state: home table written")
	return true, nil
}

// countingWriter counts what passes through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeLocked streams the table into a temporary file in Dir, syncs it, renames it over the
// file and syncs the directory. On any failure the temporary file is removed and the old
// file stays as it was. s.mu is held.
func (s *Store) writeLocked() (homesWritten int, size int64, err error) {
	err = writeAtomic(s.create, s.path, tempPattern, func(w io.Writer) error {
		var err error
		homesWritten, size, err = WriteTable(w, s.cfg.Table, s.cfg.Node, s.cfg.Clock.Now(), s.cfg.MaxHomes)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("state: write: %w", err)
	}
	return homesWritten, size, nil
}

// WriteTable writes t to w in the state file's format, as written by node at written, at
// most max homes (0: no bound beyond the table's): what the write-behind writes into
// --state-dir, and what an upgrade hands the new process (ReadTable).
func WriteTable(w io.Writer, t *homes.Table, node string, written time.Time, max int) (homesWritten int, size int64, err error) {
	cw := &countingWriter{w: w}
	enc, err := newEncoder(cw, header{Node: node, Written: written}, t.Len())
	if err != nil {
		return 0, 0, err
	}
	var werr error
	t.Range(func(h homes.Home, src homes.Source) bool {
		ok, err := enc.home(h, src)
		if err != nil {
			werr = err
			return false
		}
		if ok {
			homesWritten++
		}
		return max <= 0 || homesWritten < max
	})
	if werr != nil {
		return 0, 0, werr
	}
	if err := enc.close(); err != nil {
		return 0, 0, err
	}
	return homesWritten, cw.n, nil
}
