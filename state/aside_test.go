package state

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// badFiles lists path's bad files (path+BadSuffix and what follows), sorted.
func badFiles(tb testing.TB, path string) []string {
	tb.Helper()
	names, err := filepath.Glob(path + BadSuffix + "*")
	if err != nil {
		tb.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// damage writes a damaged home table with data into dir and restores it with the clock at
// now, returning the warning logged.
func damage(tb testing.TB, dir string, now time.Time, data string) map[string]any {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(dir, HomesFile), []byte(data), 0o600); err != nil {
		tb.Fatal(err)
	}
	var log testutil.LogBuffer
	s, err := Open(Config{Dir: dir, Table: newTable(tb, "e1", 0), Node: "e1", Logger: zerolog.New(&log),
		Clock: testutil.NewClock(now)})
	if err != nil {
		tb.Fatal(err)
	}
	if r := s.Restore(); r.Result != "foreign" {
		tb.Fatalf("Restore = %+v, want foreign", r)
	}
	for line := range strings.Lines(log.String()) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["level"] == "warn" {
			return m
		}
	}
	tb.Fatalf("no warning logged:\n%s", log.String())
	return nil
}

var t0 = time.Date(2026, 12, 3, 14, 35, 1, 0, time.FixedZone("CET", 3600))

// TestTwoDamagesKeepTwoFiles: a second damaged file does not overwrite the first; each is
// named with the UTC time it was moved aside, and the warning names it.
func TestTwoDamagesKeepTwoFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, HomesFile)
	first := damage(t, dir, t0, "first damage")
	second := damage(t, dir, t0.Add(time.Hour), "second damage")
	want := []string{path + ".bad-20261203T133501Z", path + ".bad-20261203T143501Z"}
	if got := badFiles(t, path); !slices.Equal(got, want) {
		t.Fatalf("bad files %q, want %q", got, want)
	}
	for i, data := range []string{"first damage", "second damage"} {
		if b, err := os.ReadFile(want[i]); err != nil || string(b) != data {
			t.Errorf("%s holds %q (%v), want %q", want[i], b, err, data)
		}
	}
	if first["moved_to"] != want[0] || second["moved_to"] != want[1] {
		t.Errorf("the warnings name %v and %v, want %s and %s", first["moved_to"], second["moved_to"], want[0], want[1])
	}
	if _, ok := second["removed"]; ok {
		t.Errorf("the second warning says files were removed: %v", second)
	}
}

// TestDamagesInOneSecond: damages in the same second each keep their file, the later ones
// numbered after the time, and the oldest removed is the first of that second.
func TestDamagesInOneSecond(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, HomesFile)
	for i := range KeepBad + 1 {
		damage(t, dir, t0.Add(time.Duration(i)*time.Millisecond), fmt.Sprint("damage ", i))
	}
	base := path + ".bad-20261203T133501Z"
	want := []string{base + "-2", base + "-3", base + "-4"}[:KeepBad]
	if got := badFiles(t, path); !slices.Equal(got, want) {
		t.Fatalf("bad files %q, want %q", got, want)
	}
	if b, err := os.ReadFile(want[KeepBad-1]); err != nil || string(b) != fmt.Sprint("damage ", KeepBad) {
		t.Errorf("%s holds %q (%v), want the last damage", want[KeepBad-1], b, err)
	}
}

// TestDamagesBeyondTheBound: KeepBad+1 damages keep the KeepBad newest; the oldest is
// removed, and the warning names both the file kept and the one removed.
func TestDamagesBeyondTheBound(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, HomesFile)
	var names []string
	var last map[string]any
	for i := range KeepBad + 1 {
		at := t0.Add(time.Duration(i) * 24 * time.Hour)
		names = append(names, path+BadSuffix+"-"+at.UTC().Format("20060102T150405Z"))
		last = damage(t, dir, at, fmt.Sprint("damage ", i))
	}
	if got := badFiles(t, path); !slices.Equal(got, names[1:]) {
		t.Fatalf("bad files %q, want %q (the oldest removed)", got, names[1:])
	}
	if last["moved_to"] != names[KeepBad] {
		t.Errorf("the warning names %v as kept, want %s", last["moved_to"], names[KeepBad])
	}
	if removed, _ := last["removed"].([]any); len(removed) != 1 || removed[0] != names[0] {
		t.Errorf("the warning names %v as removed, want [%s]", last["removed"], names[0])
	}
}

// TestMoveAsideOldNames: the one bad file kept before names had a time counts as the oldest;
// a name that only looks like a bad file is left alone; a clock set back does not remove the
// file just moved.
func TestMoveAsideOldNames(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, HomesFile)
	for _, name := range []string{
		path + BadSuffix, // an older entry's
		path + BadSuffix + "-mine",
		path + BadSuffix + "-20261203T133501Z-x",
		path + BadSuffix + "-20270101T000000Z",
		path + BadSuffix + "-20270102T000000Z",
	} {
		if err := os.WriteFile(name, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, []byte("now"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := MoveAside(path, t0) // before the two dated ones: the clock was set back
	if err != nil {
		t.Fatal(err)
	}
	if want := path + BadSuffix + "-20261203T133501Z"; a.To != want {
		t.Errorf("moved to %s, want %s", a.To, want)
	}
	if !slices.Equal(a.Removed, []string{path + BadSuffix}) {
		t.Errorf("removed %q, want only %s", a.Removed, path+BadSuffix)
	}
	want := []string{
		path + BadSuffix + "-20261203T133501Z",
		path + BadSuffix + "-20261203T133501Z-x",
		path + BadSuffix + "-20270101T000000Z",
		path + BadSuffix + "-20270102T000000Z",
		path + BadSuffix + "-mine",
	}
	if got := badFiles(t, path); !slices.Equal(got, want) {
		t.Errorf("bad files %q, want %q", got, want)
	}
	if _, err := MoveAside(filepath.Join(dir, "none"), t0); err == nil {
		t.Error("moving aside a file that is not there did not fail")
	}
}
