package node

import (
	"bytes"
	"io"
	"log"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/proxy"
)

// NewLogger returns the logger cfg asks for, writing to w: one JSON object per line
// (LogFormat json) or zerolog's console format for people (console; colours only when w is a
// terminal), at LogLevel (an unknown level means info), with a timestamp on every line.
func NewLogger(cfg Config, w io.Writer) zerolog.Logger {
	if cfg.LogFormat == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339Nano, NoColor: !isTerminal(w)}
	}
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil || cfg.LogLevel == "" {
		level = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// httpErrorLog adapts net/http's error log (TLS handshake failures, accept errors, handler
// panics) to zerolog lines: handshake failures at debug (scanners make many), the rest at warn.
func httpErrorLog(l zerolog.Logger, listener string) *log.Logger {
	return log.New(httpLogWriter{log: l.With().Str("listener", listener).Logger()}, "", 0)
}

type httpLogWriter struct{ log zerolog.Logger }

func (w httpLogWriter) Write(p []byte) (int, error) {
	msg := bytes.TrimSpace(p)
	ev := w.log.Warn()
	if bytes.HasPrefix(msg, []byte("http: TLS handshake error")) {
		ev = w.log.Debug()
	}
	ev.Bytes("error", msg).Msg("http server")
	return len(p), nil
}

// regionsLog logs regions as an array of {name, routers}.
type regionsLog []proxy.Region

func (rs regionsLog) MarshalZerologArray(a *zerolog.Array) {
	for _, r := range rs {
		a.Object(regionLog(r))
	}
}

type regionLog proxy.Region

func (r regionLog) MarshalZerologObject(e *zerolog.Event) {
	us := make([]string, len(r.Routers))
	for i, u := range r.Routers {
		us[i] = u.Redacted()
	}
	e.Str("name", r.Name).Strs("routers", us)
}
