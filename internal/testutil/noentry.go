package testutil

import (
	"strings"
	"testing"
)

// NoEntryImports fails the test for each entry package (github.com/fenec/fenec-entry/...)
// that the non-test files in dir import: for a package whose doc promises to know none.
func NoEntryImports(tb testing.TB, dir string) {
	tb.Helper()
	NoImports(tb, dir, "github.com/fenec/fenec-entry/")
}

// NoImports fails the test for each import of the non-test files in dir that is one of paths:
// the path itself, or, for a path that ends in "/", any path it begins. For a package whose
// doc promises to know none of them.
func NoImports(tb testing.TB, dir string, paths ...string) {
	tb.Helper()
	for _, p := range Imports(tb, dir) {
		for _, q := range paths {
			if p == q || strings.HasSuffix(q, "/") && strings.HasPrefix(p, q) {
				tb.Errorf("%s imports %s", dir, p)
			}
		}
	}
}
