package node

import (
	"context"
	"maps"
	"slices"
	"time"
)

// reloadable is every setting a reload applies while the entry serves (--config, SIGHUP,
// POST /reload): its flag, how the configuration in force takes it from the new one, and
// whether two configurations hold the same value. Every other setting takes effect at the next
// start. Reloadable, the reload and its list of what changed all read this one table.
var reloadable = []struct {
	flag string
	take func(dst *Config, src Config)
	same func(a, b Config) bool
}{
	{"routers", func(d *Config, s Config) { d.Routers = s.Routers },
		func(a, b Config) bool { return slices.Equal(routerTexts(a), routerTexts(b)) }},
	{"continents", func(d *Config, s Config) { d.Continents = s.Continents },
		func(a, b Config) bool { return maps.Equal(a.ContinentMap(), b.ContinentMap()) }},
	{"default-region", func(d *Config, s Config) { d.DefaultRegion = s.DefaultRegion },
		func(a, b Config) bool { return a.DefaultRegion == b.DefaultRegion }},
	{"cors", func(d *Config, s Config) { d.CORS = s.CORS },
		func(a, b Config) bool { return a.CORS == b.CORS }},
	{"entry-token", func(d *Config, s Config) { d.EntryToken = s.EntryToken },
		func(a, b Config) bool { return a.EntryToken == b.EntryToken }},
	{"read-backoff", func(d *Config, s Config) { d.ReadBackoff = s.ReadBackoff },
		func(a, b Config) bool { return a.ReadBackoff == b.ReadBackoff }},
	{"log-level", func(d *Config, s Config) { d.LogLevel = s.LogLevel },
		func(a, b Config) bool { return a.LogLevel == b.LogLevel }},
}

// Reloadable names the settings a reload applies, by flag, in the order of --help.
var Reloadable = func() []string {
	out := make([]string, len(reloadable))
	for i, r := range reloadable {
		out[i] = r.flag
	}
	return out
}()

// Reloader re-reads the configuration: the whole new Config, as a start would build it, and
// the flags whose value changed that a reload does not apply (they wait for a restart). An
// error is a *ConfigError naming the setting.
type Reloader func() (cfg Config, needRestart []string, err error)

// ReloadResult says what a reload did.
type ReloadResult struct {
	Changed     []string `json:"changed"`       // reloadable settings whose value changed: applied
	NeedRestart []string `json:"needs_restart"` // changed settings that take effect at the next start
	Forgotten   uint64   `json:"homes_forgotten"`
}

// Reload re-reads the configuration with Config.Reloader and applies what may change while
// serving (Reloadable): all of it at once, after the whole new configuration is validated, or
// none of it (the error, a *ConfigError naming the setting, is returned and logged, and the
// configuration in force stays). Requests in flight finish under the configuration they
// started with. A region added is asked from the next request; a region removed is asked no
// more, and its homes are forgotten (counted). New DNS names of routers are resolved before
// the change is applied (bounded by ctx and 2 s a name). Safe for concurrent use; reloads are
// serialised.
func (n *Node) Reload(ctx context.Context) (ReloadResult, error) {
	if n.cfg.Reloader == nil {
		return ReloadResult{}, cfgErr("config", "not set: there is no file to re-read (start with --config FILE)")
	}
	res, err := n.reload(ctx)
	if err != nil {
		n.log.Error().Str("error", err.Error()).Msg("reload refused: the configuration in force is kept")
		return ReloadResult{}, err
	}
	n.log.Info().Strs("changed", res.Changed).Strs("needs_restart", res.NeedRestart).
		Uint64("homes_forgotten", res.Forgotten).Msg("configuration reloaded")
	if len(res.NeedRestart) > 0 {
		n.log.Warn().Strs("needs_restart", res.NeedRestart).
			Msg("settings changed in --config that take effect only at the next start")
	}
	return res, nil
}

func (n *Node) reload(ctx context.Context) (ReloadResult, error) {
	next, restart, err := n.cfg.Reloader()
	if err != nil {
		return ReloadResult{}, err
	}
	n.reloadMu.Lock()
	defer n.reloadMu.Unlock()
	if n.draining.Load() {
		return ReloadResult{}, cfgErr("config", "the entry is draining")
	}
	cur := n.cur
	merged := cur // everything a reload does not change stays as in force
	for _, r := range reloadable {
		r.take(&merged, next)
	}
	if err := merged.Validate(); err != nil {
		return ReloadResult{}, err
	}
	if err := n.homes.CheckRegions(merged.RegionNames()); err != nil {
		return ReloadResult{}, cfgErr("routers", "%v", err)
	}
	res := ReloadResult{Changed: changedSettings(cur, merged), NeedRestart: restart}
	if res.Changed == nil {
		res.Changed = []string{}
	}
	if res.NeedRestart == nil {
		res.NeedRestart = []string{}
	}

	before := n.homes.Stats().RegionRemoved
	n.resolveRouters(ctx, merged)
	if err := n.proxy.SetRouting(routingOf(merged, n.disc.Found())); err != nil {
		// Validate and CheckRegions passed, so this is not expected; put the names back.
		n.resolveRouters(context.WithoutCancel(ctx), cur)
		return ReloadResult{}, cfgErr("routers", "%v", err)
	}
	n.homes.SetReadBackoff(merged.ReadBackoff)
	if merged.LogLevel != cur.LogLevel && n.cfg.SetLogLevel != nil {
		n.cfg.SetLogLevel(merged.LogLevel)
	}
	n.cur = merged
	res.Forgotten = n.homes.Stats().RegionRemoved - before
	return res, nil
}

// changedSettings names the reloadable settings whose value differs between a and b.
func changedSettings(a, b Config) []string {
	var out []string
	for _, r := range reloadable {
		if !r.same(a, b) {
			out = append(out, r.flag)
		}
	}
	return out
}

// routerTexts is c's routing as text, regions in order with their routers, for comparing.
func routerTexts(c Config) []string {
	var s []string
	for _, r := range c.Routers {
		s = append(s, ";"+r.Name)
		for _, u := range r.Routers {
			s = append(s, u.String())
		}
	}
	return s
}

// watchReloads reloads on each value from Config.ReloadOn (SIGHUP), until the entry stops.
func (n *Node) watchReloads() {
	for {
		select {
		case <-n.bg.Done():
			return
		case <-n.cfg.ReloadOn:
		}
		if n.cfg.Reloader == nil {
			n.log.Warn().Msg("SIGHUP: no --config to re-read; nothing changed (the entry keeps serving)")
			continue
		}
		ctx, cancel := context.WithTimeout(n.bg, time.Minute)
		n.Reload(ctx)
		cancel()
	}
}
