package conformance

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Verdict is the scoring of one case on one target.
type Verdict struct {
	Pass   *bool  `json:"pass"` // nil for info cases
	Did    string `json:"did"`  // what the target did, in short
	Why    string `json:"why,omitempty"`
	Header string `json:"watch,omitempty"` // Watch: "upstream saw X" or "upstream did not see X"
}

// upstreamView is what the upstream saw of one case.
type upstreamView struct {
	complete  []Record // well-framed requests at the case's path
	smuggled  []Record // well-framed requests at the case's smuggled path
	malformed []Record // requests the strict parser refused, carrying the case's key
	aborted   []Record // requests cut short by the proxy (a refusal mid-body)
}

func viewOf(key string, recs []Record) upstreamView {
	var v upstreamView
	for _, r := range recs {
		if !slices.Contains(r.Keys, key) {
			continue
		}
		switch {
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
	return v
}

func (v upstreamView) String() string {
	var parts []string
	if n := len(v.complete); n > 0 {
		parts = append(parts, fmt.Sprintf("up:%d", n))
	}
	if n := len(v.smuggled); n > 0 {
		parts = append(parts, fmt.Sprintf("up:SMUGGLED×%d", n))
	}
	for _, r := range v.malformed {
		parts = append(parts, "up:malformed("+r.Reason+")")
	}
	if n := len(v.aborted); n > 0 {
		parts = append(parts, fmt.Sprintf("up:aborted×%d", n))
	}
	if len(parts) == 0 {
		return "up:none"
	}
	return strings.Join(parts, " ")
}

func didOf(res Result, v upstreamView) string {
	var b strings.Builder
	if res.Err != "" {
		return "dial error: " + res.Err
	}
	if len(res.Statuses) == 0 {
		b.WriteString("no answer")
	} else {
		s := make([]string, len(res.Statuses))
		for i, st := range res.Statuses {
			s[i] = fmt.Sprint(st)
		}
		b.WriteString(strings.Join(s, ","))
	}
	if res.Interim > 0 {
		fmt.Fprintf(&b, " (+%d×1xx)", res.Interim)
	}
	switch {
	case res.Hung:
		b.WriteString(" hang")
	case res.Closed:
		b.WriteString(" close")
	default:
		b.WriteString(" open")
	}
	if res.Garbage != "" {
		b.WriteString(" garbage " + res.Garbage)
	}
	b.WriteString(" " + v.String())
	return b.String()
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Score applies the case's expectation to what the client and the upstream saw.
func Score(c *Case, key string, res Result, recs []Record) Verdict {
	v := viewOf(key, recs)
	out := Verdict{Did: didOf(res, v)}
	if c.Watch != "" {
		seen := false
		for _, r := range v.complete {
			for _, h := range r.Headers {
				seen = seen || strings.EqualFold(h, c.Watch)
			}
		}
		if seen {
			out.Header = "upstream saw " + c.Watch
		} else {
			out.Header = "upstream did not see " + c.Watch
		}
	}
	why := judge(c, PathsFor(key), res, v)
	if c.Expect == Info {
		out.Why = why
		return out
	}
	pass := why == ""
	out.Pass, out.Why = &pass, why
	return out
}

// judge is "" when the case passes, else why it fails.
func judge(c *Case, p Paths, res Result, v upstreamView) string {
	if res.Err != "" {
		return "could not connect"
	}
	if len(v.smuggled) > 0 {
		return "a smuggled request reached the upstream"
	}
	if len(res.Statuses) > c.requests() {
		return fmt.Sprintf("%d answers where the client framed %d request(s)", len(res.Statuses), c.requests())
	}
	refusedWhy := refused(res, v)
	if c.Expect == MustRefuse {
		return refusedWhy
	}
	acceptWhy := accepted(c, p, res, v)
	if c.Expect == MustAccept || c.Expect == Info {
		return acceptWhy
	}
	if refusedWhy == "" || acceptWhy == "" {
		return ""
	}
	if len(res.Statuses) > 0 && res.Statuses[0] >= 400 {
		return refusedWhy
	}
	return acceptWhy
}

// refused: "" when the target refused and nothing reached the upstream.
func refused(res Result, v upstreamView) string {
	switch {
	case len(v.malformed) > 0:
		return "upstream saw malformed framing: " + v.malformed[0].Reason
	case len(v.complete) > 0:
		return "forwarded to the upstream"
	case res.Hung:
		return "hang: no answer and no close within the timeout"
	case res.Garbage != "":
		return "an answer that is not HTTP/1"
	case len(res.Statuses) == 0 && res.Closed:
		return ""
	case len(res.Statuses) == 0:
		return "no answer"
	case res.Statuses[0] < 400:
		return fmt.Sprintf("answered %d", res.Statuses[0])
	}
	return ""
}

// accepted: "" when exactly the framed requests reached the upstream with their bodies and
// each was answered 2xx.
func accepted(c *Case, p Paths, res Result, v upstreamView) string {
	n := c.requests()
	switch {
	case len(v.malformed) > 0:
		return "upstream saw malformed framing: " + v.malformed[0].Reason
	case res.Hung:
		return "hang: no answer and no close within the timeout"
	case res.Garbage != "":
		return "an answer that is not HTTP/1"
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
	want := make([]string, n)
	for i := range want {
		if i < len(c.Bodies) {
			want[i] = sha(p.Expand(c.Bodies[i]))
		} else {
			want[i] = sha("")
		}
	}
	got := make([]string, 0, n)
	for _, r := range v.complete {
		got = append(got, r.BodySHA)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		b := v.complete[0]
		return fmt.Sprintf("upstream body differs from what the client framed (%d bytes %q...)", b.BodyLen, b.BodyPrefix)
	}
	if c.MustClose && !res.Closed {
		return "answered 2xx but kept the connection open (MUST close)"
	}
	return ""
}
