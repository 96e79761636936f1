// Package conformance is an HTTP/1.1 conformance and request-smuggling run for reverse proxies
// (go run ./bench conformance runs it on fenec-entry and nginx): the cases (cases.txt), the
// recording upstream, a raw TCP server with a strict HTTP/1.1 framing reader that records
// every request it sees (upstream.go), the client that sends a case's bytes (client.go), and
// Run, which sends every case to every target and scores them with what the upstream saw,
// and its reports (Summary, PerCase).
//
// Every case is a few raw bytes sent on a fresh connection. Its requests carry the path
// /t/acme/conf/<target>.<case> and any request hidden in a body the path
// /t/acme/smuggled/<target>.<case>, so that what the upstream saw is attributed to one case
// on one target, and a smuggled request is recognised.
package conformance

import (
	"context"
	_ "embed"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Expect is what a case requires of a target.
type Expect string

const (
	// MustRefuse: a 4xx/5xx answer or a close without answer, and nothing of the case
	// reaches the upstream.
	MustRefuse Expect = "must-refuse"
	// MustAccept: exactly the request(s) the client framed reach the upstream, with their
	// bodies, and each is answered 2xx.
	MustAccept Expect = "must-accept"
	// RefuseOrNormalize: refused as above, or forwarded as exactly the request(s) the client
	// framed, well framed, with the bodies the client framed.
	RefuseOrNormalize Expect = "refuse-or-normalize"
	// Info: reported, not scored.
	Info Expect = "info"
)

// Case is one request (or a few) sent on a fresh connection.
type Case struct {
	ID, Category, What string // What: what it sends, in short
	Expect             Expect
	Ref                string // where the requirement or the attack comes from
	// Raw is the bytes sent. Placeholders: {P} the case's path, {S} its smuggled path,
	// {SR} a complete request for {S}, {SRX} the length of {SR} in hex, {TECL} the length
	// of "{SRX}\r\n", {CL} the length of everything after the first "\r\n\r\n".
	Raw       string
	Then      string   // sent after 100 Continue, or after 1 s without it
	HalfClose bool     // shut the write side once everything is sent
	Bodies    []string // the bodies of the requests the client framed, placeholders as Raw (default: one, empty)
	NoBody    bool     // answers carry no body (HEAD)
	MustClose bool     // a 2xx answer must be followed by the target closing the connection
	Watch     string   // a header name: report whether the upstream saw it
}

func (c *Case) requests() int { return max(1, len(c.Bodies)) }

// Paths are a case's attributable paths.
type Paths struct{ P, S string }

// PathsFor is the paths of case key (target.caseid).
func PathsFor(key string) Paths { return Paths{P: "/t/acme/conf/" + key, S: "/t/acme/smuggled/" + key} }

// Expand fills the placeholders of a template.
func (p Paths) Expand(s string) string {
	sr := "GET " + p.S + " HTTP/1.1\r\nHost: localhost\r\n\r\n"
	srx := strconv.FormatInt(int64(len(sr)), 16)
	s = strings.NewReplacer("{P}", p.P, "{SRX}", srx, "{SR}", sr, "{S}", p.S, "{TECL}", strconv.Itoa(len(srx)+2)).Replace(s)
	// {CL}: what follows the first empty line (LF or CRLF ended).
	body := len(s)
	for i := strings.IndexByte(s, '\n') + 1; i > 0 && i < len(s); {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			break
		}
		if line := s[i : i+j]; line == "" || line == "\r" {
			body = i + j + 1
			break
		}
		i += j + 1
	}
	return strings.Replace(s, "{CL}", strconv.Itoa(len(s)-body), 1)
}

// casesTxt is the cases, a line each, in report order: the id, the category and the
// expectation, then key=value fields (values Go-quoted): what (in short), raw (the bytes sent),
// then, body (one per request the client framed), ref, watch; and the flags half, nobody and
// close (Case's HalfClose, NoBody, MustClose). In raw and body, {R:N:TEXT} is TEXT N times
// (innermost first) and {F:N} is N header fields X-F0: v0 ... ; the other placeholders are
// Expand's. Lines starting with # are comments.
//
//go:embed cases.txt
var casesTxt string

var (
	repeatRE = regexp.MustCompile(`\{R:(\d+):([^{}]*)\}`)
	fieldsRE = regexp.MustCompile(`\{F:(\d+)\}`)
)

