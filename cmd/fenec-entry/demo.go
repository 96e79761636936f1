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
	demoRouterBase = 7101 // region r, router i: 7101 + 100*r + i
	demoEntryBase  = 8080 // entry i: client 8080+i
	demoAdminBase  = 9091 // admin 9091+i
	demoRPCBase    = 7373 // serf RPC 7373+i
	demoGossipBase = 7946 // memberlist 7946+i (UDP and TCP)
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
			io.WriteString(stdout, demoUsage)
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
func runDemo(ctx context.Context, o demoOptions, stdout, stderr io.Writer) (err error) {
	stopping := false
	defer func() { // the first registered, so the last to run: everything else is closed
		if stopping && err == nil {
			fmt.Fprintln(stdout, "stopped: the entries drained and the stand-in routers are closed")
		}
	}()
	level, _ := zerolog.ParseLevel(o.logs)
	cw := zerolog.ConsoleWriter{Out: stderr, TimeFormat: time.TimeOnly, NoColor: terminal(stderr) == nil}
	logger := zerolog.New(cw).Level(level).With().Timestamp().Logger()
	ports := demoPorts{offset: o.offset}

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
			addr := ports.router(r, i)
			reg.Addrs = append(reg.Addrs, addr)
			urls = append(urls, "http://"+addr)
		}
		regions = append(regions, reg)
		routerSpec = append(routerSpec, name+"="+strings.Join(urls, ","))
	}
	slog := logger.With().Str("part", "standin").Logger()
	// Items: item 1 of every tenant, so that the guide's reads find one (200, not 404).
	sc, err := standin.Start(standin.Config{Regions: regions, Tenants: demoTenants, EntryToken: token,
		CORS: "*", KeepAlive: 15 * time.Second, Logger: &slog, Items: 1})
	if err != nil {
		return fmt.Errorf("stand-in routers: %w (another demo running? try --port-offset 1000)", err)
	}
	defer sc.Close()

	routers, err := parseRouters(strings.Join(routerSpec, ";"))
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
		cfg.Listen, cfg.AdminListen = ports.addr(demoEntryBase, i), ports.addr(demoAdminBase, i)
		cfg.RPCAddr, cfg.GossipBind = ports.addr(demoRPCBase, i), ports.addr(demoGossipBase, i)
		cfg.GossipKey, cfg.EntryToken, cfg.CORS = key, node.Secret(token), "*"
		cfg.Drain = 0
		cfg.Version = readBuildInfo().short()
		if i > 0 {
			cfg.Join = []string{ports.addr(demoGossipBase, 0)}
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
	printGuide(stdout, ports)

	<-ctx.Done()
	stopping = true
	fmt.Fprintln(stdout, "\nstopping... (Ctrl-C again stops at once)")
	for _, n := range nodes {
		dctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		n.Drain(dctx)
		cancel()
	}
	return nil
}

// waitReady waits until every entry sees every entry alive in its cluster (so that a home
// learned at one is sent to all the others) and every entry is ready.
func waitReady(ctx context.Context, nodes []*node.Node) error {
	limit := time.NewTimer(15 * time.Second)
	defer limit.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ready := true
		for _, n := range nodes {
			alive := 0
			for _, m := range n.Members() {
				if m.State == "alive" {
					alive++
				}
			}
			ready = ready && alive == len(nodes) && n.Status().Ready
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("interrupted while starting")
		case <-limit.C:
			return errors.New("the entries did not form one cluster within 15s")
		case <-tick.C:
		}
	}
}

// demoPorts are the demo's addresses for one --port-offset.
type demoPorts struct{ offset int }

// addr is 127.0.0.1 and port base+i, moved by the offset.
func (p demoPorts) addr(base, i int) string {
	return "127.0.0.1:" + strconv.Itoa(base+p.offset+i)
}

func (p demoPorts) entry(i int) string     { return "http://" + p.addr(demoEntryBase, i) }
func (p demoPorts) admin(i int) string     { return "http://" + p.addr(demoAdminBase, i) }
func (p demoPorts) router(r, i int) string { return p.addr(demoRouterBase, 100*r+i) }

// demoStep is one shell line of the guide and what it shows. Every line works as printed,
// pasted one by one or all at once (TestDemo runs them so).
type demoStep struct {
	key   string   // names the step for TestDemo
	say   []string // the comment above it, one entry a line
	cmd   string   // one line for sh, bash or zsh
	until bool     // runs until Ctrl-C
	blank bool     // a blank line before it
}

