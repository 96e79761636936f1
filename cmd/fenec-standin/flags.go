package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fenec/fenec-entry/standin"
	"github.com/rs/zerolog"
)

// envPrefix prefixes the environment variable of every flag, as fenec-entry reads
// FENEC_ENTRY_<FLAG>: --http-cors reads FENEC_STANDIN_HTTP_CORS when not given (its own prefix,
// so an entry's FENEC_ENTRY_* environment never configures a stand-in). A repeatable flag's
// variable holds its values separated by ';'.
const envPrefix = "FENEC_STANDIN_"

var errHelp = errors.New("help requested")

// flagError is a bad flag: its message names the flag as --name.
type flagError struct {
	flag string
	msg  string
}

func (e *flagError) Error() string {
	if e.flag == "" {
		return e.msg
	}
	return "--" + e.flag + ": " + e.msg
}

type faultFlag struct {
	addr  string
	fault standin.Fault
}

// options is the command line, parsed and checked.
type options struct {
	regions   []standin.Region
	tenants   map[string]string
	token     string
	cors      string
	keepAlive time.Duration
	logLevel  zerolog.Level
	faults    []faultFlag
	items     int
}

func (o *options) config() standin.Config {
	return standin.Config{
		Regions:    o.regions,
		Tenants:    o.tenants,
		EntryToken: o.token,
		CORS:       o.cors,
		KeepAlive:  o.keepAlive,
		Items:      o.items,
	}
}

// regionsValue is the repeatable --region NAME=HOST:PORT,HOST:PORT, and with remote set
// --remote-region (routers another stand-in serves: relayed to, not listened on).
type regionsValue struct {
	regions *[]standin.Region
	remote  bool
}

func (v regionsValue) String() string { return "" }

func (v regionsValue) Set(s string) error {
	name, list, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.TrimSpace(list) == "" {
		return fmt.Errorf("%q: want NAME=HOST:PORT[,HOST:PORT...]", s)
	}
	r := standin.Region{Name: name, Remote: v.remote}
	for _, a := range strings.Split(list, ",") {
		r.Addrs = append(r.Addrs, strings.TrimSpace(a))
	}
	*v.regions = append(*v.regions, r)
	return nil
}

// faultsValue is the repeatable --fault HOST:PORT=MODE.
type faultsValue struct{ faults *[]faultFlag }

func (v faultsValue) String() string { return "" }

func (v faultsValue) Set(s string) error {
	addr, mode, ok := strings.Cut(s, "=")
	if !ok || addr == "" {
		return fmt.Errorf("%q: want HOST:PORT=MODE", s)
	}
	f, err := standin.ParseFault(mode)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "standin: "))
	}
	*v.faults = append(*v.faults, faultFlag{addr: addr, fault: f})
	return nil
}

// durationValue is a flag.Value whose errors say what is wrong (flag's own says "parse error").
type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q: want a duration such as 15s or 500ms", s)
	}
	*d = durationValue(v)
	return nil
}

// defaultItems is the default --items: item 1 of every tenant, as the demo seeds it, so that
// a stand-in started by hand answers GET /t/<tenant>/items/1 with 200 at once.
const defaultItems = 1

// itemsValue is --items N, 0..standin.MaxItems.
type itemsValue int

func (n *itemsValue) String() string { return strconv.Itoa(int(*n)) }

func (n *itemsValue) Set(s string) error {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 0 || v > standin.MaxItems {
		return fmt.Errorf("%q: want a whole number from 0 to %d", s, standin.MaxItems)
	}
	*n = itemsValue(v)
	return nil
}

type flagSet struct {
	fs         *flag.FlagSet
	repeatable map[string]bool
	tenants    string
	logLevel   string
	opts       options
}

