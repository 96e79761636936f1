// Command fenec-entry is the global front door of Fenec: `fenec-entry serve` runs one entry
// (see CONTRACT.md), `fenec-entry version` says which build it is.
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
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/node"
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
			fmt.Fprintf(stderr, "fenec-entry: unknown command %q (want serve or version; see fenec-entry help)\n", cmd)
		}
		return 2
	}
}

// serve runs `fenec-entry serve`.
func serve(args []string, stdout, stderr io.Writer, env func(string) string) int {
	cfg, err := parse(args, env)
	if errors.Is(err, errHelp) {
		printServeUsage(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "fenec-entry serve: "+oneLine(err.Error()))
		return 2
	}
	cfg.Version = readBuildInfo().short()
	logger := node.NewLogger(cfg, stderr)
	for _, w := range unknownEnv(os.Environ()) {
		logger.Warn().Msg(w)
	}

	ctx, stop := signalContext(logger)
	defer stop()
	err = node.Run(ctx, cfg, logger)
	var ce *node.ConfigError
	switch {
	case errors.As(err, &ce):
		fmt.Fprintln(stderr, "fenec-entry serve: "+oneLine(ce.Error()))
		return 2
	case err != nil:
		logger.Error().Err(err).Msg("entry stopped")
		return 1
	}
	logger.Info().Msg("entry stopped")
	return 0
}

// signalContext returns a context cancelled on the first SIGINT or SIGTERM (the entry
// drains); a second one exits the process at once with status 1, as serf's agent does.
// Calling stop releases the signals.
func signalContext(log zerolog.Logger) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			log.Info().Str("signal", s.String()).Msg("draining; a second signal exits at once")
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-ch:
			log.Warn().Str("signal", s.String()).Msg("second signal: exiting without finishing the drain")
			os.Exit(1)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel()
	}
}

// oneLine keeps an error message on one line, whatever an underlying error holds.
func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
