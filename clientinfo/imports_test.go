package clientinfo

import (
	"strings"
	"testing"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// The package doc's promise: clientinfo knows nothing of node, proxy or homes.
func TestImportsNoEntryPackage(t *testing.T) {
	for _, p := range testutil.Imports(t, ".") {
		if strings.HasPrefix(p, "github.com/fenec/fenec-entry/") {
			t.Errorf("clientinfo imports %s", p)
		}
	}
}