// demoSteps is the guide for ports: homes learned at one entry and used at all, writes,
// a region broken and mended, events and the members.
func demoSteps(p demoPorts) []demoStep {
	ams, iad, sin := p.entry(0), p.entry(1), p.entry(2)
	eu0, eu1, us0 := p.router(0, 0), p.router(0, 1), p.router(1, 0)
	const head = ` | grep -i -e '^HTTP' -e relayed -e '^{'`
	marks := "curl -s " + p.admin(0) + `/status.json | grep -e '"marks"' -e '"region"' -e '"observer"' -e '"reads_until"'`
	fault := func(mode string) string {
		return "curl -s -d mode=" + mode + " http://" + eu0 + "/_standin/fault http://" + eu1 + "/_standin/fault"
	}
	digest := func(i int) string { return `"$(curl -s ` + p.admin(i) + `/status.json | grep digest)"` }
	return []demoStep{
		{key: "relayed", say: []string{
			"acme lives in eu. The iad entry (North America) asks us first; us relays to eu:"},
			cmd: "curl -si " + iad + "/t/acme/items/1" + head},
		{key: "straight", say: []string{
			"iad learned acme's home from that answer: now straight to eu (no Standin-Relayed-By):"},
			cmd: "curl -si " + iad + "/t/acme/items/1" + head},
		{key: "wait", say: []string{
			"gossip: wait until the sin entry holds the homes iad holds (milliseconds on loopback)..."},
			cmd: "until [ " + digest(2) + " = " + digest(1) + " ]; do sleep 0.1; done"},
		{key: "gossiped", say: []string{
			"...and sin (Asia: ap first) sends acme straight to eu too, never having asked:"},
			cmd: "curl -si " + sin + "/t/acme/items/1" + head},

		{key: "write", blank: true, say: []string{"a write, applied once, in globex's home region (us):"},
			cmd: "curl -si -X POST -d hello " + ams + "/t/globex/items | grep -e '^HTTP' -e '^{'"},
		{key: "keyed", say: []string{
			"with an Idempotency-Key, twice: one write; the second answer is the first one replayed:"},
			cmd: "curl -si -X POST -H 'Idempotency-Key: k-1' -d hi " + ams + "/t/globex/items" +
				" | grep -i -e '^HTTP' -e replayed -e '^{'"},
		{key: "replayed",
			cmd: "curl -si -X POST -H 'Idempotency-Key: k-1' -d hi " + ams + "/t/globex/items" +
				" | grep -i -e '^HTTP' -e replayed -e '^{'"},
		{key: "ledger", say: []string{"every write the routers applied:"},
			cmd: "curl -s http://" + us0 + "/_standin/ledger"},

		{key: "break", blank: true, say: []string{
			"break eu: both its routers answer 502 without Fenec-Shard, as a load balancer with no backend:"},
			cmd: fault("unmarked_5xx")},
		{key: "write-fails", say: []string{
			"a write at ams (Europe: eu first) for umbrella, heard nowhere yet. eu's 502 may come after",
			"the write ran, so the entry does not send it elsewhere (it could run twice): 502",
			"may_have_run, and eu is marked, at every entry within moments (see the /status pages):"},
			cmd: "curl -si -X POST -d once " + ams + "/t/umbrella/items | grep -e '^HTTP' -e '^{'"},
		{key: "marked", cmd: marks},
		{key: "avoids", say: []string{
			"the same write again: plain writes ask eu last now, so us, umbrella's home, takes it: 201"},
			cmd: "curl -si -X POST -d again " + ams + "/t/umbrella/items | grep -e '^HTTP' -e '^{'"},
		{key: "mend", say: []string{"mend eu; its mark stays until one of its routers answers..."},
			cmd: fault("ok")},
		{key: "clears", say: []string{
			"...as they do to any request that reaches them, such as a read for initech (home eu). For " +
				strconv.Itoa(int(node.DefaultReadBackoff/time.Second)) + " s",
			"after eu failed, ams asks it last, so us takes the read and relays it to eu (Standin-Relayed-By):"},
			cmd: "curl -si " + ams + "/t/initech/items/1" + head},
		{key: "cleared", say: []string{"no mark left:"}, cmd: marks},

		{key: "events", blank: true, until: true, say: []string{
			"server-sent events through the entry, a tick a second (Ctrl-C to stop):"},
			cmd: "curl -N '" + sin + "/t/hooli/events?tick=1000'"},
		{key: "members", say: []string{"the cluster as serf sees it (in this source tree):"},
			cmd: "go tool serf members -rpc-addr " + p.addr(demoRPCBase, 0)},
	}
}

func printGuide(w io.Writer, p demoPorts) {
	fmt.Fprintf(w, `
fenec-entry demo: three entries in one encrypted gossip cluster, in front of stand-in routers.

  entries   ams (EU) %s   iad (NA) %s   sin (AS) %s
  status    %s/status   %s/status   %s/status
  routers   eu %s,%s   us %s,%s   ap %s,%s
  tenants   acme, initech -> eu   globex, umbrella -> us   hooli, soylent -> ap   (each has item 1)

Try, in another terminal; the lines work pasted all at once too (in zsh, first run
setopt interactivecomments):
`,
		p.entry(0), p.entry(1), p.entry(2), p.admin(0), p.admin(1), p.admin(2),
		p.router(0, 0), p.router(0, 1), p.router(1, 0), p.router(1, 1), p.router(2, 0), p.router(2, 1))
	for i, st := range demoSteps(p) {
		if st.blank || i == 0 {
			fmt.Fprintln(w)
		}
		for _, l := range st.say {
			fmt.Fprintln(w, "  # "+l)
		}
		fmt.Fprintln(w, "  "+st.cmd)
	}
	fmt.Fprint(w, "\nCtrl-C stops everything.\n")
}
