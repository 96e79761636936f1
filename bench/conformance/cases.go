package conformance

import (
	_ "embed"
	"fmt"
	"regexp"
	"strconv"
	"strings"
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
	ID       string
	Category string
	What     string // what it sends, in short
	Expect   Expect
	Ref      string // where the requirement or the attack comes from
	// Raw is the bytes sent. Placeholders: {P} the case's path, {S} its smuggled path,
	// {SR} a complete request for {S}, {SRX} the length of {SR} in hex, {TECL} the length
	// of "{SRX}\r\n", {CL} the length of everything after the first "\r\n\r\n".
	Raw       string
	Then      string   // sent after 100 Continue, or after 1 s without it
	HalfClose bool     // shut the write side once everything is sent
	Requests  int      // requests the client framed (default 1)
	Bodies    []string // the bodies the upstream must see, placeholders as Raw (default: empty)
	NoBody    bool     // answers carry no body (HEAD)
	MustClose bool     // a 2xx answer must be followed by the target closing the connection
	Watch     string   // a header name: report whether the upstream saw it
}

func (c *Case) requests() int { return max(1, c.Requests) }

// Paths are the case's attributable paths.
type Paths struct{ P, S string }

// PathsFor is the paths of case key (target.caseid).
func PathsFor(key string) Paths {
	return Paths{P: "/t/acme/conf/" + key, S: "/t/acme/smuggled/" + key}
}

// Expand fills the placeholders of a template.
func (p Paths) Expand(s string) string {
	sr := "GET " + p.S + " HTTP/1.1\r\nHost: localhost\r\n\r\n"
	srx := strconv.FormatInt(int64(len(sr)), 16)
	s = strings.NewReplacer("{P}", p.P, "{SRX}", srx, "{SR}", sr, "{S}", p.S,
		"{TECL}", strconv.Itoa(len(srx)+2)).Replace(s)
	return strings.Replace(s, "{CL}", strconv.Itoa(len(s)-bodyStart(s)), 1)
}

// bodyStart is where the body starts: after the first empty line (LF or CRLF ended).
func bodyStart(s string) int {
	i := strings.IndexByte(s, '\n') + 1
	for i > 0 && i < len(s) {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			break
		}
		if line := s[i : i+j]; line == "" || line == "\r" {
			return i + j + 1
		}
		i += j + 1
	}
	return len(s)
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

// Cases is the whole list, in report order.
func Cases() []*Case {
	var cs []*Case
	for n, line := range strings.Split(casesTxt, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		c, err := parseCase(line)
		if err != nil {
			panic(fmt.Sprintf("cases.txt:%d: %v", n+1, err)) // the embedded table is the program's own
		}
		cs = append(cs, c)
	}
	return cs
}

func parseCase(line string) (*Case, error) {
	f := strings.SplitN(line, " ", 4)
	if len(f) < 4 {
		return nil, fmt.Errorf("want an id, a category, an expectation and fields: %q", line)
	}
	c := &Case{ID: f[0], Category: f[1], Expect: Expect(f[2])}
	for rest := f[3]; rest != ""; rest = strings.TrimPrefix(rest, " ") {
		key, val := rest, ""
		if i := strings.IndexAny(rest, "= "); i >= 0 {
			key, rest = rest[:i], rest[i:]
		} else {
			rest = ""
		}
		if strings.HasPrefix(rest, "=") {
			rest = rest[1:]
			q, err := strconv.QuotedPrefix(rest)
			if err == nil {
				rest = rest[len(q):]
				val, _ = strconv.Unquote(q)
			} else {
				val, rest, _ = strings.Cut(rest, " ")
			}
		}
		switch key {
		case "what":
			c.What = val
		case "raw":
			c.Raw = expandRepeats(val)
		case "then":
			c.Then = val
		case "body":
			c.Bodies = append(c.Bodies, expandRepeats(val))
			c.Requests = len(c.Bodies)
		case "ref":
			c.Ref = val
		case "watch":
			c.Watch = val
		case "half":
			c.HalfClose = true
		case "nobody":
			c.NoBody = true
		case "close":
			c.MustClose = true
		default:
			return nil, fmt.Errorf("case %s: unknown field %q", c.ID, key)
		}
	}
	return c, nil
}

func expandRepeats(s string) string {
	for repeatRE.MatchString(s) {
		s = repeatRE.ReplaceAllStringFunc(s, func(m string) string {
			p := repeatRE.FindStringSubmatch(m)
			n, _ := strconv.Atoi(p[1])
			return strings.Repeat(p[2], n)
		})
	}
	return fieldsRE.ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.Atoi(fieldsRE.FindStringSubmatch(m)[1])
		return manyFields(n)
	})
}

func manyFields(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "X-F%d: v%d\r\n", i, i)
	}
	return b.String()
}
