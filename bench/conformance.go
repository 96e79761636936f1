//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fenec/fenec-entry/bench/conformance"
)

// conformance: the door's HTTP/1.1 conformance and request-smuggling cases (bench/conformance)
// sent to fenec-entry and nginx, both in front of the same recording upstream.

func conformanceMain(args []string) error {
	fs := flag.NewFlagSet("conformance", flag.ExitOnError)
	entryBin := fs.String("entry", "", "a fenec-entry binary to test instead of building ./cmd/fenec-entry")
	targets := fs.String("targets", "nginx,fenec-entry", "comma list from nginx,fenec-entry")
	cases := fs.String("cases", "", "only the cases whose id matches this regexp")
	out := fs.String("out", "", "the per-case table (default bench/out/conformance-<UTC time>.md)")
	keep := fs.Bool("keep", false, "keep the temp dir (configs, logs)")
	fs.Parse(args)
	cs, err := conformance.Cases(*cases)
	if err != nil {
		return fmt.Errorf("-cases: %w", err)
	}
	names := strings.Split(*targets, ",")
	for _, t := range names {
		if t != "nginx" && t != "fenec-entry" {
			return fmt.Errorf("-targets: unknown target %q", t)
		}
	}
	if err := need(map[string]string{"nginx": "nginx-light"}); err != nil {
		return err
	}
	r, err := newRun("conformance", *keep)
	if err != nil {
		return err
	}
	defer r.close()
	a, err := r.addrs(2)
	if err != nil {
		return err
	}
	u, err := conformance.StartUpstream(a[0])
	if err != nil {
		return err
	}
	defer u.Close()
	var upPort int
	fmt.Sscanf(a[0], "127.0.0.1:%d", &upPort)
	addrs := map[string]string{}
	for _, t := range names {
		if t == "nginx" { // its parsing settings as shipped; its workers drop root and must reach the temp dir
			os.Chmod(r.tmp, 0o755)
			addrs[t] = a[1]
			if _, err = r.startNginx("nginx", nginx{servers: server(a[1], ""), up: upPort, workers: 1}, spec{}, "http://"+a[1]+"/t/acme/conf/ready"); err != nil {
				return err
			}
			continue
		}
		entry, err := r.entryBin("fenec-entry", *entryBin)
		if err != nil {
			return err
		}
		args, listen, admin, err := r.entryArgs(entry, upPort)
		if err != nil {
			return err
		}
		p, err := r.start("fenec-entry", spec{}, args...)
		if err != nil {
			return err
		}
		if err := waitOK(p, "http://"+admin+"/readyz"); err != nil {
			return err
		}
		if err := waitOK(p, "http://"+listen+"/t/acme/conf/ready"); err != nil {
			return err
		}
		addrs[t] = listen
	}
	if *out, err = r.outFile(*out, ".md"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.ctx, 150*time.Second)
	defer cancel()
	t0 := time.Now()
	outs, err := conformance.Run(ctx, names, addrs, cs, u)
	if err != nil {
		return err
	}
	fmt.Printf("## HTTP/1.1 conformance: %s\n\n%s\n%d cases × %d targets in %.1f s\nper-case table: %s\n",
		*targets, conformance.Summary(outs, names), len(cs), len(names), time.Since(t0).Seconds(), *out)
	return os.WriteFile(*out, []byte(conformance.PerCase(outs, names)), 0o644)
}
