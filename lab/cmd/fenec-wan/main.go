// Command fenec-wan runs the lab's WAN: a network namespace per site, linked by the
// emulator with the delays of the matrix (lab/README.md), until it is interrupted or -for has
// passed. It prints each site's namespace and address, then, at the end, what each link
// carried. Run programs in a site with `ip netns exec <namespace> <program>`. Needs root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/fenec/fenec-entry/lab/wan"
)

func main() {
	sites := flag.String("sites", strings.Join(wan.Sites(), ","), "sites to make, comma-separated, from the matrix")
	seed := flag.Uint64("seed", 1, "seed of the packet loss")
	loss := flag.Float64("loss", wan.DefaultLoss, "loss of every link, each way, 0 to 1")
	runFor := flag.Duration("for", 0, "stop after this long (0: at Ctrl-C or SIGTERM)")
	flag.Parse()
	if err := run(strings.Split(*sites, ","), *seed, *loss, *runFor); err != nil {
		fmt.Fprintln(os.Stderr, "fenec-wan:", err)
		os.Exit(1)
	}
}

func run(sites []string, seed uint64, loss float64, runFor time.Duration) error {
	if removed, err := wan.RemoveStale(); err != nil {
		fmt.Fprintln(os.Stderr, "fenec-wan: removing stale namespaces:", err)
	} else if len(removed) > 0 {
		fmt.Printf("removed %d namespaces left by dead runs\n", len(removed))
	}
	for _, a := range sites {
		for _, b := range sites {
			if _, ok := wan.RTT(a, b); a != b && !ok {
				return fmt.Errorf("no round trip between %q and %q in the matrix (sites: %s)", a, b, strings.Join(wan.Sites(), ","))
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, runFor)
		defer cancel()
	}
	e, err := wan.Start(ctx, wan.Config{
		Sites: sites,
		Seed:  seed,
		Link: func(a, b string) wan.Link {
			l := wan.MatrixLink(a, b)
			l.Loss = loss
			return l
		},
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := e.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "fenec-wan:", err)
		}
	}()

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "site\taddress\tnamespace")
	for _, s := range sites {
		fmt.Fprintf(w, "%s\t%s\t%s\n", s, e.Addr(s), e.Namespace(s))
	}
	w.Flush()
	fmt.Printf("\nround trips in ms (each way half; loss %.2g %% each way):\n", loss*100)
	fmt.Fprint(w, "\t"+strings.Join(sites, "\t")+"\n")
	for _, a := range sites {
		fmt.Fprint(w, a)
		for _, b := range sites {
			if rtt, ok := wan.RTT(a, b); ok {
				fmt.Fprintf(w, "\t%.1f", float64(rtt)/float64(time.Millisecond))
			} else {
				fmt.Fprint(w, "\t-")
			}
		}
		fmt.Fprintln(w)
	}
	w.Flush()
	if len(sites) > 1 {
		a, b := sites[0], sites[1]
		fmt.Printf("\ntry: ip netns exec %s ping -c 3 %s   # %s to %s (iputils-ping)\n", e.Namespace(a), e.Addr(b), a, b)
	}
	fmt.Println("running; Ctrl-C stops it and removes the namespaces")
	<-ctx.Done()

	st := e.Stats()
	fmt.Fprintln(w, "\nfrom\tto\tdelivered\tlost\toverflow\tfailed")
	for _, p := range st.Pairs {
		if p.Delivered+p.Lost+p.Overflow+p.Failed > 0 {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\n", p.From, p.To, p.Delivered, p.Lost, p.Overflow, p.Failed)
		}
	}
	w.Flush()
	fmt.Printf("unroutable: %d\n", st.Unroutable)
	return nil
}
