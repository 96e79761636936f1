package gossip

import (
	"fmt"
	"maps"

	"github.com/hashicorp/serf/cmd/serf/command/agent"
)

// maxTagsBytes bounds this entry's tags as serf encodes them: memberlist carries a node's meta
// in every alive message and refuses more than 512 bytes (memberlist.MetaMaxSize); the rest of
// the message's room is left to serf's own fields.
const maxTagsBytes = 400

// SetTag sets one of this entry's serf tags (an empty value removes it) and gossips the change
// (serf's SetTags: a new alive message with a higher incarnation). The tags are kept for a
// serf started again after a name conflict. It fails, changing nothing, when the tags would
// pass maxTagsBytes, or "role" is named. Safe for concurrent use; before Start it only
// records the tag.
//
// serf's SetTags waits for its broadcast to go out, up to BroadcastTimeout (5 s) while a peer
// is alive. That wait is made without g.mu: Members, Up, Addr and the member count behind
// Joined take g.mu, and a start whose first tag waited held them all (the joiner's wait for a
// first peer then ended with none, and the entry served alone with an empty table; the
// status page hung). tagMu keeps the calls in order instead.
func (g *Gossip) SetTag(key, value string) error {
	if key == "role" {
		return fmt.Errorf("gossip: tag %q is fixed", key)
	}
	g.tagMu.Lock()
	defer g.tagMu.Unlock()
	g.mu.Lock()
	tags, err := g.newTagsLocked(key, value)
	if err != nil || tags == nil || g.inc == nil || g.left || g.closed {
		g.mu.Unlock()
		return err
	}
	a := g.inc.agent
	g.mu.Unlock()
	return g.setAgentTags(a, tags)
}

// newTagsLocked records the tags with key set to value in g.cfg.Tags (the next incarnation's)
// and returns a copy for serf; nil when nothing changes.
func (g *Gossip) newTagsLocked(key, value string) (map[string]string, error) {
	tags := maps.Clone(g.cfg.Tags)
	if value == "" {
		delete(tags, key)
	} else {
		tags[key] = value
	}
	if n := tagsSize(tags); n > maxTagsBytes {
		return nil, fmt.Errorf("gossip: tags would take %d bytes, at most %d", n, maxTagsBytes)
	}
	if maps.Equal(tags, g.cfg.Tags) {
		return nil, nil
	}
	g.cfg.Tags = tags
	return maps.Clone(tags), nil
}

// agentSetTags is serf's SetTags through the agent (a test's stand-in in tests).
func agentSetTags(a *agent.Agent, tags map[string]string) error { return a.SetTags(tags) }

// tagsSize is an upper bound of the tags' encoded size (serf's msgpack map: a few bytes of
// header per key and value).
func tagsSize(tags map[string]string) int {
	n := 3
	for k, v := range tags {
		n += len(k) + len(v) + 10
	}
	return n
}
