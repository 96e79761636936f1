package node

import (
	"testing"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// TestReferenceHasEveryAdminCode: the admin listener's error codes are written in
// docs/REFERENCE.md.
func TestReferenceHasEveryAdminCode(t *testing.T) {
	if missing := testutil.ReferenceMissing(t, []string{codeForbidden, codeReloadRefused}); len(missing) > 0 {
		t.Errorf("%s does not write these admin error codes (in backquotes): %q", testutil.ReferenceFile, missing)
	}
}
