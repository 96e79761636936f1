//go:build chaos

package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A gossip partition {A} | {B, C} made with nftables on loopback. Entry A runs with group id
// partitionGID (as root), so its sockets carry it (nft meta skgid):
//
//   - every packet to A's gossip port (UDP and TCP; the joiner's table and repair ride its
//     TCP side) is dropped: only peers connect there;
//   - every packet A's sockets send to B's or C's gossip port is dropped (A's outgoing TCP
//     connections come from ephemeral ports, so ports alone cannot tell them).
//
// The rules live in a table of their own, deleted at heal and at cleanup; nothing else of the
// machine's ruleset is touched.
type partition struct {
	table string
}

// ensureNft installs nftables if it is missing (as root, with apt-get) and checks that a
// table can be made. Outside CI a machine that cannot skips the partition; in CI (CI set) it
// fails, so that a partition never silently goes untested.
func ensureNft(t *testing.T) {
	t.Helper()
	cannot := func(format string, args ...any) {
		msg := fmt.Sprintf("partition needs nftables on loopback as root: "+format, args...)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg + " (set CI to make this a failure)")
	}
	if os.Geteuid() != 0 {
		cannot("running as uid %d", os.Geteuid())
	}
	if _, err := exec.LookPath("nft"); err != nil {
		out, err := exec.Command("sh", "-c",
			"apt-get install -y -qq nftables || (apt-get update -qq && apt-get install -y -qq nftables)").CombinedOutput()
		if err != nil {
			cannot("apt-get install nftables: %v\n%s", err, out)
		}
	}
	name := fmt.Sprintf("fenec_chaos_probe_%d", os.Getpid())
	if out, err := exec.Command("nft", "add", "table", "inet", name).CombinedOutput(); err != nil {
		cannot("nft add table: %v: %s", err, strings.TrimSpace(string(out)))
	}
	exec.Command("nft", "delete", "table", "inet", name).Run()
}

func port(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

// partitionA cuts entry A's gossip traffic (membership, homes, the table and repair: one port)
// from B and C.
func (h *harness) partitionA() *partition {
	t := h.t
	a, b, c := h.entry("a"), h.entry("b"), h.entry("c")
	if a.gid != partitionGID {
		t.Fatal("entry A does not run with the partition group id (not root?)")
	}
	p := &partition{table: fmt.Sprintf("fenec_chaos_%d", os.Getpid())}
	aPorts := port(a.gossip)
	others := strings.Join([]string{port(b.gossip), port(c.gossip)}, ", ")
	rules := fmt.Sprintf(`table inet %s {
	chain out {
		type filter hook output priority 0; policy accept;
		tcp dport { %s } drop
		udp dport { %s } drop
		udp sport %s drop
		meta skgid %d tcp dport { %s } drop
		meta skgid %d udp dport { %s } drop
	}
}
`, p.table, aPorts, port(a.gossip), port(a.gossip), partitionGID, others, partitionGID, others)
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s\n%s", err, out, rules)
	}
	t.Cleanup(p.heal)
	h.logf("partition {a} | {b, c}: nft table inet %s", p.table)
	return p
}

func (p *partition) heal() {
	exec.Command("nft", "delete", "table", "inet", p.table).Run() // gone already after a heal
}
