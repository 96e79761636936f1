// Package conformance is an HTTP/1.1 conformance and request-smuggling run for reverse
// proxies (go run ./bench conformance runs it on fenec-entry, nginx and haproxy): the cases
// (cases.txt), the recording upstream, a raw TCP server with a strict HTTP/1.1 framing parser
// that records every request it sees (upstream.go), the client that sends a case's bytes
// (client.go), the scoring (score.go), and Run, which sends every case to every target and
// scores them with what the upstream saw, and its reports (Summary, PerCase).
//
// Every case is a few raw bytes sent on a fresh connection. Its requests carry the path
// /t/acme/conf/<target>.<case> and any request hidden in a body the path
// /t/acme/smuggled/<target>.<case>, so that what the upstream saw is attributed to one case
// on one target, and a smuggled request is recognised.
package conformance

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Target is a proxy under test.
type Target struct{ Name, Addr string }

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
