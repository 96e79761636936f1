package gossip

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/internal/testutil"
	"github.com/hashicorp/serf/cmd/serf/command/agent"
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

// directPeers is made once and shared until a member event (or a second) says to read the
// members again: a new member is in the list that follows its join.
func TestDirectPeersCached(t *testing.T) {
	nodes := startCluster(t, 2)
	a := nodes[0]
	first := a.g.directPeers()
	if len(first) != 1 {
		t.Fatalf("peers %v, want b", first)
	}
	if again := a.g.directPeers(); &again[0] != &first[0] {
		t.Error("the list was made again with no member event")
	}
	startNode(t, "c", func(c *Config) { c.Join = []string{a.g.Addr()} })
	testutil.Eventually(t, 5*time.Second, "c in a's direct peers", func() bool {
		for _, p := range a.g.directPeers() {
			if p.Name == "c" {
				return true
			}
		}
		return false
	})
	if len(first) != 1 || first[0].Name != "b" {
		t.Errorf("a list handed out changed: %v", first)
	}
}

// serf's SetTags may wait seconds for its broadcast. Meanwhile the entry's view of itself
// (Up, Members, Addr, Joined) answers at once, and a second SetTag waits for the first.
func TestSetTagWaitsWithoutTheLock(t *testing.T) {
	nodes := startCluster(t, 2)
	a := nodes[0]
	entered := make(chan string, 2)
	release := make(chan struct{})
	a.g.setAgentTags = func(_ *agent.Agent, tags map[string]string) error {
		entered <- tags["lat"]
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		return nil
	}
	done := make(chan error, 2)
	go func() { done <- a.g.SetTag("lat", "eu:1") }()
	select {
	case v := <-entered:
		if v != "eu:1" {
			t.Fatalf("serf was given lat=%q, want eu:1", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SetTag did not reach serf")
	}
	go func() { done <- a.g.SetTag("lat", "eu:2") }()

	answered := make(chan struct{})
	go func() {
		a.g.Up()
		a.g.Members()
		a.g.Addr()
		a.g.countMembers()
		close(answered)
	}()
	select {
	case <-answered:
	case <-time.After(2 * time.Second):
		close(release)
		t.Fatal("Up, Members, Addr and the member count waited for serf's tag broadcast")
	}
	select {
	case v := <-entered:
		close(release)
		t.Fatalf("a second SetTag (lat=%s) reached serf while the first waited", v)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("SetTag did not return once serf did")
		}
	}
	select {
	case v := <-entered:
		if v != "eu:2" {
			t.Fatalf("the second SetTag gave serf lat=%q, want eu:2", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second SetTag returned without giving serf its tag")
	}
}

// Every tag change is an alive message that rewrites the sender's entry in memberlist's table:
// the peer list a batch goes to and the own address are read from serf's copies, never through
// memberlist's pointers into that table (hashicorp/memberlist#306). Under -race this failed
// within the first few tag changes when directPeers read memberlist's Members.
func TestPeerListWhileTagsChange(t *testing.T) {
	nodes := startCluster(t, 2)
	a, b := nodes[0], nodes[1]
	stop, done := make(chan struct{}), make(chan struct{})
	var reads int
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			a.g.peersDirty.Store(true) // read the members again every time
			if ps := a.g.directPeers(); len(ps) != 1 || ps[0].Name != "b" {
				t.Errorf("a's peers %v, want b", ps)
				return
			}
			_ = b.g.Addr()
			reads++
		}
	}()
	for k := range 20 {
		if err := b.g.SetTag("lat", fmt.Sprintf("eu:%d", k)); err != nil {
			t.Error(err)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	testutil.Eventually(t, 5*time.Second, "a sees b's last tag", func() bool {
		for _, m := range a.g.Members() {
			if m.Name == "b" {
				return m.Tags["lat"] == "eu:19"
			}
		}
		return false
	})
	close(stop)
	<-done
	if reads == 0 {
		t.Error("the peer list was never read")
	}
}

// A member that speaks another relay protocol (a rolling upgrade across a relay change) keeps
// the fleet's homes straight; fenec_entry_gossip_relay_other_members says how many there are.
func TestRelayOtherMembersCounted(t *testing.T) {
	nodes := startCluster(t, 2)
	a, b := nodes[0], nodes[1]
	if got := b.metric(t, "fenec_entry_gossip_relay_other_members"); got != 0 {
		t.Fatalf("one build: %v members of another relay version, want 0", got)
	}
	if err := a.g.SetTag("relay", "3"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "b counts a as another relay version", func() bool {
		return b.metric(t, "fenec_entry_gossip_relay_other_members") == 1
	})
	if got := a.metric(t, "fenec_entry_gossip_relay_other_members"); got != 1 {
		t.Errorf("a counts %v, want itself", got)
	}
}
