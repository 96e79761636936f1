package testutil

import (
	"strings"
	"testing"
)

// NoEntryImports fails the test for each entry package (github.com/fenec/fenec-entry/...)
// that the non-test files in dir import: for a package whose doc promises to know none.
func NoEntryImports(tb testing.TB, dir string) {
	tb.Helper()
	for _, p := range Imports(tb, dir) {
		if strings.HasPrefix(p, "github.com/fenec/fenec-entry/") {
			tb.Errorf("%s imports %s", dir, p)
		}
	}
}
