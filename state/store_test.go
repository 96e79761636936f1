package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/clock"
	"github.com/fenec/fenec-entry/internal/testutil"
)

var regions = []string{"eu", "us", "ap"}

func newTable(tb testing.TB, node string, capacity int, regs ...string) *homes.Table {
	tb.Helper()
	if regs == nil {
		regs = regions
	}
	t, err := homes.New(homes.Config{Regions: regs, Origin: node, Capacity: capacity})
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func open(tb testing.TB, dir, node string, t *homes.Table, log *testutil.LogBuffer) *Store {
	tb.Helper()
	var lg zerolog.Logger
	if log != nil {
		lg = zerolog.New(log)
	}
	s, err := Open(Config{Dir: dir, Table: t, Node: node, Logger: lg})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

type held struct {
	homes.Home
	Src homes.Source
}

func contents(t *homes.Table) []held {
	var out []held
	t.Range(func(h homes.Home, src homes.Source) bool { out = append(out, held{h, src}); return true })
	return out
}

// TestRoundTrip: what a Store writes comes back with its versions, sources and order; a
// region no longer configured is skipped and counted.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	a := newTable(t, "e1", 0)
	a.LearnName("acme", "eu")
	a.Apply(homes.Home{Tenant: "globex", Region: "us", Version: homes.Version{HLC: 1 << 40, Origin: "e2"}})
	a.LearnName("initech", "ap")
	a.Apply(homes.Home{Tenant: "umbrella", Region: "eu", Version: homes.Version{HLC: 1 << 41, Origin: "e3"}})
	a.LearnName("acme", "us") // moved: updated in place, keeps its place in the order
	want := contents(a)
	if _, err := open(t, dir, "e1", a, nil).Flush(); err != nil {
		t.Fatal(err)
	}

	b := newTable(t, "e1", 0)
	r := open(t, dir, "e1", b, nil).Restore()
	if r.Result != "restored" || r.Homes != 4 || r.Local != 2 || r.Gossip != 2 {
		t.Fatalf("Restore = %+v, want 4 homes, 2 local", r)
	}
	if got := contents(b); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("restored table\n%v\nwant\n%v", got, want)
	}
	b.LearnName("hooli", "eu")
	h, _, _ := b.Get("hooli")
	for _, old := range want {
		if !old.Version.Less(h.Version) {
			t.Errorf("a home learned after the restore (%v) is not newer than restored %v", h.Version, old.Version)
		}
	}

	// Without region ap: initech is skipped and counted.
	c := newTable(t, "e1", 0, "eu", "us")
	r = open(t, dir, "e1", c, nil).Restore()
	if r.Homes != 3 || r.Skipped[SkipUnknownRegion] != 1 {
		t.Errorf("Restore without ap = %+v, want 3 homes and 1 skipped for its region", r)
	}
	if _, _, ok := c.Get("initech"); ok {
		t.Error("a home in a region no longer configured was restored")
	}

	// Under another node name (a volume moved): nothing comes back as heard here.
	d := newTable(t, "e9", 0)
	if r = open(t, dir, "e9", d, nil).Restore(); r.Homes != 4 || r.Local != 0 {
		t.Errorf("Restore under another node = %+v, want 4 homes, none local", r)
	}

	// Validate refuses one.
	e := newTable(t, "e1", 0)
	s, err := Open(Config{Dir: dir, Table: e, Node: "e1", Validate: func(h homes.Home) error {
		if h.Tenant == "globex" {
			return errors.New("no")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r = s.Restore(); r.Homes != 3 || r.Skipped[SkipInvalid] != 1 {
		t.Errorf("Restore with a refusing Validate = %+v, want 3 homes, 1 invalid", r)
	}
}

// TestWriteBoundedByMaxHomes: the file holds at most MaxHomes records, the newest kept out.
func TestWriteBoundedByMaxHomes(t *testing.T) {
	dir := t.TempDir()
	a := newTable(t, "e1", 0)
	for i := range 10 {
		a.LearnName(fmt.Sprintf("t%d", i), "eu")
	}
	s, err := Open(Config{Dir: dir, Table: a, Node: "e1", MaxHomes: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	b := newTable(t, "e1", 0)
	if r := open(t, dir, "e1", b, nil).Restore(); r.Homes != 4 {
		t.Errorf("restored %d homes from a file bounded at 4", r.Homes)
	}
}

// goodFile returns the bytes of a state file of a few homes.
func goodFile(tb testing.TB) []byte {
	tb.Helper()
	dir := tb.TempDir()
	a := newTable(tb, "e1", 0)
	for i := range 20 {
		a.LearnName(fmt.Sprintf("tenant-%d", i), regions[i%3])
	}
	a.Apply(homes.Home{Tenant: "peer", Region: "us", Version: homes.Version{HLC: 1 << 40, Origin: "e2"}})
	if _, err := open(tb, dir, "e1", a, nil).Flush(); err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, HomesFile))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestDamagedOrForeignIgnored: a truncated, altered or foreign file is logged naming the
// file, moved aside, and the table starts empty; never a panic, never an error.
func TestDamagedOrForeignIgnored(t *testing.T) {
	good := goodFile(t)
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x40
	tests := map[string]struct {
		data   []byte
		result string
	}{
		"empty":            {nil, "foreign"},
		"other magic":      {[]byte("{\"homes\": []}\n"), "foreign"},
		"format 1":         {append([]byte(magic+"\x01"), good[len(magic)+1:]...), "foreign"},
		"format 3":         {append([]byte(magic+"\x03"), good[len(magic)+1:]...), "foreign"},
		"truncated header": {good[:12], "damaged"},
		"truncated":        {good[:len(good)/2], "damaged"},
		"no checksum":      {good[:len(good)-4], "damaged"},
		"one byte altered": {flipped, "damaged"},
		"data after end":   {append(bytes.Clone(good), 0), "damaged"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, HomesFile)
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			var log testutil.LogBuffer
			tbl := newTable(t, "e1", 0)
			r := open(t, dir, "e1", tbl, &log).Restore()
			if r.Result != tt.result || tbl.Len() != 0 {
				t.Errorf("Restore = %+v with %d homes, want %s and an empty table", r, tbl.Len(), tt.result)
			}
			if out := log.String(); !strings.Contains(out, `"level":"warn"`) || !strings.Contains(out, path) {
				t.Errorf("log does not warn naming %s:\n%s", path, out)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the bad file is still at %s (%v)", path, err)
			}
			bad := badFiles(t, path)
			if len(bad) != 1 {
				t.Fatalf("bad files %q, want one", bad)
			}
			if kept, err := os.ReadFile(bad[0]); err != nil || !bytes.Equal(kept, tt.data) {
				t.Errorf("the bad file was not moved to %s intact: %v", bad[0], err)
			}
			if out := log.String(); !strings.Contains(out, bad[0]) {
				t.Errorf("log does not name %s:\n%s", bad[0], out)
			}
		})
	}
	t.Run("a directory or a pipe", func(t *testing.T) {
		for _, mk := range append([]func(string) error{
			func(p string) error { return os.Mkdir(p, 0o700) },
		}, mkfifo...) {
			dir := t.TempDir()
			path := filepath.Join(dir, HomesFile)
			if err := mk(path); err != nil {
				t.Fatal(err)
			}
			tbl := newTable(t, "e1", 0)
			if r := open(t, dir, "e1", tbl, nil).Restore(); r.Result != "foreign" {
				t.Errorf("Restore of a %v = %+v, want foreign", path, r)
			}
			if bad := badFiles(t, path); len(bad) != 1 {
				t.Errorf("not moved aside: bad files %q", bad)
			}
		}
	})
	t.Run("every truncation", func(t *testing.T) {
		for n := range len(good) {
			if _, _, err := decode(bytes.NewReader(good[:n]), nil); err == nil {
				t.Fatalf("a file cut at %d of %d bytes decoded", n, len(good))
			}
		}
	})
	t.Run("every single-bit flip", func(t *testing.T) {
		for i := range len(good) {
			b := bytes.Clone(good)
			b[i] ^= 1 << (i % 8)
			if _, _, err := decode(bytes.NewReader(b), nil); err == nil {
				t.Fatalf("a file with byte %d altered decoded", i)
			}
		}
	})
}

// TestNoFileStartsEmpty: no file is an empty start, logged at info.
func TestNoFileStartsEmpty(t *testing.T) {
	tbl := newTable(t, "e1", 0)
	if r := open(t, t.TempDir(), "e1", tbl, nil).Restore(); r.Result != "none" || tbl.Len() != 0 {
		t.Errorf("Restore of an empty directory = %+v", r)
	}
}

// failingFile fails its writes after limit bytes: a disk that fills, or a crash mid-write.
type failingFile struct {
	*os.File
	limit int
}

func (f *failingFile) Write(p []byte) (int, error) {
	if len(p) > f.limit {
		n, _ := f.File.Write(p[:f.limit])
		f.limit = 0
		return n, errors.New("no space left on device")
	}
	f.limit -= len(p)
	return f.File.Write(p)
}

// TestAtomicWrite: a write that fails part way leaves the old file whole and no temporary
// file; a temporary file a crash left behind is removed at Open and does not hide the old
// file.
func TestAtomicWrite(t *testing.T) {
	dir := t.TempDir()
	a := newTable(t, "e1", 0)
	a.LearnName("acme", "eu")
	s := open(t, dir, "e1", a, nil)
	if _, err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(s.Path())
	for i := range 20000 {
		a.LearnName(fmt.Sprintf("t%d", i), "us")
	}
	s.create = func(dir, pattern string) (tempFile, error) {
		f, err := os.CreateTemp(dir, pattern)
		return &failingFile{File: f, limit: 100 << 10}, err
	}
	if _, err := s.Flush(); err == nil {
		t.Fatal("Flush over a failing disk returned nil")
	}
	if now, _ := os.ReadFile(s.Path()); !bytes.Equal(now, old) {
		t.Error("a failed write changed the file")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, tempPattern)); len(left) != 0 {
		t.Errorf("a failed write left %v", left)
	}

	// A crash mid-write: the temporary file stays behind, half written.
	if err := os.WriteFile(filepath.Join(dir, HomesFile+".tmp-123"), []byte(magic+"\x01partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := newTable(t, "e1", 0)
	s2 := open(t, dir, "e1", b, nil)
	if left, _ := filepath.Glob(filepath.Join(dir, tempPattern)); len(left) != 0 {
		t.Errorf("Open left %v", left)
	}
	if r := s2.Restore(); r.Result != "restored" || r.Homes != 1 {
		t.Errorf("Restore after a crash mid-write = %+v, want the old file's 1 home", r)
	}
}

// TestOpenRefusesBadDir: a directory that is missing, a file or not writable is a DirError.
func TestOpenRefusesBadDir(t *testing.T) {
	tbl := newTable(t, "e1", 0)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o500)
	cases := map[string]string{"missing": filepath.Join(dir, "nope"), "a file": file}
	if os.Geteuid() != 0 { // root writes anywhere
		cases["read-only"] = ro
	}
	for name, d := range cases {
		_, err := Open(Config{Dir: d, Table: tbl})
		var de *DirError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), d) {
			t.Errorf("%s: Open = %v, want a DirError naming %s", name, err, d)
		}
	}
}

// writesOK reads the ok writes counter.
func writesOK(s *Store) float64 { return counterValue(s.m.writes.WithLabelValues("ok")) }

// TestWriteBehindOnlyWhenChanged: Run writes nothing while the table does not change, once
// after it changed, and never more than once an Interval however fast it changes.
func TestWriteBehindOnlyWhenChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		tbl := newTable(t, "e1", 0)
		s := open(t, dir, "e1", tbl, nil)
		s.Restore()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); s.Run(ctx) }()
		defer func() { cancel(); <-done }()

		time.Sleep(3 * WriteInterval)
		synctest.Wait()
		if n := writesOK(s); n != 0 {
			t.Errorf("%v writes of an empty, unchanged table", n)
		}
		tbl.LearnName("acme", "eu")
		time.Sleep(WriteInterval)
		synctest.Wait()
		if n := writesOK(s); n != 1 {
			t.Errorf("%v writes one interval after a change, want 1", n)
		}
		time.Sleep(5 * WriteInterval)
		synctest.Wait()
		if n := writesOK(s); n != 1 {
			t.Errorf("%v writes after five quiet intervals, want still 1", n)
		}

		// A change every 10 ms for a minute: at most one write an interval.
		start := time.Now()
		for i := 0; time.Since(start) < time.Minute; i++ {
			tbl.LearnName(fmt.Sprintf("t%d", i), "us")
			time.Sleep(10 * time.Millisecond)
		}
		synctest.Wait()
		got := writesOK(s) - 1
		if max := float64(time.Minute/WriteInterval) + 1; got > max || got < max-2 {
			t.Errorf("%v writes in a minute of constant change, want about %v (one an interval)", got, max)
		}
	})
}

