package testutil

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The package doc's promise: only tests import testutil, so no binary carries it.
func TestOnlyTestsImportThis(t *testing.T) {
	const self = "github.com/fenec/fenec-entry/internal/testutil"
	root := filepath.Join("..", "..") // the module's root, beside go.mod
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == self {
				t.Errorf("%s imports %s outside a test", path, self)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestImports(t *testing.T) {
	got := Imports(t, ".")
	for _, want := range []string{"go/parser", "testing"} {
		if !slices.Contains(got, want) {
			t.Errorf("Imports(testutil) = %v, lacks %s", got, want)
		}
	}
	if slices.Contains(got, "io/fs") { // only this test file imports it
		t.Errorf("Imports(testutil) = %v: counted a test file", got)
	}
}

// errorsTB records what Errorf was told.
type errorsTB struct {
	testing.TB
	errs []string
}

func (e *errorsTB) Helper() {}

func (e *errorsTB) Errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

func TestNoImports(t *testing.T) {
	for _, row := range []struct {
		paths []string
		want  int // imports told
	}{
		{[]string{"go/parser"}, 1},
		{[]string{"go/"}, 3}, // go/build/constraint, go/parser and go/token
		{[]string{"go", "pars"}, 0},
		{[]string{"github.com/fenec/fenec-entry/"}, 0},
	} {
		e := &errorsTB{}
		NoImports(e, ".", row.paths...)
		if len(e.errs) != row.want {
			t.Errorf("NoImports(%q) told %q, want %d imports", row.paths, e.errs, row.want)
		}
	}
}
