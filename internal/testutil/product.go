package testutil

import (
	"go/build/constraint"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ownDir is this package's directory, from the module's root.
const ownDir = "internal/testutil"

// testOnlyTags are the build tags only tests set (go test -tags chaos, ...): a file that
// builds only with one of them is test code, whatever its name.
var testOnlyTags = []string{"chaos", "gossip100", "memnet100"}

// ProductFiles returns the paths of the module's product Go files, from its root, in walk
// order: every .go file but _test.go files, those under bench/, testdata/ and dot
// directories, those of this package (test code: only tests import it), and those that
// build only with a test-only tag (chaos, gossip100, memnet100).
func ProductFiles(tb testing.TB) []string {
	tb.Helper()
	out, err := productFiles(ModuleRoot(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func productFiles(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "bench" || name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			if rel, _ := filepath.Rel(root, path); filepath.ToSlash(rel) == ownDir {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !TestOnly(src) {
			out = append(out, path)
		}
		return nil
	})
	return out, err
}

// TestOnly reports whether the Go source src builds only with a test-only tag: whether its
// //go:build line is false, whatever the other tags, while every test-only tag is unset.
// A file without a //go:build line, or with one that does not parse, is not test-only.
func TestOnly(src []byte) bool {
	expr := buildExpr(src)
	if expr == nil {
		return false
	}
	var others []string
	collectTags(expr, func(tag string) {
		if !slices.Contains(testOnlyTags, tag) && !slices.Contains(others, tag) {
			others = append(others, tag)
		}
	})
	if len(others) > 16 {
		return false // too many to try every setting of: count it as product code
	}
	for set := range 1 << len(others) {
		holds := expr.Eval(func(tag string) bool {
			i := slices.Index(others, tag)
			return i >= 0 && set&(1<<i) != 0 // a test-only tag (i < 0) is unset
		})
		if holds {
			return false
		}
	}
	return true
}

// buildExpr returns the //go:build expression of src, read from the lines before its package
// clause, or nil.
func buildExpr(src []byte) constraint.Expr {
	for line := range strings.Lines(string(src)) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "package ") {
			return nil
		}
		if constraint.IsGoBuild(line) {
			expr, err := constraint.Parse(line)
			if err != nil {
				return nil
			}
			return expr
		}
	}
	return nil
}

func collectTags(e constraint.Expr, f func(string)) {
	switch e := e.(type) {
	case *constraint.TagExpr:
		f(e.Tag)
	case *constraint.NotExpr:
		collectTags(e.X, f)
	case *constraint.AndExpr:
		collectTags(e.X, f)
		collectTags(e.Y, f)
	case *constraint.OrExpr:
		collectTags(e.X, f)
		collectTags(e.Y, f)
	}
}
