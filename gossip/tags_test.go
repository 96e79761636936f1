package gossip

import (
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// A tag set on one entry reaches its peers' member lists; a removed one goes; too many bytes
// and "role" are refused, changing nothing.
func TestSetTagTravels(t *testing.T) {
	nodes := startCluster(t, 2)
	a, b := nodes[0], nodes[1]
	tagOf := func(of *testNode, name, key string) string {
		for _, m := range of.g.Members() {
			if m.Name == name {
				return m.Tags[key]
			}
		}
		return ""
	}
	if err := a.g.SetTag("lat", "eu:12,us:85"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "b sees a's tag", func() bool { return tagOf(b, "a", "lat") == "eu:12,us:85" })
	if tagOf(b, "a", "role") != "entry" {
		t.Error("setting a tag lost role=entry")
	}
	if err := a.g.SetTag("lat", strings.Repeat("x", maxTagsBytes)); err == nil {
		t.Error("an oversized tag was taken")
	}
	if err := a.g.SetTag("role", "other"); err == nil {
		t.Error("role was changed")
	}
	if tagOf(a, "a", "lat") != "eu:12,us:85" {
		t.Error("a refused tag changed the tags")
	}
	if err := a.g.SetTag("lat", ""); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "b sees the tag gone", func() bool { return tagOf(b, "a", "lat") == "" })
}
