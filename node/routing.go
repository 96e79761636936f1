package node

import (
	"context"

	"github.com/fenec/fenec-entry/discover"
	"github.com/fenec/fenec-entry/proxy"
)

// splitRouters returns --routers as the proxy takes it (each region's fixed routers; a
// region with DNS names has Discovery set) and the DNS names of each region. c is valid.
func splitRouters(regs []proxy.Region) ([]proxy.Region, map[string][]discover.Source) {
	out := make([]proxy.Region, len(regs))
	names := map[string][]discover.Source{}
	for i, r := range regs {
		out[i] = proxy.Region{Name: r.Name}
		for _, u := range r.Routers {
			if !discover.IsSource(u) {
				out[i].Routers = append(out[i].Routers, u)
				continue
			}
			if src, err := discover.ParseSource(u); err == nil {
				names[r.Name] = append(names[r.Name], src)
				out[i].Discovery = true
			}
		}
	}
	return out, names
}

// routingOf returns the proxy's routing for c, with the routers found in DNS.
func routingOf(c Config, found map[string][]discover.Target) proxy.Routing {
	regions, _ := splitRouters(c.Routers)
	for i := range regions {
		for _, t := range found[regions[i].Name] {
			regions[i].Discovered = append(regions[i].Discovered, proxy.Router{URL: t.URL(), ServerName: t.Name})
		}
	}
	return proxy.Routing{Regions: regions, Continents: c.ContinentMap(), DefaultRegion: c.DefaultRegion,
		EntryToken: string(c.EntryToken), CORS: c.CORS}
}

// newDiscoverer returns the discoverer of the routers' DNS names (always made, so that a
// reload may add names to an entry started without any).
func (n *Node) newDiscoverer() *discover.Discoverer {
	lg := n.log.With().Str("part", "discover").Logger()
	return discover.New(discover.Config{
		Resolver:   discover.NewResolver(n.cfg.DNSServer),
		Interval:   n.cfg.ResolveInterval,
		Logger:     &lg,
		Registerer: n.reg,
		OnChange:   n.rediscovered,
	})
}

// resolveRouters gives the discoverer c's names, resolving the new ones now (bounded by
// ctx and discover.DefaultTimeout a name).
func (n *Node) resolveRouters(ctx context.Context, c Config) {
	_, names := splitRouters(c.Routers)
	n.disc.SetSources(ctx, c.RegionNames(), names)
}

// rediscovered applies what the routers' DNS names resolve to now, with the configuration in
// force.
func (n *Node) rediscovered() {
	n.reloadMu.Lock()
	defer n.reloadMu.Unlock()
	if err := n.proxy.SetRouting(routingOf(n.cur, n.disc.Found())); err != nil {
		n.log.Error().Err(err).Msg("routers found in DNS not applied")
	}
}
