package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/node"
	"github.com/fenec/fenec-entry/standin"
)

// The demo: stand-in routers for three regions (two each) and three entries, one per PoP on
// three continents, joined in one encrypted gossip cluster, all in this process on loopback.
// Every port is a fixed base plus --port-offset, so that the printed curl lines work as they
// are.

// demoPoP is one entry of the demo.
type demoPoP struct {
	name, continent string
}

var (
	demoRegions = []string{"eu", "us", "ap"}
	demoPoPs    = []demoPoP{{"ams", "EU"}, {"iad", "NA"}, {"sin", "AS"}}
	demoTenants = map[string]string{
		"acme": "eu", "initech": "eu", "globex": "us", "umbrella": "us", "hooli": "ap", "soylent": "ap",
	}
)

// Base ports; --port-offset moves them all.
const (
	demoRouterBase   = 7101 // region r, router i: 7101 + 100*r + i
	demoEntryBase    = 8080 // entry i: client 8080+i
	demoAdminBase    = 9091 // admin 9091+i
	demoRPCBase      = 7373 // serf RPC 7373+i
	demoGossipBase   = 7946 // memberlist 7946+i (UDP and TCP)
	demoSnapshotBase = 7956 // snapshot 7956+i
)

type demoOptions struct {
	offset int
	logs   string // log level of the entries and routers
}

// demo runs `fenec-entry demo` until ctx ends.
func demo(args []string, stdout, stderr io.Writer) int {
	opts := demoOptions{logs: "warn"}
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !hasVal && i+1 < len(args) {
			val = args[i+1]
			i++
		}
		switch name {
		case "port-offset":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 || n > 50000 {
				fmt.Fprintln(stderr, "fenec-entry demo: --port-offset: want a number from 0 to 50000")
				return 2
			}
			opts.offset = n
		case "log-level":
			if _, err := zerolog.ParseLevel(val); err != nil || val == "" {
				fmt.Fprintln(stderr, "fenec-entry demo: --log-level: want debug, info, warn or error")
				return 2
			}
			opts.logs = val
		case "h", "help":
			fmt.Fprintln(stdout, "usage: fenec-entry demo [--port-offset N] [--log-level warn]\n\n"+
				"Stand-in routers for eu, us and ap and three entries (ams, iad, sin) in one gossip\n"+
				"cluster on loopback; prints URLs and curl lines; Ctrl-C stops everything.")
			return 0
		default:
			fmt.Fprintf(stderr, "fenec-entry demo: --%s: unknown flag (want --port-offset, --log-level)\n", name)
			return 2
		}
	}
	ctx, stop := signalContext(func(os.Signal) {}, func(os.Signal) {
		fmt.Fprintln(stderr, "fenec-entry demo: second signal: stopping at once")
	})
	defer stop()
	if err := runDemo(ctx, opts, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "fenec-entry demo: "+oneLine(err.Error()))
		return 1
	}
	return 0
}

