package state

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// KeepBad bounds the damaged files kept in the state directory, for each file moved aside
// (the home table, serf's member snapshot): every damage keeps its own copy, named with the
// time it was moved aside (MoveAside), and once more than KeepBad copies of one file are
// there the oldest are removed. Three keep the latest damages, enough to tell one that
// repeats from a one-off, and bound the disk to three copies of each file: a home table of
// --homes homes (about 31 bytes a home), a serf snapshot (16 MiB at most, far less in use).
const KeepBad = 3

// badTimeLayout names a moved-aside file by the UTC second it was moved: sortable as text.
const badTimeLayout = "20060102T150405Z"

// Aside is what MoveAside did.
type Aside struct {
	To        string   // where the file went: its name plus BadSuffix, "-" and the UTC time
	Removed   []string // older bad files of the same name removed to keep KeepBad
	RemoveErr error    // the first removal that failed, if any (that file stays)
}

// Log adds what MoveAside did to ev: moved_to (the file kept), removed (the files removed, if
// any) and remove_failed.
func (a Aside) Log(ev *zerolog.Event) *zerolog.Event {
	ev = ev.Str("moved_to", a.To)
	if len(a.Removed) > 0 {
		ev = ev.Strs("removed", a.Removed)
	}
	if a.RemoveErr != nil {
		ev = ev.AnErr("remove_failed", a.RemoveErr)
	}
	return ev
}

// MoveAside renames path (a file, or whatever stands at that name) to path+BadSuffix+"-"+now
// in UTC to the second, as homes.state.bad-20261203T143501Z; a second move in the same second
// takes the name plus "-2", "-3" and so on, never overwriting one kept before. It then
// removes the oldest of path's bad files until KeepBad are left, the one just moved always
// among them; a file named path+BadSuffix alone (the one bad file kept before the names had
// a time) counts as the oldest. The state directory has one writer (its entry), so the name
// is checked free before the rename without a lock. If the rename fails, nothing is removed.
func MoveAside(path string, now time.Time) (Aside, error) {
	base := path + BadSuffix + "-" + now.UTC().Format(badTimeLayout)
	to := base
	for n := 2; ; n++ {
		if _, err := os.Lstat(to); err != nil { // free (or unreadable: the rename says why)
			break
		}
		to = base + "-" + strconv.Itoa(n)
	}
	if err := os.Rename(path, to); err != nil {
		return Aside{}, err
	}
	a := Aside{To: to}
	for _, old := range oldBad(path, to) {
		if err := os.RemoveAll(old); err != nil {
			if a.RemoveErr == nil {
				a.RemoveErr = err
			}
			continue
		}
		a.Removed = append(a.Removed, old)
	}
	return a, nil
}

// badFile is one of path's bad files, ordered by when it was moved aside.
type badFile struct {
	name string
	when string // the time in badTimeLayout; "" for the file without a time
	seq  int    // 1 for the first of its second, then 2, 3...
}

// oldBad returns path's bad files beyond the KeepBad newest, oldest first, keeping kept
// (the one just moved) whatever its time says: a clock set back does not remove it. Names
// that only look like one (homes.state.bad-mine) are not touched.
func oldBad(path, kept string) []string {
	dir, prefix := filepath.Split(path + BadSuffix)
	entries, _ := os.ReadDir(filepath.Clean(dir))
	kept = filepath.Clean(kept)
	var files []badFile
	for _, e := range entries {
		name := filepath.Join(dir, e.Name())
		if name == kept {
			continue
		}
		if f, ok := parseBad(prefix, e.Name()); ok {
			f.name = name
			files = append(files, f)
		}
	}
	if len(files) < KeepBad {
		return nil
	}
	slices.SortFunc(files, func(a, b badFile) int {
		if c := strings.Compare(a.when, b.when); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	var out []string
	for _, f := range files[:len(files)-(KeepBad-1)] {
		out = append(out, f.name)
	}
	return out
}

// parseBad reads name, in the directory, as one of MoveAside's names for prefix (the file's
// name plus BadSuffix).
func parseBad(prefix, name string) (badFile, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return badFile{}, false
	}
	if rest == "" {
		return badFile{name: name, seq: 1}, true
	}
	rest, ok = strings.CutPrefix(rest, "-")
	if !ok || len(rest) < len(badTimeLayout) {
		return badFile{}, false
	}
	when, seq := rest[:len(badTimeLayout)], 1
	if _, err := time.Parse(badTimeLayout, when); err != nil {
		return badFile{}, false
	}
	if s := rest[len(badTimeLayout):]; s != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(s, "-"))
		if !strings.HasPrefix(s, "-") || err != nil || n < 2 {
			return badFile{}, false
		}
		seq = n
	}
	return badFile{name: name, when: when, seq: seq}, true
}
