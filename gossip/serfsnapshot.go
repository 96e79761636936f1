package gossip

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/fenec/fenec-entry/state"
)

// maxSnapshotSize bounds serf's member snapshot at start. serf compacts the file once it
// passes 128 KiB or 256 B a member (whichever is more), so a healthy one is far below this;
// a larger one is not serf's and would be read whole into memory (serf reads it by lines).
const maxSnapshotSize = 16 << 20

// checkSnapshot returns the snapshot path to give serf: Config.SnapshotPath, after moving
// aside a file serf could not use (not a regular file, too large, not openable for
// appending), or "" when there is none to give or the bad file cannot be moved. serf itself
// skips lines it does not understand, and a truncated last line, with a warning each.
func (g *Gossip) checkSnapshot() string {
	path := g.cfg.SnapshotPath
	if path == "" {
		return ""
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return path
	case err != nil:
		g.log.Error().Err(err).Str("file", path).Msg("gossip: cannot read serf's member snapshot: starting without it")
		return ""
	case !fi.Mode().IsRegular():
		g.log.Warn().Str("file", path).Str("reason", "not a regular file").Msg("gossip: serf's member snapshot ignored")
		return g.moveSnapshotAside(path)
	case fi.Size() > maxSnapshotSize:
		g.log.Warn().Str("file", path).Int64("bytes", fi.Size()).Str("reason", "too large for serf's").
			Msg("gossip: serf's member snapshot ignored")
		return g.moveSnapshotAside(path)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		g.log.Warn().Err(err).Str("file", path).Msg("gossip: serf's member snapshot cannot be opened")
		return g.moveSnapshotAside(path)
	}
	f.Close()
	return path
}

// moveSnapshotAside moves the snapshot aside with state.MoveAside (path+".bad-" and the time,
// one file for each damage, the state.KeepBad newest kept) and returns path, free for a fresh
// snapshot, or "" if it could not be moved.
func (g *Gossip) moveSnapshotAside(path string) string {
	a, err := state.MoveAside(path, g.cfg.Clock.Now())
	if err != nil {
		g.log.Error().Err(err).Str("file", path).Msg("gossip: cannot move serf's member snapshot aside: starting without it")
		return ""
	}
	a.Log(g.log.Warn().Str("file", path)).Msg("gossip: serf's member snapshot moved aside: no rejoin of known members this time")
	return path
}

// maxKnown bounds the members taken from the snapshot for the joiner.
const maxKnown = 1024

// snapshotMembers returns the addresses (ip:port) of the members serf's snapshot at path
// lists as alive, other than self, replaying its "alive:" and "not-alive:" lines as serf does
// and ignoring a "leave" as RejoinAfterLeave makes serf do; at most maxKnown, sorted. serf
// rejoins them itself at start, but once each: the joiner keeps trying them (joinTargets)
// until a first peer answers. A file it cannot read gives none.
func snapshotMembers(path, self string) []string {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxSnapshotSize {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	alive := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		if info, ok := strings.CutPrefix(line, "alive: "); ok {
			if i := strings.LastIndexByte(info, ' '); i > 0 && info[:i] != self {
				if _, had := alive[info[:i]]; had || len(alive) < maxKnown {
					alive[info[:i]] = info[i+1:]
				}
			}
		} else if name, ok := strings.CutPrefix(line, "not-alive: "); ok {
			delete(alive, name)
		}
	}
	out := make([]string, 0, len(alive))
	for _, a := range alive {
		out = append(out, a)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