// Cases is the cases whose id matches pattern (a regexp; "": every case), in report order.
func Cases(pattern string) ([]*Case, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	var cs []*Case
	for n, line := range strings.Split(casesTxt, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		c, err := parseCase(line)
		if err != nil {
			panic(fmt.Sprintf("cases.txt:%d: %v", n+1, err)) // the embedded table is the program's own
		}
		if re.MatchString(c.ID) {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("no case matches %q", pattern)
	}
	return cs, nil
}

func parseCase(line string) (*Case, error) {
	f := strings.SplitN(line, " ", 4)
	if len(f) < 4 {
		return nil, fmt.Errorf("want an id, a category, an expectation and fields: %q", line)
	}
	c := &Case{ID: f[0], Category: f[1], Expect: Expect(f[2])}
	expand := func(s string) string {
		for repeatRE.MatchString(s) {
			s = repeatRE.ReplaceAllStringFunc(s, func(m string) string {
				p := repeatRE.FindStringSubmatch(m)
				n, _ := strconv.Atoi(p[1])
				return strings.Repeat(p[2], n)
			})
		}
		return fieldsRE.ReplaceAllStringFunc(s, func(m string) string {
			var b strings.Builder
			n, _ := strconv.Atoi(fieldsRE.FindStringSubmatch(m)[1])
			for i := range n {
				fmt.Fprintf(&b, "X-F%d: v%d\r\n", i, i)
			}
			return b.String()
		})
	}
	for rest := f[3]; rest != ""; rest = strings.TrimPrefix(rest, " ") {
		key, val := rest, ""
		if i := strings.IndexAny(rest, "= "); i >= 0 {
			key, rest = rest[:i], rest[i:]
		} else {
			rest = ""
		}
		if r, ok := strings.CutPrefix(rest, "="); ok {
			if q, err := strconv.QuotedPrefix(r); err == nil {
				rest = r[len(q):]
				val, _ = strconv.Unquote(q)
			} else {
				val, rest, _ = strings.Cut(r, " ")
			}
		}
		switch key {
		case "what":
			c.What = val
		case "raw":
			c.Raw = expand(val)
		case "then":
			c.Then = val
		case "body":
			c.Bodies = append(c.Bodies, expand(val))
		case "ref":
			c.Ref = val
		case "watch":
			c.Watch = val
		case "half", "nobody", "close":
			*map[string]*bool{"half": &c.HalfClose, "nobody": &c.NoBody, "close": &c.MustClose}[key] = true
		default:
			return nil, fmt.Errorf("case %s: unknown field %q", c.ID, key)
		}
	}
	return c, nil
}

// Outcome is one case on every target, by name.
type Outcome struct {
	Case    *Case
	Results map[string]Verdict
	Client  map[string]Result
}

// Run sends every case to every target (addrs by name), 8 at a time, each within 3 s, and
// scores them with what u saw.
func Run(ctx context.Context, names []string, addrs map[string]string, cases []*Case, u *Upstream) ([]Outcome, error) {
	type job struct {
		t string
		c *Case
	}
	jobs := make(chan job)
	results := map[string]Result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				key := j.t + "." + j.c.ID
				p := PathsFor(key)
				then := []byte(nil)
				if j.c.Then != "" {
					then = []byte(p.Expand(j.c.Then))
				}
				r := Send(ctx, addrs[j.t], []byte(p.Expand(j.c.Raw)), then, j.c.HalfClose, j.c.NoBody, j.c.requests(), 3*time.Second)
				mu.Lock()
				results[key] = r
				mu.Unlock()
			}
		}()
	}
	for _, c := range cases { // the targets interleaved, so that a slow one does not leave the others idle
		for _, t := range names {
			select {
			case jobs <- job{t, c}:
			case <-ctx.Done():
			}
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case <-time.After(700 * time.Millisecond): // what the upstream is still reading
	case <-ctx.Done():
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	recs := u.Records()
	var out []Outcome
	for _, c := range cases {
		o := Outcome{Case: c, Results: map[string]Verdict{}, Client: map[string]Result{}}
		for _, t := range names {
			key := t + "." + c.ID
			o.Results[t], o.Client[t] = Score(c, key, results[key], recs), results[key]
		}
		out = append(out, o)
	}
	return out, nil
}

// Verdict is the scoring of one case on one target.
type Verdict struct {
	Pass   *bool  // nil for info cases
	Did    string // what the target did, in short
	Why    string
	Header string // Watch: "upstream saw X" or "upstream did not see X"
}

// view is what the upstream saw of one case: well-framed requests at its path and at its
// smuggled path, requests the strict reader refused, and requests cut short by the proxy (a
// refusal mid-body).
type view struct{ complete, smuggled, malformed, aborted []Record }

// Score applies the case's expectation to what the client and the upstream saw.
func Score(c *Case, key string, res Result, recs []Record) Verdict {
	var v view
	for _, r := range recs {
		switch {
		case !slices.Contains(r.Keys, key):
		case r.State == "malformed":
			v.malformed = append(v.malformed, r)
		case r.State == "aborted":
			v.aborted = append(v.aborted, r)
		case r.Kind == "smuggled":
			v.smuggled = append(v.smuggled, r)
		default:
			v.complete = append(v.complete, r)
		}
	}
	out := Verdict{Did: did(res, v), Why: judge(c, PathsFor(key), res, v)}
	if c.Watch != "" {
		out.Header = "upstream did not see " + c.Watch
		for _, r := range v.complete {
			if slices.ContainsFunc(r.Headers, func(h string) bool { return strings.EqualFold(h, c.Watch) }) {
				out.Header = "upstream saw " + c.Watch
			}
		}
	}
	if c.Expect != Info {
		pass := out.Why == ""
		out.Pass = &pass
	}
	return out
}

// did is what the target did: the statuses, closed or left open, and what the upstream saw.
func did(res Result, v view) string {
	if res.Err != "" {
		return "dial error: " + res.Err
	}
	s := strings.Trim(strings.ReplaceAll(fmt.Sprint(res.Statuses), " ", ","), "[]")
	if s == "" {
		s = "no answer"
	}
	if res.Interim > 0 {
		s += fmt.Sprintf(" (+%d×1xx)", res.Interim)
	}
	switch {
	case res.Hung:
		s += " hang"
	case res.Closed:
		s += " close"
	default:
		s += " open"
	}
	if res.Garbage != "" {
		s += " garbage " + res.Garbage
	}
	up := ""
	if n := len(v.complete); n > 0 {
		up += fmt.Sprintf(" up:%d", n)
	}
	if n := len(v.smuggled); n > 0 {
		up += fmt.Sprintf(" up:SMUGGLED×%d", n)
	}
	for _, r := range v.malformed {
		up += " up:malformed(" + r.Reason + ")"
	}
	if n := len(v.aborted); n > 0 {
		up += fmt.Sprintf(" up:aborted×%d", n)
	}
	return s + cmpOr(up, " up:none")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// judge is "" when the case passes, else why it fails.
func judge(c *Case, p Paths, res Result, v view) string {
	if res.Err != "" {
		return "could not connect"
	}
	if len(v.smuggled) > 0 {
		return "a smuggled request reached the upstream"
	}
	if len(res.Statuses) > c.requests() {
		return fmt.Sprintf("%d answers where the client framed %d request(s)", len(res.Statuses), c.requests())
	}
	why := refused(res, v)
	if c.Expect == MustRefuse {
		return why
	}
	acceptWhy := accepted(c, p, res, v)
	switch {
	case c.Expect == MustAccept || c.Expect == Info:
		return acceptWhy
	case why == "" || acceptWhy == "":
		return ""
	case len(res.Statuses) > 0 && res.Statuses[0] >= 400:
		return why
	}
	return acceptWhy
}

// broken is why an answer or what the upstream saw breaks any expectation ("" if nothing does).
func broken(res Result, v view) string {
	switch {
	case len(v.malformed) > 0:
		return "upstream saw malformed framing: " + v.malformed[0].Reason
	case res.Hung:
		return "hang: no answer and no close within the timeout"
	case res.Garbage != "":
		return "an answer that is not HTTP/1"
	}
	return ""
}

// refused: "" when the target refused and nothing reached the upstream.
func refused(res Result, v view) string {
	switch {
	case len(v.malformed) > 0:
		return broken(res, v)
	case len(v.complete) > 0:
		return "forwarded to the upstream"
	case res.Hung || res.Garbage != "":
		return broken(res, v)
	case len(res.Statuses) == 0 && !res.Closed:
		return "no answer"
	case len(res.Statuses) > 0 && res.Statuses[0] < 400:
		return fmt.Sprintf("answered %d", res.Statuses[0])
	}
	return ""
}

// accepted: "" when exactly the framed requests reached the upstream with their bodies and
// each was answered 2xx.
func accepted(c *Case, p Paths, res Result, v view) string {
	n := c.requests()
	switch why := broken(res, v); {
	case why != "":
		return why
	case len(res.Statuses) != n:
		return fmt.Sprintf("%d answers for %d request(s)", len(res.Statuses), n)
	}
	for _, st := range res.Statuses {
		if st < 200 || st > 299 {
			return fmt.Sprintf("answered %d", st)
		}
	}
	if len(v.complete) != n {
		return fmt.Sprintf("upstream saw %d request(s), want %d", len(v.complete), n)
	}
	want, got := make([]string, n), make([]string, 0, n)
	for i := range c.Bodies {
		want[i] = p.Expand(c.Bodies[i])
	}
	for _, r := range v.complete {
		got = append(got, r.Body)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		b := v.complete[0].Body
		return fmt.Sprintf("upstream body differs from what the client framed (%d bytes %q...)", len(b), b[:min(64, len(b))])
	}
	if c.MustClose && !res.Closed {
		return "answered 2xx but kept the connection open (MUST close)"
	}
	return ""
}

// Summary is the markdown table by category and the total score line.
func Summary(outs []Outcome, names []string) string {
	var order []string
	cases, scored, pass := map[string]int{}, map[string]int{}, map[[2]string]int{}
	for _, o := range outs {
		for _, k := range []string{o.Case.Category, "**total**"} {
			if cases[k]++; cases[k] == 1 && k != "**total**" {
				order = append(order, k)
			}
			if o.Case.Expect != Info {
				scored[k]++
				for _, n := range names {
					if p := o.Results[n].Pass; p != nil && *p {
						pass[[2]string{k, n}]++
					}
				}
			}
		}
	}
	var b strings.Builder
	b.WriteString("| category | cases | scored |")
	for _, n := range names {
		fmt.Fprintf(&b, " %s pass |", n)
	}
	b.WriteString("\n|---|---:|---:|" + strings.Repeat("---:|", len(names)) + "\n")
	for _, k := range append(order, "**total**") {
		fmt.Fprintf(&b, "| %s | %d | %d |", k, cases[k], scored[k])
		for _, n := range names {
			fmt.Fprintf(&b, " %d |", pass[[2]string{k, n}])
		}
		b.WriteString("\n")
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, pass[[2]string{"**total**", n}])
	}
	fmt.Fprintf(&b, "\nscored %d cases: %s\n", scored["**total**"], strings.Join(parts, ", "))
	return b.String()
}

// PerCase is the markdown table of every case on every target.
func PerCase(outs []Outcome, names []string) string {
	s := "# conformance: every case\n\nEach cell: PASS or FAIL (or info), then the status line(s) the client read, whether the target closed, kept open or hung, and what the upstream saw (up:N well-framed requests, up:SMUGGLED, up:malformed(reason), up:aborted, up:none).\n\n| case | expect | sends |"
	for _, n := range names {
		s += " " + n + " |"
	}
	s += "\n|---|---|---|" + strings.Repeat("---|", len(names)) + "\n"
	cell := strings.NewReplacer("|", `\|`, "\n", " ").Replace
	fails := map[string][]string{}
	for _, o := range outs {
		s += fmt.Sprintf("| %s | %s | %s |", o.Case.ID, o.Case.Expect, cell(o.Case.What))
		for _, n := range names {
			v, mark := o.Results[n], "info"
			if v.Pass != nil {
				mark = map[bool]string{true: "PASS", false: "**FAIL**"}[*v.Pass]
				if !*v.Pass {
					fails[n] = append(fails[n], o.Case.ID)
				}
			}
			c := mark + " " + v.Did
			if v.Why != "" && (v.Pass == nil || !*v.Pass) {
				c += " — " + v.Why
			}
			if v.Header != "" {
				c += "; " + v.Header
			}
			s += " " + cell(c) + " |"
		}
		s += "\n"
	}
	for _, n := range names {
		slices.Sort(fails[n])
		s += fmt.Sprintf("\n%s fails (%d): %s\n", n, len(fails[n]), strings.Join(fails[n], ", "))
	}
	return s
}
