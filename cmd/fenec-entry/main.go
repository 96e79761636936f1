// Command fenec-entry is the global front door of Fenec: `fenec-entry serve` runs one entry
// (see docs/REFERENCE.md), `fenec-entry version` says which build it is.
//
// Exit status: 0 after a clean stop (a drain after SIGTERM or SIGINT), 1 on a runtime failure
// (a listener that cannot be bound or stops serving, a second signal during the drain), 2 on
// bad configuration or usage, reported as one line on stderr that names the flag. Bad
// configuration includes what is found only when files are read at start (--router-ca,
// --tls-cert, --tls-key), so that 2 always means "fix the configuration", 1 "look at the host".
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/node"
	"github.com/fenec/fenec-entry/procs"
	"github.com/fenec/fenec-entry/upgrade"
)

func main() {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// run is main without the process: it returns the exit status.
func run(args []string, stdout, stderr io.Writer, env func(string) string) int {
	if len(args) == 0 {
		printUsage(stderr)
		return 2
	}
	switch cmd := args[0]; cmd {
	case "serve":
		return serve(args[1:], stdout, stderr, env)
	case "demo":
		return demo(args[1:], stdout, stderr)
	case "version":
		if len(args) == 2 && slices.Contains([]string{"-h", "-help", "--help"}, args[1]) {
			io.WriteString(stdout, versionUsage)
			return 0
		}
		if len(args) > 1 {
			fmt.Fprintln(stderr, "fenec-entry version: takes no arguments")
			return 2
		}
		fmt.Fprintln(stdout, readBuildInfo())
		return 0
	case "help", "-h", "-help", "--help":
		printUsage(stdout)
		return 0
	default:
		if strings.HasPrefix(cmd, "-") {
			// Not printed: it may be --gossip-key=... put before the command.
			fmt.Fprintln(stderr, "fenec-entry: flags go after the command: fenec-entry serve [flags] (see fenec-entry help)")
		} else {
			fmt.Fprintf(stderr, "fenec-entry: unknown command %q (want serve, demo or version; see fenec-entry help)\n", cmd)
		}
		return 2
	}
}

// serve runs `fenec-entry serve`.
func serve(args []string, stdout, stderr io.Writer, env func(string) string) int {
	cfg, warnings, err := parse(args, env)
	if errors.Is(err, errHelp) {
		printServeUsage(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "fenec-entry serve: "+oneLine(err.Error()))
		return 2
	}
	cfg.Version = readBuildInfo().short()
	// The process's one logger passes every level; zerolog's global level filters, so that a
	// reload can change --log-level for every part at once (one atomic, no rebuilt loggers).
	all := cfg
	all.LogLevel = zerolog.TraceLevel.String()
	logger := node.NewLogger(all, stderr)
	zerolog.SetGlobalLevel(logLevel(cfg.LogLevel))
	cfg.SetLogLevel = func(l string) { zerolog.SetGlobalLevel(logLevel(l)) }
	for _, w := range warnings {
		logger.Warn().Str("flag", w.flag).Msg(w.msg)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP) // a reload (systemctl reload), never the default: exit
	defer func() { signal.Stop(hup); close(hup) }()
	reloads := make(chan struct{}, 1)
	go func() {
		for range hup {
			select {
			case reloads <- struct{}{}:
			default: // one already waiting covers this one
			}
		}
	}()
	cfg.ReloadOn = reloads
	if cfg.PIDFile != "" {
		if st, err := os.Stat(filepath.Dir(cfg.PIDFile)); err != nil || !st.IsDir() {
			fmt.Fprintf(stderr, "fenec-entry serve: --pid-file: %q: its directory does not exist\n", cfg.PIDFile)
			return 2
		}
	}
	// An upgrade in place (SIGUSR2): a new process from the same path on the same sockets,
	// with the home table (package upgrade); this process may be that new one.
	proc, err := upgrade.New(cfg.PIDFile)
	if err != nil {
		logger.Warn().Err(err).Msg("upgrades in place are off: SIGUSR2 will change nothing")
	} else {
		defer proc.Stop()
		cfg.Upgrades = proc
	}
	usr2 := make(chan os.Signal, 1)
	notifyUpgrade(usr2) // SIGUSR2, never its default (exit); none where there is no SIGUSR2
	defer func() { signal.Stop(usr2); close(usr2) }()
	upgrades := make(chan struct{}, 1)
	go func() {
		for range usr2 {
			select {
			case upgrades <- struct{}{}:
			default: // one already waiting covers this one
			}
		}
	}()
	cfg.UpgradeOn = upgrades
	cfg.AdaptProcs = adaptProcs(env)
	for _, w := range unknownEnv(os.Environ()) {
		logger.Warn().Msg(w)
	}

	ctx, stop := signalContext(drainNotice(logger, terminal(stderr), cfg.Drain), secondNotice(logger, terminal(stderr)))
	defer stop()
	err = node.Run(ctx, cfg, logger)
	var ce *node.ConfigError
	switch {
	case errors.As(err, &ce):
		fmt.Fprintln(stderr, "fenec-entry serve: "+oneLine(ce.Error()))
		return 2
	case err != nil:
		// A runtime failure (an address in use, a listener that stops serving) reads as bad
		// configuration does, one line naming the flag, but exits 1: the host, not the flags.
		fmt.Fprintln(stderr, "fenec-entry serve: "+oneLine(err.Error()))
		return 1
	}
	logger.Info().Msg("entry stopped")
	return 0
}

// adaptProcs: the Ps follow the load (package procs) unless the environment sets GOMAXPROCS,
// which is then the operator's fixed choice, as for any Go program.
func adaptProcs(env func(string) string) bool {
	return procs.Supported && env("GOMAXPROCS") == ""
}

// logLevel is a --log-level as zerolog's level (validated already; info if not).
func logLevel(s string) zerolog.Level {
	l, err := zerolog.ParseLevel(s)
	if err != nil || s == "" {
		return zerolog.InfoLevel
	}
	return l
}

// openRequestsGrace is how long open requests get after the drain, for the notice.
const openRequestsGrace = node.ShutdownGrace

// drainNotice says, on the first signal, that the entry drains and for how long, and that a
// second signal stops it at once: a JSON log line at info (stderr's format, for collectors),
// and a plain sentence on tty for an operator at a terminal (nil: none), whatever the log
// level, so a Ctrl-C is never met with silence.
func drainNotice(log zerolog.Logger, tty io.Writer, drain time.Duration) func(os.Signal) {
	return func(s os.Signal) {
		log.Info().Str("signal", s.String()).Stringer("drain", drain).Stringer("grace", openRequestsGrace).
			Msg("draining: serving --drain more with Connection: close, then waiting up to the grace for open requests; a second signal stops at once")
		if tty != nil {
			fmt.Fprintf(tty, "fenec-entry: %s: draining for %s (--drain), then up to %s for open requests; Ctrl-C again stops at once\n",
				s, drain, openRequestsGrace)
		}
	}
}

// secondNotice says that a second signal stops the entry without finishing the drain.
func secondNotice(log zerolog.Logger, tty io.Writer) func(os.Signal) {
	return func(s os.Signal) {
		log.Warn().Str("signal", s.String()).Msg("second signal: exiting without finishing the drain")
		if tty != nil {
			fmt.Fprintf(tty, "fenec-entry: %s again: stopping at once\n", s)
		}
	}
}

// terminal returns w if it is a terminal, else nil: plain sentences go to a person only,
// never into a stream of JSON log lines that a collector reads (docs/REFERENCE.md, Streams,
// cancellation, errors).
func terminal(w io.Writer) io.Writer {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return w
}

// signalContext returns a context cancelled on the first SIGINT or SIGTERM, after first has
// said what happens now (the entry drains); a second one calls second and exits the process
// at once with status 1, as serf's agent does. Calling stop releases the signals.
func signalContext(first, second func(os.Signal)) (ctx context.Context, stop func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	ctx, stopWatch := watchSignals(ch, first, second, os.Exit)
	return ctx, func() {
		signal.Stop(ch)
		stopWatch()
	}
}

// watchSignals is signalContext without the process: signals arrive on ch, and exit ends
// the process. stop ends the watch and cancels ctx; it waits for the watch to end.
func watchSignals(ch <-chan os.Signal, first, second func(os.Signal), exit func(int)) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case s := <-ch:
			first(s)
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-ch:
			second(s)
			exit(1)
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			close(done)
			<-ended
			cancel()
		})
	}
}

// oneLine keeps an error message on one line, whatever an underlying error holds.
func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
