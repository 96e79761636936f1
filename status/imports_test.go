package status

import (
	"strings"
	"testing"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// The package doc's promise: status knows nothing of node, proxy, homes or gossip.
func TestImportsNoEntryPackage(t *testing.T) {
	for _, p := range testutil.Imports(t, ".") {
		if strings.HasPrefix(p, "github.com/fenec/fenec-entry/") {
			t.Errorf("status imports %s", p)
		}
	}
}
