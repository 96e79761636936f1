// Command conformance is an HTTP/1.1 conformance and request-smuggling run for reverse
// proxies (go run ./bench conformance runs it on fenec-entry, nginx and haproxy).
//
//	conformance upstream -listen 127.0.0.1:P
//	    the recording upstream: a raw TCP server with a strict HTTP/1.1 framing parser that
//	    records every request it sees (GET /__conformance/records answers them as JSON)
//	conformance run -upstream 127.0.0.1:P -target nginx=127.0.0.1:N ... [-cases RE]
//	    sends every case to every target, fetches what the upstream saw, scores, and prints
//	    a markdown summary; -out FILE gets the per-case table, -json FILE everything
//	conformance list [-cases RE]
//	    the cases
//
// Every case is a few raw bytes sent on a fresh connection. Its requests carry the path
// /t/acme/conf/<target>.<case> and any request hidden in a body the path
// /t/acme/smuggled/<target>.<case>, so that what the upstream saw is attributed to one case
// on one target, and a smuggled request is recognised.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "upstream":
		err = upstreamMain(os.Args[2:])
	case "run":
		err = runMain(os.Args[2:])
	case "list":
		err = listMain(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: conformance upstream|run|list [flags] (see -h of each)")
	os.Exit(2)
}

func upstreamMain(args []string) error {
	fs := flag.NewFlagSet("upstream", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	fs.Parse(args)
	u, err := StartUpstream(*listen)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "conformance upstream on", u.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return u.Close()
}

// Target is a proxy under test.
type Target struct{ Name, Addr string }

type targetList []Target

func (t *targetList) String() string { return fmt.Sprint(*t) }
func (t *targetList) Set(s string) error {
	name, addr, ok := strings.Cut(s, "=")
	if !ok || name == "" || addr == "" || !regexp.MustCompile(`^[a-z0-9-]+$`).MatchString(name) {
		return errors.New("want name=host:port, the name of [a-z0-9-]")
	}
	*t = append(*t, Target{name, addr})
	return nil
}

// Filter keeps the cases whose id matches pattern (a regexp, or a substring when it is not one).
func Filter(cs []*Case, pattern string) []*Case {
	if pattern == "" {
		return cs
	}
	re, err := regexp.Compile(pattern)
	var out []*Case
	for _, c := range cs {
		if err == nil && re.MatchString(c.ID) || err != nil && strings.Contains(c.ID, pattern) {
			out = append(out, c)
		}
	}
	return out
}

func listMain(args []string) error {
	fs := flag.NewFlagSet("list", flag.ExitOnError)
	filter := fs.String("cases", "", "only the cases whose id matches (regexp or substring)")
	fs.Parse(args)
	for _, c := range Filter(Cases(), *filter) {
		fmt.Printf("%-32s %-14s %-20s %s\n", c.ID, c.Category, c.Expect, c.What)
	}
	return nil
}

// Outcome is one case on every target.
type Outcome struct {
	Case     string              `json:"case"`
	Category string              `json:"category"`
	Expect   Expect              `json:"expect"`
	What     string              `json:"what"`
	Ref      string              `json:"ref,omitempty"`
	Results  map[string]Verdict  `json:"results"`
	Client   map[string]Result   `json:"client"`
	Upstream map[string][]Record `json:"upstream,omitempty"`
}

// RunOptions configures Run.
type RunOptions struct {
	Parallel int
	Timeout  time.Duration
	Settle   time.Duration // wait after the last case before reading the records
	Records  func(ctx context.Context) ([]Record, error)
}

// Run sends every case to every target and scores them.
func Run(ctx context.Context, targets []Target, cases []*Case, o RunOptions) ([]Outcome, error) {
	type job struct {
		t Target
		c *Case
	}
	jobs := make(chan job)
	results := make(map[string]Result)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range max(1, o.Parallel) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				key := j.t.Name + "." + j.c.ID
				p := PathsFor(key)
				var then []byte
				if j.c.Then != "" {
					then = []byte(p.Expand(j.c.Then))
				}
				r := Send(ctx, j.t.Addr, []byte(p.Expand(j.c.Raw)), then, j.c.HalfClose, j.c.NoBody, j.c.requests(), o.Timeout)
				mu.Lock()
				results[key] = r
				mu.Unlock()
			}
		}()
	}
	// Interleave the targets, so that a slow one does not leave the others idle.
	for _, c := range cases {
		for _, t := range targets {
			select {
			case jobs <- job{t, c}:
			case <-ctx.Done():
			}
		}
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case <-time.After(o.Settle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	recs, err := o.Records(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the upstream's records: %w", err)
	}
	var out []Outcome
	for _, c := range cases {
		oc := Outcome{Case: c.ID, Category: c.Category, Expect: c.Expect, What: c.What, Ref: c.Ref,
			Results: map[string]Verdict{}, Client: map[string]Result{}, Upstream: map[string][]Record{}}
		for _, t := range targets {
			key := t.Name + "." + c.ID
			oc.Results[t.Name] = Score(c, key, results[key], recs)
			oc.Client[t.Name] = results[key]
			v := viewOf(key, recs)
			oc.Upstream[t.Name] = slices0(v.complete, v.smuggled, v.malformed, v.aborted)
		}
		out = append(out, oc)
	}
	return out, nil
}

func slices0(rs ...[]Record) []Record {
	var out []Record
	for _, r := range rs {
		out = append(out, r...)
	}
	return out
}

// httpRecords reads the records of the upstream at addr.
func httpRecords(addr string) func(ctx context.Context) ([]Record, error) {
	return func(ctx context.Context) ([]Record, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+ctlPrefix+"records", nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		var recs []Record
		return recs, json.Unmarshal(b, &recs)
	}
}

func runMain(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	var targets targetList
	fs.Var(&targets, "target", "a target, name=host:port (repeat)")
	upstream := fs.String("upstream", "", "the recording upstream's host:port (conformance upstream)")
	filter := fs.String("cases", "", "only the cases whose id matches (regexp or substring)")
	parallel := fs.Int("parallel", 8, "cases in flight at once")
	timeout := fs.Duration("timeout", 3*time.Second, "per case: no answer and no close by then is a hang")
	outFile := fs.String("out", "", "write the per-case table (markdown) here")
	jsonFile := fs.String("json", "", "write every outcome (JSON) here")
	fs.Parse(args)
	if len(targets) == 0 || *upstream == "" {
		return errors.New("run: need -upstream and at least one -target")
	}
	cases := Filter(Cases(), *filter)
	if len(cases) == 0 {
		return fmt.Errorf("no case matches %q", *filter)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 150*time.Second)
	defer cancel()
	start := time.Now()
	outs, err := Run(ctx, targets, cases, RunOptions{Parallel: *parallel, Timeout: *timeout, Settle: 700 * time.Millisecond, Records: httpRecords(*upstream)})
	if err != nil {
		return err
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	fmt.Print(Summary(outs, names))
	fmt.Printf("\n%d cases × %d targets in %.1f s\n", len(cases), len(targets), time.Since(start).Seconds())
	if *outFile != "" {
		if err := os.WriteFile(*outFile, []byte(PerCase(outs, names)), 0o644); err != nil {
			return err
		}
		fmt.Println("per-case table:", *outFile)
	}
	if *jsonFile != "" {
		b, err := json.MarshalIndent(outs, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonFile, b, 0o644); err != nil {
			return err
		}
		fmt.Println("json:", *jsonFile)
	}
	return nil
}

// Summary is the markdown table by category and the total score line.
func Summary(outs []Outcome, names []string) string {
	type tally struct {
		cases, scored int
		pass          map[string]int
	}
	var order []string
	by := map[string]*tally{}
	total := &tally{pass: map[string]int{}}
	for _, o := range outs {
		t := by[o.Category]
		if t == nil {
			t = &tally{pass: map[string]int{}}
			by[o.Category] = t
			order = append(order, o.Category)
		}
		t.cases++
		total.cases++
		if o.Expect == Info {
			continue
		}
		t.scored++
		total.scored++
		for _, n := range names {
			if p := o.Results[n].Pass; p != nil && *p {
				t.pass[n]++
				total.pass[n]++
			}
		}
	}
	var b strings.Builder
	b.WriteString("| category | cases | scored |")
	for _, n := range names {
		fmt.Fprintf(&b, " %s pass |", n)
	}
	b.WriteString("\n|---|---:|---:|" + strings.Repeat("---:|", len(names)) + "\n")
	row := func(label string, t *tally) {
		fmt.Fprintf(&b, "| %s | %d | %d |", label, t.cases, t.scored)
		for _, n := range names {
			fmt.Fprintf(&b, " %d |", t.pass[n])
		}
		b.WriteString("\n")
	}
	for _, c := range order {
		row(c, by[c])
	}
	row("**total**", total)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, total.pass[n])
	}
	fmt.Fprintf(&b, "\nscored %d cases: %s\n", total.scored, strings.Join(parts, ", "))
	return b.String()
}

