package gossip

import (
	"io"
	"log"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// A host name in --gossip-bind is resolved, so memberlist binds that address only (given a
// name, memberlist would bind every interface).
func TestBindHostNameResolved(t *testing.T) {
	c := DefaultConfig()
	c.NodeName, c.BindAddr = "n", "localhost:0"
	g := &Gossip{cfg: c}
	mc, err := g.memberlistConfigLocked()
	if err != nil {
		t.Fatal(err)
	}
	if mc.BindAddr != "127.0.0.1" && mc.BindAddr != "::1" {
		t.Errorf("BindAddr = %q, want localhost's address", mc.BindAddr)
	}
}

// A gossip address in use is tried again for BindWait: the process an upgrade in place
// started binds it as soon as the one it replaces lets it go, rather than failing.
func TestBindWaitsForTheAddress(t *testing.T) {
	held, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := held.LocalAddr().(*net.UDPAddr).Port
	mc := &memberlist.Config{BindAddr: "127.0.0.1", BindPort: port}
	logOut := log.New(io.Discard, "", 0)
	if _, err := newNetTransport(mc, logOut, 0); err == nil {
		t.Fatal("bound an address in use")
	}
	time.AfterFunc(300*time.Millisecond, func() { held.Close() })
	start := time.Now()
	nt, err := newNetTransport(mc, logOut, 3*time.Second)
	if err != nil {
		t.Fatalf("with BindWait 3s, the address let go after 300ms: %v", err)
	}
	defer nt.Shutdown()
	if took := time.Since(start); took < 250*time.Millisecond || took > 2*time.Second {
		t.Errorf("bound after %v, want soon after the address was let go (300 ms)", took)
	}
}