func newFlagSet() *flagSet {
	s := &flagSet{fs: flag.NewFlagSet("fenec-standin", flag.ContinueOnError)}
	fs := s.fs
	fs.Var(regionsValue{regions: &s.opts.regions}, "region", "a region and its routers in order, `NAME=HOST:PORT,HOST:PORT` (repeatable; port 0 = a free port)")
	fs.Var(regionsValue{regions: &s.opts.regions, remote: true}, "remote-region", "a region whose routers another stand-in serves, `NAME=HOST:PORT,HOST:PORT`: relayed to, not listened on (repeatable; one stand-in per region, as in lab/)")
	fs.StringVar(&s.tenants, "tenants", "", "the directory, `TENANT=REGION,...`, or @FILE with one TENANT=REGION per line (# comments)")
	fs.StringVar(&s.opts.token, "entry-token", "", "the entries' --entry-token: check and count Fenec-Client marks")
	fs.StringVar(&s.opts.cors, "http-cors", "", "CORS as in the entry's --cors, `ORIGINS`: * or a comma list (https://app.example)")
	s.opts.keepAlive = standin.DefaultKeepAlive
	fs.Var((*durationValue)(&s.opts.keepAlive), "http-keepalive", "interval of the keep-alive comment on event streams, a `duration` (15s, 500ms)")
	fs.StringVar(&s.logLevel, "log-level", "info", "trace, debug, info, warn, error or disabled")
	fs.Var(faultsValue{&s.opts.faults}, "fault", "start a router in a fault mode, `HOST:PORT=MODE`, the address as written in --region (repeatable; the modes are below)")
	s.opts.items = defaultItems
	fs.Var((*itemsValue)(&s.opts.items), "items", "seed items 1..`N` of every tenant, in its home region and not in the ledger (POSTs get ids after them), again on each /_standin/reset; 0: none")
	s.repeatable = map[string]bool{"region": true, "remote-region": true, "fault": true}
	return s
}