// runDemo starts everything, prints the guide, waits for ctx, and stops everything.
func runDemo(ctx context.Context, o demoOptions, stdout, stderr io.Writer) error {
	level, _ := zerolog.ParseLevel(o.logs)
	cw := zerolog.ConsoleWriter{Out: stderr, TimeFormat: time.TimeOnly, NoColor: true}
	if f, ok := stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			cw.NoColor = false
		}
	}
	logger := zerolog.New(cw).Level(level).With().Timestamp().Logger()
	port := func(base, i int) string { return "127.0.0.1:" + strconv.Itoa(base+o.offset+i) }

	secret := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	token := base64.RawURLEncoding.EncodeToString(secret(24))

	var regions []standin.Region
	var routerSpec []string
	for r, name := range demoRegions {
		reg := standin.Region{Name: name}
		var urls []string
		for i := 0; i < 2; i++ {
			addr := port(demoRouterBase, 100*r+i)
			reg.Addrs = append(reg.Addrs, addr)
			urls = append(urls, "http://"+addr)
		}
		regions = append(regions, reg)
		routerSpec = append(routerSpec, name+"="+strings.Join(urls, ","))
	}
	slog := logger.With().Str("part", "standin").Logger()
	sc, err := standin.Start(standin.Config{Regions: regions, Tenants: demoTenants, EntryToken: token,
		CORS: "*", KeepAlive: 15 * time.Second, Logger: &slog})
	if err != nil {
		return fmt.Errorf("stand-in routers: %w (another demo running? try --port-offset 1000)", err)
	}
	defer sc.Close()

	routers, err := node.ParseRouters(strings.Join(routerSpec, ";"))
	if err != nil {
		return err
	}
	key := secret(32)
	var nodes []*node.Node
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
	}()
	for i, pop := range demoPoPs {
		cfg := node.DefaultConfig()
		cfg.Routers = routers
		cfg.Pop, cfg.Continent, cfg.Node = pop.name, pop.continent, "entry-"+pop.name
		cfg.Listen, cfg.AdminListen = port(demoEntryBase, i), port(demoAdminBase, i)
		cfg.RPCAddr, cfg.GossipBind, cfg.SnapshotListen = port(demoRPCBase, i), port(demoGossipBase, i), port(demoSnapshotBase, i)
		cfg.GossipKey, cfg.EntryToken, cfg.CORS = key, node.Secret(token), "*"
		cfg.Drain = 0
		cfg.Version = readBuildInfo().short()
		if i > 0 {
			cfg.Join = []string{port(demoGossipBase, 0)}
		}
		n, err := node.New(cfg, logger.With().Str("part", pop.name).Logger())
		if err != nil {
			return fmt.Errorf("entry %s: %w", pop.name, err)
		}
		nodes = append(nodes, n)
		if err := n.Start(ctx); err != nil {
			return fmt.Errorf("entry %s: %w (another demo running? try --port-offset 1000)", pop.name, err)
		}
	}
	if err := waitReady(ctx, nodes); err != nil {
		return err
	}
	printGuide(stdout, port)

	<-ctx.Done()
	fmt.Fprintln(stdout, "\nstopping... (Ctrl-C again stops at once)")
	for _, n := range nodes {
		dctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		n.Drain(dctx)
		cancel()
	}
	return nil
}

// waitReady waits until the first entry sees every entry alive in its cluster and every entry
// is ready.
func waitReady(ctx context.Context, nodes []*node.Node) error {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		alive := 0
		for _, m := range nodes[0].Members() {
			if m.State == "alive" {
				alive++
			}
		}
		ready := alive == len(nodes)
		for _, n := range nodes {
			ready = ready && n.Status().Ready
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("interrupted while starting")
		case <-time.After(50 * time.Millisecond):
		}
	}
	return errors.New("the entries did not form one cluster within 15s")
}

func printGuide(w io.Writer, port func(base, i int) string) {
	e := func(i int) string { return "http://" + port(demoEntryBase, i) }
	fmt.Fprintf(w, `
fenec-entry demo: three entries in one encrypted gossip cluster, in front of stand-in routers.

  entries   ams (EU) %s   iad (NA) %s   sin (AS) %s
  status    http://%s/status   http://%s/status   http://%s/status
  routers   eu %s,%s   us %s,%s   ap %s,%s
  tenants   acme, initech -> eu   globex, umbrella -> us   hooli, soylent -> ap

Try, in another terminal:

  # acme lives in eu. The iad entry asks us first (its continent's region); us relays home:
  curl -si %s/t/acme/items/1 | grep -i -e '^HTTP' -e relayed
  # ...and learned acme's home: now it goes straight to eu (no Standin-Relayed-By):
  curl -si %s/t/acme/items/1 | grep -i -e '^HTTP' -e relayed
  # gossip: the sin entry (asks ap first) already knows acme lives in eu:
  curl -si %s/t/acme/items/1 | grep -i -e '^HTTP' -e relayed

  # a write, applied once in its home region:
  curl -s -X POST -d hello %s/t/globex/items; echo
  # with an Idempotency-Key, twice: one apply, the second answer is the first one replayed:
  curl -s -X POST -H 'Idempotency-Key: k-1' -d hi %s/t/globex/items; echo
  curl -si -X POST -H 'Idempotency-Key: k-1' -d hi %s/t/globex/items | grep -i -e '^HTTP' -e replayed -e '"id"'
  curl -s http://%s/_standin/ledger; echo

  # server-sent events through the entry (a tick a second; Ctrl-C to stop):
  curl -N '%s/t/hooli/events?tick=1000'

  # the cluster as serf sees it:
  go tool serf members -rpc-addr %s

Ctrl-C stops everything.
`,
		e(0), e(1), e(2),
		port(demoAdminBase, 0), port(demoAdminBase, 1), port(demoAdminBase, 2),
		port(demoRouterBase, 0), port(demoRouterBase, 1), port(demoRouterBase, 100), port(demoRouterBase, 101),
		port(demoRouterBase, 200), port(demoRouterBase, 201),
		e(1), e(1), e(2), e(0), e(0), e(0), port(demoRouterBase, 100), e(2), port(demoRPCBase, 0))
}
