package gossip

import (
	"strings"
	"testing"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// The doc comments' promises of gossip's parts: none imports gossip above it, and each knows
// nothing of what its doc says it must not know.
func TestPartsKnowWhatTheirDocsSay(t *testing.T) {
	const (
		self     = "github.com/fenec/fenec-entry/gossip"
		internal = self + "/internal/"
		entry    = "github.com/fenec/fenec-entry/"
		serf     = "github.com/hashicorp/serf/"
		ml       = "github.com/hashicorp/memberlist"
	)
	for _, part := range []struct {
		dir   string
		never []string
	}{
		{"internal/spread", []string{serf, internal + "mux", internal + "tablesync"}},
		{"internal/tablesync", []string{serf, ml, internal + "spread", internal + "wire", internal + "mux"}},
		{"internal/wire", []string{serf, ml, internal + "spread", internal + "tablesync", internal + "mux"}},
		{"internal/mux", []string{serf}}, // and of the entry only its clock (below)
		{"internal/keyring", []string{serf, entry}},
		{"internal/validate", []string{"github.com/hashicorp/", self + "/"}},
		{"internal/stablehash", []string{entry}},
	} {
		testutil.NoImports(t, part.dir, append(part.never, self)...)
	}
	for _, p := range testutil.Imports(t, "internal/mux") {
		if strings.HasPrefix(p, entry) && p != entry+"internal/clock" {
			t.Errorf("internal/mux imports %s: it knows nothing of the entry but its clock", p)
		}
	}
}