// TestFlushAfterRestoreWritesOnlyChanges: the drain's Flush after a restore writes nothing
// unless the table changed.
func TestFlushAfterRestoreWritesOnlyChanges(t *testing.T) {
	dir := t.TempDir()
	a := newTable(t, "e1", 0)
	a.LearnName("acme", "eu")
	open(t, dir, "e1", a, nil).Flush()
	b := newTable(t, "e1", 0)
	s := open(t, dir, "e1", b, nil)
	s.Restore()
	if wrote, err := s.Flush(); wrote || err != nil {
		t.Errorf("Flush of a restored, unchanged table: wrote %v, %v; want neither", wrote, err)
	}
	if n := writesOK(s); n != 0 {
		t.Errorf("%v writes of a restored, unchanged table", n)
	}
	b.LearnName("globex", "us")
	if wrote, err := s.Flush(); !wrote || err != nil {
		t.Errorf("Flush after a change: wrote %v, %v; want a write", wrote, err)
	}
	if n := writesOK(s); n != 1 {
		t.Errorf("%v writes after a change, want 1", n)
	}
}

func counterValue(c prometheus.Counter) float64 { return promtest.ToFloat64(c) }

// TestSlowWritesSpacedOut: a write that takes long delays the next by writeShare times as
// long, so a large table costs at most 1 % of a core however often it changes.
func TestSlowWritesSpacedOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tbl := newTable(t, "e1", 0)
		s := open(t, t.TempDir(), "e1", tbl, nil)
		s.Restore()
		const took = time.Second
		s.create = func(dir, pattern string) (tempFile, error) {
			time.Sleep(took) // a table so large its write takes a second
			return os.CreateTemp(dir, pattern)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); s.Run(ctx) }()
		defer func() { cancel(); <-done }()
		start := time.Now()
		for i := 0; time.Since(start) < 5*time.Minute; i++ {
			tbl.LearnName(fmt.Sprintf("t%d", i), "eu")
			time.Sleep(100 * time.Millisecond)
		}
		synctest.Wait()
		if n, max := writesOK(s), float64(5*time.Minute/(writeShare*took))+1; n < 2 || n > max {
			t.Errorf("%v writes of 1 s each in 5 minutes of change, want 2 to %v", n, max)
		}
	})
}

