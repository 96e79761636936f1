package gossip

import (
	"bytes"
	"sync/atomic"

	"github.com/rs/zerolog"
)

// logWriter turns serf's and memberlist's log lines ("2026/01/02 15:04:05 [WARN] serf: ...")
// into zerolog debug lines: they are for debugging gossip; what operators need (member
// changes, drops, queue depth) has its own info lines and metrics. The one exception is a
// node name conflict, which serf reports only in its log and answers by shutting itself
// down: it becomes an error line naming this entry's name and the other member's address.
// A message memberlist could not open for the gossip key is also said (keyReport), besides
// its debug line. Safe for concurrent use.
type logWriter struct {
	log  zerolog.Logger
	node string                  // this entry's node name, for the conflict line
	addr *atomic.Pointer[string] // this entry's gossip address, for the conflict line; may be nil
	keys *keyReport              // nil: key mismatches are not looked for
}

// logWriter is the logWriter of serf's and memberlist's lines for g.
func (g *Gossip) logWriter() logWriter {
	return logWriter{log: g.log, node: g.cfg.NodeName, addr: &g.selfAddr, keys: g.keyRep}
}

// conflictMarker begins the rest of serf's line "Node name conflicts with another node at
// <ip>:<port>. Names must be unique! ...".
var conflictMarker = []byte("Node name conflicts with another node at ")

func (w logWriter) Write(p []byte) (int, error) {
	line := bytes.TrimRight(p, "\n")
	if i := bytes.Index(line, conflictMarker); i >= 0 {
		other := line[i+len(conflictMarker):]
		if j := bytes.Index(other, []byte(". ")); j >= 0 {
			other = other[:j]
		}
		self := ""
		if w.addr != nil {
			if a := w.addr.Load(); a != nil {
				self = *a
			}
		}
		w.log.Error().Str("node", w.node).Str("addr", self).Str("other_addr", string(other)).
			Msg("gossip: another member holds this entry's node name; give each entry a unique --node " +
				"(serf resolves the conflict by shutting one down)")
		return len(p), nil
	}
	if w.keys != nil {
		w.keys.received(line)
	}
	if e := w.log.Debug(); e.Enabled() {
		level := ""
		if i := bytes.IndexByte(line, '['); i >= 0 {
			if j := bytes.IndexByte(line[i:], ']'); j > 0 {
				level = string(line[i+1 : i+j])
				line = bytes.TrimLeft(line[i+j+1:], " ")
			}
		}
		e.Str("serf_level", level).Msg(string(line))
	}
	return len(p), nil
}
