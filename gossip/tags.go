package gossip

import (
	"fmt"
	"maps"
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
func (g *Gossip) SetTag(key, value string) error {
	if key == "role" {
		return fmt.Errorf("gossip: tag %q is fixed", key)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	tags := maps.Clone(g.cfg.Tags)
	if value == "" {
		delete(tags, key)
	} else {
		tags[key] = value
	}
	if n := tagsSize(tags); n > maxTagsBytes {
		return fmt.Errorf("gossip: tags would take %d bytes, at most %d", n, maxTagsBytes)
	}
	if maps.Equal(tags, g.cfg.Tags) {
		return nil
	}
	g.cfg.Tags = tags
	if g.inc == nil || g.left || g.closed {
		return nil
	}
	return g.inc.agent.SetTags(maps.Clone(tags))
}

// tagsSize is an upper bound of the tags' encoded size (serf's msgpack map: a few bytes of
// header per key and value).
func tagsSize(tags map[string]string) int {
	n := 3
	for k, v := range tags {
		n += len(k) + len(v) + 10
	}
	return n
}
