package gossip

import (
	"errors"
	"io/fs"
	"os"
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

// moveSnapshotAside renames the snapshot to path+".bad" (keeping the last bad one) and
// returns path, free for a fresh snapshot, or "" if it could not be moved.
func (g *Gossip) moveSnapshotAside(path string) string {
	bad := path + ".bad"
	os.RemoveAll(bad) // a directory moved aside before
	if err := os.Rename(path, bad); err != nil {
		g.log.Error().Err(err).Str("file", path).Msg("gossip: cannot move serf's member snapshot aside: starting without it")
		return ""
	}
	g.log.Warn().Str("file", path).Str("moved_to", bad).Msg("gossip: serf's member snapshot moved aside: no rejoin of known members this time")
	return path
}