// parseArgs parses the command line, then the environment for flags not given, and checks
// the result. Its errors are *flagError, or errHelp.
func parseArgs(args []string, lookupEnv func(string) (string, bool)) (*options, error) {
	s := newFlagSet()
	given := make(map[string]bool)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			return nil, &flagError{"", fmt.Sprintf("unexpected argument %q: fenec-standin takes flags only (see --help)", a)}
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if name == "h" || name == "help" {
			return nil, errHelp
		}
		if s.fs.Lookup(name) == nil {
			return nil, &flagError{name, "unknown flag (see --help)"}
		}
		if !hasValue {
			if i+1 >= len(args) {
				return nil, &flagError{name, "needs a value"}
			}
			i++
			value = args[i]
		}
		if err := s.fs.Set(name, value); err != nil {
			return nil, &flagError{name, err.Error()}
		}
		given[name] = true
	}
	var envErr error
	s.fs.VisitAll(func(f *flag.Flag) {
		env := envName(f.Name)
		value, ok := lookupEnv(env)
		if envErr != nil || given[f.Name] || !ok {
			return
		}
		values := []string{value}
		if s.repeatable[f.Name] {
			values = strings.Split(value, ";")
		}
		for _, v := range values {
			if err := s.fs.Set(f.Name, v); err != nil {
				envErr = &flagError{f.Name, env + ": " + err.Error()}
				return
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	if err := s.finish(); err != nil {
		return nil, err
	}
	return &s.opts, nil
}

func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// finish checks what the flags say together.
func (s *flagSet) finish() error {
	o := &s.opts
	if len(o.regions) == 0 {
		return &flagError{"region", "at least one region is required, NAME=HOST:PORT,HOST:PORT"}
	}
	tenants, err := parseTenants(s.tenants)
	if err != nil {
		return &flagError{"tenants", err.Error()}
	}
	o.tenants = tenants
	if o.keepAlive <= 0 {
		return &flagError{"http-keepalive", fmt.Sprintf("must be positive, got %v", o.keepAlive)}
	}
	level, err := zerolog.ParseLevel(s.logLevel)
	if err != nil || !slices.Contains([]string{"trace", "debug", "info", "warn", "error", "disabled"}, strings.ToLower(s.logLevel)) {
		return &flagError{"log-level", fmt.Sprintf("%q: want trace, debug, info, warn, error or disabled", s.logLevel)}
	}
	o.logLevel = level
	cfg := o.config()
	if err := cfg.Validate(); err != nil {
		var ce *standin.ConfigError
		if errors.As(err, &ce) {
			return configFlagError(ce)
		}
		return &flagError{"region", err.Error()}
	}
	var addrs []string
	for _, r := range o.regions {
		if !r.Remote {
			addrs = append(addrs, r.Addrs...)
		}
	}
	for _, f := range o.faults {
		if !slices.Contains(addrs, f.addr) {
			return &flagError{"fault", fmt.Sprintf("no router at %q (routers: %s)", f.addr, strings.Join(addrs, ", "))}
		}
	}
	return nil
}

// configFlagError names the flag that sets the Config field a ConfigError is about.
func configFlagError(ce *standin.ConfigError) *flagError {
	flagOf := map[string]string{"Regions": "region", "Tenants": "tenants", "CORS": "http-cors",
		"KeepAlive": "http-keepalive", "Items": "items"}
	name, ok := flagOf[ce.Field]
	if !ok {
		name = "region"
	}
	return &flagError{name, ce.Msg}
}

// parseTenants reads --tenants: "acme=eu,globex=us", or "@FILE" with one tenant=region per
// line, '#' starting a comment.
func parseTenants(s string) (map[string]string, error) {
	type entry struct{ text, where string } // where: "FILE:LINE: " for a file
	var entries []entry
	if file, ok := strings.CutPrefix(s, "@"); ok {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for line := 1; sc.Scan(); line++ {
			text, _, _ := strings.Cut(sc.Text(), "#")
			if text = strings.TrimSpace(text); text != "" {
				entries = append(entries, entry{text, fmt.Sprintf("%s:%d: ", file, line)})
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	} else if strings.TrimSpace(s) != "" {
		for _, e := range strings.Split(s, ",") {
			entries = append(entries, entry{e, ""})
		}
	}
	tenants := make(map[string]string, len(entries))
	for _, e := range entries {
		tenant, home, ok := strings.Cut(e.text, "=")
		tenant, home = strings.TrimSpace(tenant), strings.TrimSpace(home)
		if !ok || tenant == "" || home == "" {
			return nil, fmt.Errorf("%s%q: want TENANT=REGION", e.where, e.text)
		}
		if _, dup := tenants[tenant]; dup {
			return nil, fmt.Errorf("%stenant %q is listed twice", e.where, tenant)
		}
		tenants[tenant] = home
	}
	return tenants, nil
}

// readme is the guide to the stand-in, by its path in the repository.
const readme = "cmd/fenec-standin/README.md"

// helpWidth is the widest line of --help.
const helpWidth = 100

// usage is the --help text: every flag, its default and its environment variable, then every
// fault mode, each line at most helpWidth columns.
func usage() string {
	var b strings.Builder
	b.WriteString("Usage: fenec-standin [flags]\n\n")
	wrap(&b, "", "Stand-in Fenec routers for development, tests, the chaos suite and the demo: every "+
		"router of every region, in one process, with faults on demand. See "+readme+" for the "+
		"tenant API, the admin endpoints (/_standin/ on every router) and a curl line for each.")
	b.WriteString("\n")
	s := newFlagSet()
	s.fs.VisitAll(func(f *flag.Flag) {
		kind, text := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "  --%s %s\n", f.Name, kind)
		if f.DefValue != "" {
			text += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		wrap(&b, "      ", text)
		env := "env " + envName(f.Name)
		if s.repeatable[f.Name] {
			env += " (values separated by ;)"
		}
		wrap(&b, "      ", env)
	})
	b.WriteString("\nFault modes, for --fault and POST /_standin/fault?router=HOST:PORT&mode=MODE (mode=ok clears):\n")
	width := 0
	for _, m := range standin.FaultModes() {
		width = max(width, len(m.Syntax))
	}
	for _, m := range standin.FaultModes() {
		wrap(&b, "  "+m.Syntax+strings.Repeat(" ", width-len(m.Syntax)+2), m.Summary)
	}
	return b.String()
}

// wrap writes text in lines of at most helpWidth columns, the first starting with first and
// the others indented as deep. A word longer than a line gets a line of its own.
func wrap(b *strings.Builder, first, text string) {
	indent := strings.Repeat(" ", len(first))
	line := first
	empty := true
	for _, word := range strings.Fields(text) {
		if !empty && len(line)+1+len(word) > helpWidth {
			b.WriteString(line + "\n")
			line, empty = indent, true
		}
		if !empty {
			line += " "
		}
		line += word
		empty = false
	}
	b.WriteString(line + "\n")
}