// PerCase is the markdown table of every case on every target.
func PerCase(outs []Outcome, names []string) string {
	var b strings.Builder
	b.WriteString("# conformance: every case\n\n")
	b.WriteString("Each cell: PASS or FAIL (or info), then the status line(s) the client read, whether the target closed, kept open or hung, and what the upstream saw (up:N well-framed requests, up:SMUGGLED, up:malformed(reason), up:aborted, up:none).\n\n")
	b.WriteString("| case | expect | sends |")
	for _, n := range names {
		fmt.Fprintf(&b, " %s |", n)
	}
	b.WriteString("\n|---|---|---|" + strings.Repeat("---|", len(names)) + "\n")
	for _, o := range outs {
		fmt.Fprintf(&b, "| %s | %s | %s |", o.Case, o.Expect, cell(o.What))
		for _, n := range names {
			v := o.Results[n]
			mark := "info"
			if v.Pass != nil {
				mark = map[bool]string{true: "PASS", false: "**FAIL**"}[*v.Pass]
			}
			s := mark + " " + v.Did
			if v.Why != "" && (v.Pass == nil || !*v.Pass) {
				s += " — " + v.Why
			}
			if v.Header != "" {
				s += "; " + v.Header
			}
			fmt.Fprintf(&b, " %s |", cell(s))
		}
		b.WriteString("\n")
	}
	// The failures, by target, for a quick read.
	for _, n := range names {
		var fails []string
		for _, o := range outs {
			if p := o.Results[n].Pass; p != nil && !*p {
				fails = append(fails, o.Case)
			}
		}
		sort.Strings(fails)
		fmt.Fprintf(&b, "\n%s fails (%d): %s\n", n, len(fails), strings.Join(fails, ", "))
	}
	return b.String()
}

func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