// TestTableHandedOver: what WriteTable writes to any file (an upgrade's hand-over) comes back
// with ReadTable as a Store's file does, with its versions, sources and order; a cut file
// puts nothing back and says damaged.
func TestTableHandedOver(t *testing.T) {
	a := newTable(t, "e1", 0)
	a.LearnName("acme", "eu")
	a.Apply(homes.Home{Tenant: "globex", Region: "us", Version: homes.Version{HLC: 1 << 40, Origin: "e2"}})
	want := contents(a)
	f, err := os.CreateTemp(t.TempDir(), "handover")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, size, err := WriteTable(f, a, "e1", time.Now(), 0)
	if err != nil || n != 2 || size == 0 {
		t.Fatalf("WriteTable = %d homes, %d bytes, %v", n, size, err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	b := newTable(t, "e1", 0)
	r, err := ReadTable(f, b, "e1", nil)
	if err != nil || r.Result != "restored" || r.Homes != 2 || r.Local != 1 {
		t.Fatalf("ReadTable = %+v, %v; want 2 homes, 1 local", r, err)
	}
	if got := contents(b); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("handed-over table\n%v\nwant\n%v", got, want)
	}
	if err := f.Truncate(size - 3); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	c := newTable(t, "e1", 0)
	if r, err := ReadTable(f, c, "e1", nil); !errors.Is(err, ErrDamaged) || r.Result != "damaged" || c.Len() != 0 {
		t.Errorf("a cut hand-over: %+v, %v, %d homes; want damaged, nothing put back", r, err, c.Len())
	}
}

// The file's write time is Config.Clock's.
func TestWriteTimeOnTheClock(t *testing.T) {
	for name, row := range map[string]struct {
		clock clock.Clock
		at    time.Time
	}{
		"Clock": {clock: testutil.NewClock(time.UnixMilli(1_800_000_000_000)), at: time.UnixMilli(1_800_000_000_000)},
		"other": {clock: testutil.NewClock(time.UnixMilli(1_700_000_000_000)), at: time.UnixMilli(1_700_000_000_000)},
	} {
		dir := t.TempDir()
		a := newTable(t, "e1", 0)
		a.LearnName("acme", "eu")
		s, err := Open(Config{Dir: dir, Table: a, Node: "e1", Clock: row.clock})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		r := open(t, dir, "e1", newTable(t, "e1", 0), nil).Restore()
		if !r.Written.Equal(row.at) {
			t.Errorf("%s: the file says it was written at %v, want %v", name, r.Written, row.at)
		}
	}
}
