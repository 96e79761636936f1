package status

import (
	"testing"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// The package doc's promise: status imports no entry package.
func TestImportsNoEntryPackage(t *testing.T) { testutil.NoEntryImports(t, ".") }
