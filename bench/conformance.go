//go:build linux

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fenec/fenec-entry/bench/conformance"
)

// conformance: the door's HTTP/1.1 conformance and request-smuggling cases (bench/conformance)
// sent to fenec-entry, nginx and haproxy, all in front of the same recording upstream.

func conformanceMain(args []string) error {
	fs := flag.NewFlagSet("conformance", flag.ExitOnError)
	entryBin := fs.String("entry", "", "a fenec-entry binary to test instead of building ./cmd/fenec-entry")
	targets := fs.String("targets", "nginx,haproxy,fenec-entry", "comma list from nginx,haproxy,fenec-entry")
	cases := fs.String("cases", "", "only the cases whose id matches (a regexp, or a substring)")
	jsonOut := fs.String("json", "", "also write every outcome, with what the upstream saw, as JSON")
	out := fs.String("out", "", "the per-case table (default bench/out/conformance-<UTC time>.md)")
	basePort := fs.Int("base-port", 19400, "first port tried for the listeners")
	keep := fs.Bool("keep", false, "keep the temp dir (configs, logs)")
	list := fs.Bool("list", false, "print the cases (those of -cases) and exit")
	fs.Parse(args)
	cs := conformance.Filter(conformance.Cases(), *cases)
	if *list || len(cs) == 0 {
		for _, c := range cs {
			fmt.Printf("%-32s %-14s %-20s %s\n", c.ID, c.Category, c.Expect, c.What)
		}
		if len(cs) == 0 {
			return fmt.Errorf("no case matches %q", *cases)
		}
		return nil
	}
	tools := map[string]string{}
	for _, t := range strings.Split(*targets, ",") {
		switch t {
		case "nginx":
			tools["nginx"] = "nginx-light"
		case "haproxy":
			tools["haproxy"] = "haproxy"
		case "fenec-entry":
		default:
			return fmt.Errorf("-targets: unknown target %q", t)
		}
	}
	if err := need(tools); err != nil {
		return err
	}
	r, err := newRun("conformance", *keep, *basePort)
	if err != nil {
		return err
	}
	defer r.close()
	up, err := r.addrs(1)
	if err != nil {
		return err
	}
	var upPort int
	fmt.Sscanf(up[0], "127.0.0.1:%d", &upPort)
	u, err := conformance.StartUpstream(up[0])
	if err != nil {
		return err
	}
	defer u.Close()
	var ts []conformance.Target
	for _, t := range strings.Split(*targets, ",") {
		a, err := r.addrs(1)
		if err != nil {
			return err
		}
		var p *proc
		switch t {
		case "nginx": // its parsing settings as shipped; its workers drop root and must reach the temp dir
			os.Chmod(r.tmp, 0o755)
			if p, err = r.startNginx("nginx", nginx{servers: server(a[0], ""), up: upPort, workers: 1}, spec{}); err != nil {
				return err
			}
		case "haproxy":
			f := r.path("haproxy.cfg")
			os.WriteFile(f, []byte(haproxyConf(a[0], upPort, 1, 1024, "5s")), 0o644)
			if p, err = r.start("haproxy", spec{}, "haproxy", "-db", "-f", f); err != nil {
				return err
			}
		case "fenec-entry":
			entry, err := r.entryBin("fenec-entry", *entryBin)
			if err != nil {
				return err
			}
			args, listen, admin, err := r.entryArgs(entry, upPort)
			if err != nil {
				return err
			}
			a[0] = listen
			if p, err = r.start("fenec-entry", spec{}, args...); err != nil {
				return err
			}
			if err := waitOK(p, "http://"+admin+"/readyz"); err != nil {
				return err
			}
		}
		if err := waitOK(p, "http://"+a[0]+"/t/acme/conf/ready"); err != nil {
			return err
		}
		ts = append(ts, conformance.Target{Name: t, Addr: a[0]})
	}
	if *out, err = r.outFile(*out, ".md"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.ctx, 150*time.Second)
	defer cancel()
	t0 := time.Now()
	outs, err := conformance.Run(ctx, ts, cs, conformance.RunOptions{Parallel: 8, Timeout: 3 * time.Second, Settle: 700 * time.Millisecond,
		Records: func(context.Context) ([]conformance.Record, error) { return u.Records(), nil }})
	if err != nil {
		return err
	}
	names := strings.Split(*targets, ",")
	fmt.Printf("## HTTP/1.1 conformance: %s\n\n%s\n%d cases × %d targets in %.1f s\nper-case table: %s\n",
		*targets, conformance.Summary(outs, names), len(cs), len(ts), time.Since(t0).Seconds(), *out)
	if *jsonOut != "" {
		b, err := json.MarshalIndent(outs, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(*out, []byte(conformance.PerCase(outs, names)), 0o644)
}
