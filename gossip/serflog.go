package gossip

import (
	"bytes"

	"github.com/rs/zerolog"
)

// logWriter turns serf's and memberlist's log lines ("2026/01/02 15:04:05 [WARN] serf: ...")
// into zerolog debug lines: they are for debugging gossip; what operators need (member
// changes, drops, queue depth) has its own info lines and metrics. Safe for concurrent use.
type logWriter struct{ log zerolog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	if e := w.log.Debug(); e.Enabled() {
		line := bytes.TrimRight(p, "\n")
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
