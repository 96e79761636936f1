// Package status is what an entry says about itself to people and tools: the Status document
// that /status.json serves, the /status page rendered from it (html/template, one embedded
// file, no script, no external asset), and the gossip traffic rates the page shows (Traffic,
// read from the Prometheus counters package gossip registers).
//
// It knows nothing of node, proxy, homes or gossip: node fills a Status from them, and this
// package shows it. The fields of Status are part of the admin listener's contract
// (docs/REFERENCE.md, "Cluster and operations"): fields are added, never removed or renamed without
// a note.
package status

import "time"

// Status is what /status.json shows: this entry, its regions and routers, its home table and
// the live region marks. Fields will be added (members, router health, gossip traffic);
// none will be removed or renamed without a note in the changelog.
type Status struct {
	Pop       string         `json:"pop"`
	Continent string         `json:"continent"`
	Node      string         `json:"node"`
	Version   string         `json:"version"`
	Started   time.Time      `json:"started,omitzero"`
	Ready     bool           `json:"ready"`
	Draining  bool           `json:"draining"`
	Inflight  int64          `json:"inflight"`
	Regions   []RegionStatus `json:"regions"`
	Homes     HomesStatus    `json:"homes"`
	Marks     []MarkStatus   `json:"marks"`
	Gossip    bool           `json:"gossip"` // false: no --gossip-key and no --insecure-gossip, serving alone
	// GossipUp: serf runs and this entry is a member (fenec_entry_gossip_up). False while
	// gossip is off, after the entry left (a drain), and while serf is shut down (it lost a
	// node name conflict) and being started again; GossipState then says which ("left",
	// "shutdown"; "off" when gossip is off).
	GossipUp    bool           `json:"gossip_up"`
	GossipState string         `json:"gossip_state"`
	Members     []MemberStatus `json:"members"` // every gossip member this entry knows, itself included; none while serf is shut down
	// Closest is the region a tenant heard nowhere, whose client continent --continents does
	// not map, goes to first: the default region unless a measured one is clearly closer.
	Closest string `json:"closest_region"`

	// Relays is how homes travel from this entry: nil while gossip is off or down; Relays.On
	// false, straight to every member; true, through relays (large fleets).
	Relays *RelayStatus `json:"relays,omitempty"`

	At      time.Time      `json:"at"`                       // when this status was taken
	Traffic *GossipTraffic `json:"gossip_traffic,omitempty"` // nil when gossip is off
}

// RelayStatus is how this entry's homes travel (through relays while sending them to every
// member directly would cost more than 20 KB/s).
type RelayStatus struct {
	On          bool    `json:"on"`                      // this entry's homes go through relays
	DirectBytes float64 `json:"direct_bytes_per_s"`      // what sending them straight would cost, bytes a second
	Groups      int     `json:"groups,omitempty"`        // the cluster's relay groups
	Group       int     `json:"group_members,omitempty"` // this entry's group, itself included; it relays 1/Group of the tenants to it
}

// MemberStatus is one gossip member as serf sees it.
type MemberStatus struct {
	Name      string `json:"name"`
	Addr      string `json:"addr"`
	State     string `json:"state"` // alive, leaving, left, failed
	Pop       string `json:"pop"`
	Continent string `json:"continent"`
	Version   string `json:"version"`
	// LatencyMS is the member's measured round trip to each region, in milliseconds, as it
	// shares it in its serf tags ("lat"); nil when it shares none (yet). This entry's row is
	// its own, current measurement.
	LatencyMS map[string]float64 `json:"latency_ms,omitempty"`
}

// RegionStatus is one configured region, in --routers order.
type RegionStatus struct {
	Name    string   `json:"name"`
	Routers []string `json:"routers"`
	// Names are the region's DNS names of routers (dns+http://NAME:PORT, srv+http://NAME), as
	// --routers gives them; Routers then lists what they resolve to now.
	Names []string `json:"names,omitempty"`
	// LatencyMS is this entry's round trip to the region (a windowed minimum of answer-head,
	// connect and probe times, milliseconds); 0 with Measured false when there is none yet.
	LatencyMS float64 `json:"latency_ms"`
	Measured  bool    `json:"latency_measured"`
	// Marked: the region's latest failure is newer than its latest clear, so plain writes ask
	// it last until one of its routers answers; MarkedForReads: that failure is also younger
	// than --read-backoff, so reads and keyed writes ask it last too (docs/REFERENCE.md, "Which
	// region, which router").
	Marked         bool `json:"marked"`
	MarkedForReads bool `json:"marked_for_reads"`
	// UnreachableFromHere: this entry's own attempt at the region failed and no router of it
	// has answered this entry since (a request, or its probe at least every --read-backoff),
	// so every request here asks it last, whatever the fleet's marks say. This entry's alone:
	// never gossiped (docs/REFERENCE.md, "Which region, which router").
	UnreachableFromHere bool `json:"unreachable_from_here"`
	// RouterStates are the Routers in the same order, with what this entry last saw of each.
	RouterStates []RouterStatus `json:"router_states"`
}

// RouterStatus is one router as this entry last saw it (proxy.Handler.RouterStatus).
type RouterStatus struct {
	URL string `json:"url"` // as in RegionStatus.Routers
	// State is "up" (its last attempt got an answer), "failing" (it did not) or "unknown"
	// (not asked since this entry started).
	State string `json:"state"`
	// LastOutcome is the last attempt's class: answer, home_5xx, shard_5xx, never_made or
	// may_have_reached (docs/REFERENCE.md, "Which region, which router"); "" before any.
	LastOutcome string    `json:"last_outcome,omitempty"`
	LastStatus  int       `json:"last_status,omitempty"` // the last answer's status; 0: no answer head
	LastAt      time.Time `json:"last_at,omitzero"`      // when the last attempt ended
	Failures    int       `json:"failures"`              // failed attempts since it last answered
}

// HomesStatus is the home table's Stats.
type HomesStatus struct {
	Held          int    `json:"held"`
	Local         int    `json:"local"`
	Gossip        int    `json:"gossip"`
	Capacity      int    `json:"capacity"`
	Evicted       uint64 `json:"evicted"`
	FeedDropped   uint64 `json:"feed_dropped"`
	UnknownRegion uint64 `json:"unknown_region"`
	// Digest is an order-independent digest of the homes held (gossip.TableDigest): entries
	// whose tables agree show the same one.
	Digest string `json:"digest"`
}

// MarkStatus is the latest failure of a failing region (one whose latest failure is newer
// than its latest clear).
type MarkStatus struct {
	Region   string    `json:"region"`
	Observer string    `json:"observer"`  // the entry that saw it fail
	FailedAt time.Time `json:"failed_at"` // on the observer's clock, no later than its arrival here
	// ReadsUntil is when reads and keyed writes ask the region first again (FailedAt plus
	// --read-backoff); plain writes ask it last until a router of it answers.
	ReadsUntil time.Time `json:"reads_until"`
}
