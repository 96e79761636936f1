// Package state keeps an entry's home table on disk (--state-dir), so that a restarted entry
// starts with what it knew: written behind, read back at start.
//
// It owns the file's frame (format.go: a header, then the record stream every table travels
// in, package homes/record, sealed with the file's key), the write-behind (store.go: at most one write every
// WriteInterval, only when the table changed, streamed from Table.Range into a temporary file
// that is synced and renamed over the old one) and the restore (every record checked first,
// then put back with Table.Restore, oldest first). It also names serf's member snapshot in the
// same directory (SerfSnapshotPath), which serf itself writes.
//
// state knows nothing of HTTP or gossip: it reads and writes one file and calls the homes
// package. A damaged or foreign file is never an error to its caller: it is logged, moved
// aside and the table starts empty.
package state
