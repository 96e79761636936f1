package main

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/fenec/fenec-entry/clientinfo"
	"github.com/fenec/fenec-entry/gossip"
	"github.com/fenec/fenec-entry/node"
	"github.com/fenec/fenec-entry/proxy"
)

// The parsers of the flag syntaxes, for node.Config's fields. They are pure (no I/O, no environment) and their errors
// say what is wrong without the flag name: the caller prefixes "--<flag>: ". Semantic checks
// (schemes, ports, bounds, references between flags) are Validate's; the parsers check only
// that the text has the shape of the syntax.

// routersSyntax is what --routers looks like, for error messages.
const routersSyntax = node.RoutersSyntax

// parseRouters parses --routers: regions separated by ";", each a name, "=" and its router
// URLs separated by ",", for example "eu=http://r1:7000,http://r2:7000;us=http://r3:7000".
// Spaces around the separators are ignored; a path of "/" is dropped. An empty entry (a
// trailing "," or ";", or two in a row) is refused: it is more often a router or a region left
// out than a stray key. The order of the regions is kept (it is the fallback order).
func parseRouters(s string) ([]proxy.Region, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("no regions (" + routersSyntax + ")")
	}
	var out []proxy.Region
	for seg := range strings.SplitSeq(s, ";") {
		seg = strings.TrimSpace(seg)
		if seg == "" {
			return nil, fmt.Errorf("an empty region: a \";\" with nothing after it or before the next (%s)", routersSyntax)
		}
		name, list, ok := strings.Cut(seg, "=")
		name = strings.TrimSpace(name)
		if !ok {
			return nil, fmt.Errorf("%q names no region (%s)", showURL(seg), routersSyntax)
		}
		if name == "" {
			return nil, fmt.Errorf("a region has no name before \"=\" (%s)", routersSyntax)
		}
		reg := proxy.Region{Name: name}
		for raw := range strings.SplitSeq(list, ",") {
			raw = strings.TrimSpace(raw)
			if raw == "" && list != "" && strings.TrimSpace(list) != "" {
				return nil, fmt.Errorf("region %q: an empty router: a \",\" with nothing after it or before the next (%s)", name, routersSyntax)
			}
			if raw == "" {
				continue
			}
			u, err := url.Parse(raw)
			if err != nil {
				return nil, fmt.Errorf("region %q: router %q is not a URL (want http://host:port)", name, showURL(raw))
			}
			if u.Path == "/" && u.RawQuery == "" && u.Fragment == "" {
				u.Path = ""
			}
			reg.Routers = append(reg.Routers, u)
		}
		if len(reg.Routers) == 0 {
			return nil, fmt.Errorf("region %q has no routers (%s)", name, routersSyntax)
		}
		out = append(out, reg)
	}
	if len(out) == 0 {
		return nil, errors.New("no regions (" + routersSyntax + ")")
	}
	return out, nil
}

// showURL returns raw for an error message, with any user information replaced, so that a
// password put in a URL by mistake is not printed.
func showURL(raw string) string {
	at := strings.LastIndexByte(raw, '@')
	if at < 0 {
		return raw
	}
	scheme := strings.Index(raw, "://")
	if scheme < 0 || scheme > at {
		return "xxxxx" + raw[at:]
	}
	return raw[:scheme+3] + "xxxxx" + raw[at:]
}

// parseContinents parses --continents: pairs CODE=region separated by ",", for example
// "EU=eu,NA=us". Codes are upper-cased; a code given twice is an error. The empty string
// gives an empty, non-nil map: no continent is mapped.
func parseContinents(s string) (map[string]string, error) {
	m := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		code, region, ok := strings.Cut(pair, "=")
		code, region = strings.ToUpper(strings.TrimSpace(code)), strings.TrimSpace(region)
		if !ok || code == "" || region == "" {
			return nil, fmt.Errorf("%q is not CODE=region (want EU=eu,NA=us,...)", pair)
		}
		if _, dup := m[code]; dup {
			return nil, fmt.Errorf("continent %s is mapped twice", code)
		}
		m[code] = region
	}
	return m, nil
}

// sizeUnits are the units parseSize takes, lower-cased.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"kb": 1000, "mb": 1000 * 1000, "gb": 1000 * 1000 * 1000,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
}

const sizeSyntax = "want a whole number of bytes, optionally with B, KB, MB, GB, KiB, MiB or GiB: 1MiB, 512KiB, 1048576"

// parseSize parses a byte size: a whole number optionally followed by a unit, B, KB, MB, GB
// (powers of 1000) or KiB, MiB, GiB (powers of 1024), case-insensitive, with or without a
// space: "1MiB", "512KiB", "1048576", "2MB". Negative sizes and fractions are errors.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	unit, ok := sizeUnits[strings.ToLower(strings.TrimSpace(t[i:]))]
	if i == 0 || !ok {
		return 0, fmt.Errorf("%q is not a size (%s)", s, sizeSyntax)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * unit, nil
}

// parseCIDRs parses a comma-separated list of CIDR prefixes ("10.0.0.0/8, fd00::/8"); a bare
// address stands for itself alone (/32 or /128). Prefixes are masked: "10.1.2.3/8" is
// 10.0.0.0/8. The empty string gives nil.
func parseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if strings.Contains(item, "/") {
			p, err := netip.ParsePrefix(item)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR prefix (want 10.0.0.0/8,fd00::/8 or addresses)", item)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%q is not an address or CIDR prefix (want 10.0.0.0/8,fd00::/8 or addresses)", item)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// parseList splits a comma-separated list, trimming spaces and dropping empty items. The
// empty string gives nil.
func parseList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// defaultPop is --pop's default: the Fly region this runs in (FLY_REGION), else the hostname.
// Either may be "".
func defaultPop(flyRegion, hostname string) string {
	if flyRegion != "" {
		return flyRegion
	}
	return hostname
}

// defaultNode is --node's default (docs/REFERENCE.md, "Configuration"): the Fly machine ID
// (FLY_MACHINE_ID), else the hostname, with "-<port>" appended when gossipBind (--gossip-bind)
// is not on gossip's default port, so that entries side by side on one host, given distinct
// ports and nothing else, have distinct names. gossipBind is as given (host:port); one that
// does not parse changes nothing (Validate names it).
func defaultNode(flyMachineID, hostname, gossipBind string) string {
	if flyMachineID != "" {
		return flyMachineID
	}
	if hostname == "" {
		return ""
	}
	if _, port, err := net.SplitHostPort(gossipBind); err == nil && port != "" && port != strconv.Itoa(gossip.DefaultBindPort) {
		return hostname + "-" + port
	}
	return hostname
}

// defaultContinent is --continent's default: the continent of the Fly region this runs in
// (FLY_REGION), or "" outside Fly or in a region the table does not know.
func defaultContinent(flyRegion string) string {
	c, _ := clientinfo.FlyContinent(flyRegion)
	return c
}
