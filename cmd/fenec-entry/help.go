package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// helpWidth bounds every line of every help, in runes: a terminal of 100 columns shows each
// one whole. Each flag's help is one string in flags; printServeUsage wraps it.
const helpWidth = 100

const usageText = `Usage: fenec-entry <command> [flags]

Commands:
  serve     run one entry (fenec-entry serve --help lists its flags)
  demo      stand-in routers for eu, us, ap and three entries in one gossip cluster on
            loopback, with curl lines to try (fenec-entry demo --help)
  version   print the version, commit and Go version

Exit status: 0 after a clean stop, 1 on a runtime failure (a listener that
cannot be bound), 2 on bad configuration or usage (one line on stderr naming
the flag).
`

func printUsage(w io.Writer) { io.WriteString(w, usageText) }

const demoUsage = `Usage: fenec-entry demo [--port-offset N] [--log-level warn]

Stand-in routers for eu, us and ap and three entries (ams, iad, sin) in one gossip
cluster on loopback; prints URLs and curl lines; Ctrl-C stops everything.
`

const versionUsage = `Usage: fenec-entry version

Prints the version, the commit and the Go version and platform it was built with.
`

// serveIntro opens serve's help.
const serveIntro = "Runs one entry: it sends each request to its tenant's home region and shares what it " +
	"learns with the other entries over gossip. " +
	"Every flag also reads the environment variable FENEC_ENTRY_<FLAG> shown under it; the command line wins. " +
	"Settings marked [reload] change on SIGHUP or POST /reload; the others wait for a restart. " +
	"The full reference is docs/REFERENCE.md in the repository."

// serveOutro closes serve's help.
const serveOutro = "Secrets (--entry-token, --gossip-key, --rpc-auth, --admin-token) are never printed or logged; give them " +
	"by variable or in --config's file rather than on the command line (serve warns at start when one is there, " +
	"or when --config's file holding one, or --tls-key's, is open to every user of the host)."

// flagColumn is where a flag's help starts, after its name and argument.
const flagColumn = 33

// printServeUsage lists serve's flags by group, each with its environment variable and
// default, and what it waits for to take effect, wrapped to helpWidth.
func printServeUsage(w io.Writer) {
	fmt.Fprint(w, "Usage: fenec-entry serve [flags]\n\n")
	for _, l := range wrap(serveIntro, helpWidth) {
		fmt.Fprintln(w, l)
	}
	indent := strings.Repeat(" ", flagColumn)
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g)
		for _, d := range flags {
			if d.group != g {
				continue
			}
			head := "  --" + d.name
			if d.arg != "" {
				head += " " + d.arg
			}
			more := []string{"env " + d.envName()}
			if d.def != "" {
				more = append(more, "default "+d.def)
			}
			if d.later != "" {
				more = append(more, d.later)
			}
			if d.reloadable() {
				more = append(more, "[reload]")
			}
			lines := wrap(d.usage, helpWidth-flagColumn)
			lines = append(lines, wrap("("+strings.Join(more, "; ")+")", helpWidth-flagColumn)...)
			if utf8.RuneCountInString(head) < flagColumn {
				fmt.Fprintf(w, "%-*s%s\n", flagColumn, head, lines[0])
				lines = lines[1:]
			} else {
				fmt.Fprintln(w, head)
			}
			for _, l := range lines {
				fmt.Fprintln(w, indent+l)
			}
		}
	}
	fmt.Fprintln(w)
	for _, l := range wrap(serveOutro, helpWidth) {
		fmt.Fprintln(w, l)
	}
}

// wrap breaks text at spaces into lines of at most width runes; a word longer than width
// stands alone on its line. It always returns one line at least.
func wrap(text string, width int) []string {
	var lines []string
	line, n := "", 0
	for _, word := range strings.Fields(text) {
		k := utf8.RuneCountInString(word)
		switch {
		case n == 0:
			line, n = word, k
		case n+1+k <= width:
			line, n = line+" "+word, n+1+k
		default:
			lines = append(lines, line)
			line, n = word, k
		}
	}
	return append(lines, line)
}
