// Command fenec-standin runs stand-in Fenec routers: every router of every region listed, in
// one process, for development, tests, the chaos suite and the demo. They do what a real Fenec
// router must do for the entry (Fenec-Shard, Fenec-Home, the relay to the home region, the
// Fenec-Client check, a write applied once), with faults on demand; README.md in this
// directory (cmd/fenec-standin/README.md) is the guide.
//
//	fenec-standin --region eu=127.0.0.1:7101,127.0.0.1:7102 --region us=127.0.0.1:7201 \
//	    --tenants acme=eu,globex=us [--items N] [--entry-token T] [--http-cors '*']
//
// Once every router listens, it prints one JSON line per router on stdout
// ({"region":..,"addr":..,"url":..}; useful with port 0), then serves until SIGINT or SIGTERM,
// closes cleanly and exits 0. Bad configuration exits 2 with one line on stderr naming the
// flag; a listen failure exits 1. Logs go to stderr, one JSON object per line. The faults,
// the directory and the ledger are driven and read through the admin API, /_standin/ on every
// router (see README.md).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/fenec/fenec-entry/standin"
	"github.com/rs/zerolog"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the stand-in until ctx is done and returns the exit status.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	opts, err := parseArgs(args, lookupEnv)
	if errors.Is(err, errHelp) {
		fmt.Fprint(stdout, usage())
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "fenec-standin: %v\n", err)
		return 2
	}
	logger := zerolog.New(stderr).Level(opts.logLevel).With().Timestamp().Logger()
	cfg := opts.config()
	cfg.Logger = &logger

	cluster, err := standin.Start(cfg)
	if err != nil {
		var ce *standin.ConfigError
		if errors.As(err, &ce) { // parseArgs validated the config: should not happen
			fmt.Fprintf(stderr, "fenec-standin: %v\n", configFlagError(ce))
			return 2
		}
		fmt.Fprintf(stderr, "fenec-standin: --region: %v\n", strings.TrimPrefix(err.Error(), "standin: "))
		return 1
	}
	defer cluster.Close()
	for _, f := range opts.faults {
		if err := cluster.SetFault(f.addr, f.fault); err != nil {
			fmt.Fprintf(stderr, "fenec-standin: --fault: %v\n", err)
			return 1
		}
	}

	enc := json.NewEncoder(stdout)
	for _, rt := range cluster.Routers() {
		enc.Encode(map[string]string{"region": rt.Region(), "addr": rt.Addr(), "url": rt.URL()})
	}
	logger.Info().Int("routers", len(cluster.Routers())).Int("tenants", len(cfg.Tenants)).
		Int("items", cfg.Items).Bool("entry_token", cfg.EntryToken != "").Str("cors", cfg.CORS).
		Msg("stand-in ready")

	<-ctx.Done()
	logger.Info().Msg("stopping")
	if err := cluster.Close(); err != nil {
		fmt.Fprintf(stderr, "fenec-standin: close: %v\n", err)
		return 1
	}
	return 0
}
