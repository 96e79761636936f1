package main

import (
	"fmt"
	"io"
	"strings"
)

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

// printServeUsage lists serve's flags by group, each with its environment variable and
// default, and what it waits for to take effect.
func printServeUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: fenec-entry serve [flags]

Runs one entry. Flags take the form --name value or --name=value (one dash works too).
Every flag also reads the environment variable shown; the command line wins, and an
empty variable counts as unset. With --config FILE, the file's FENEC_ENTRY_NAME=value
lines come between the two: a setting given on the command line must not be in the file,
and a variable the file held at start is taken from the file only. SIGHUP and POST /reload
on --admin-listen re-read the file and apply the settings marked [reload]; the others wait
for a restart. Secrets (--entry-token, --gossip-key, --rpc-auth) are never printed or
logged; prefer their variables or the file to the command line.
`)
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
			fmt.Fprintf(w, "%-32s %s\n", head, d.usage)
			var more []string
			more = append(more, "env "+d.envName())
			if d.def != "" {
				more = append(more, "default "+d.def)
			}
			if d.later != "" {
				more = append(more, d.later)
			}
			if d.reloadable() {
				more = append(more, "[reload]")
			}
			fmt.Fprintf(w, "%-32s (%s)\n", "", strings.Join(more, "; "))
		}
	}
}
