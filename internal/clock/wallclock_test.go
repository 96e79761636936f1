package clock_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// The package's promise: no product code outside it reads the wall clock. Time comes from a
// clock.Clock (a Config's Clock), and the few readings that need the wall clock itself go
// through clock.System, where they can be found.
func TestNoWallClockOutside(t *testing.T) {
	root := testutil.ModuleRoot(t)
	files := testutil.ProductFiles(t)
	if len(files) < 100 {
		t.Fatalf("only %d product files found: the walk is broken", len(files))
	}
	for _, path := range files {
		rel, err := filepath.Rel(root, path)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "internal/clock/") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range wallClockReads(t, rel, src) {
			t.Errorf("%s: take the time from a clock.Clock (clock.System where only the wall clock will do)", r)
		}
	}
}

// wallClockReads returns file:line: what for each use of time.Now, time.Since or time.Until in
// src, called or not (cfg.Now = time.Now reads the wall clock too), and for a dot import of
// time, whose calls the check cannot tell from others.
func wallClockReads(tb testing.TB, name string, src []byte) []string {
	tb.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		tb.Fatal(err)
	}
	var local string
	var out []string
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p != "time" {
			continue
		}
		local = "time"
		if imp.Name != nil {
			local = imp.Name.Name
		}
		if local == "." {
			out = append(out, fmt.Sprintf("%s: imports time with a dot", fset.Position(imp.Pos())))
			return out
		}
	}
	if local == "" || local == "_" {
		return nil
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == local {
			switch sel.Sel.Name {
			case "Now", "Since", "Until":
				out = append(out, fmt.Sprintf("%s: time.%s", fset.Position(sel.Pos()), sel.Sel.Name))
			}
		}
		return true
	})
	return out
}

func TestWallClockReads(t *testing.T) {
	for name, row := range map[string]struct {
		src  string
		want []string
	}{
		"a call": {"package p\nimport \"time\"\nfunc f() { _ = time.Now() }\n",
			[]string{"p.go:3:16: time.Now"}},
		"each of the three": {"package p\nimport \"time\"\nvar t time.Time\nvar a, b, c = time.Now(), time.Since(t), time.Until(t)\n",
			[]string{"p.go:4:15: time.Now", "p.go:4:27: time.Since", "p.go:4:42: time.Until"}},
		"a function value": {"package p\nimport \"time\"\nvar now = time.Now\n",
			[]string{"p.go:3:11: time.Now"}},
		"a renamed import": {"package p\nimport stdtime \"time\"\nvar now = stdtime.Now()\n",
			[]string{"p.go:3:11: time.Now"}},
		"a dot import": {"package p\nimport . \"time\"\nvar now = Now()\n",
			[]string{"p.go:2:8: imports time with a dot"}},
		"the rest of time": {"package p\nimport \"time\"\nvar d = time.Second\nvar t = time.Unix(0, 0)\nvar u = t.Add(d)\n",
			nil},
		"a Clock's Now": {"package p\nimport \"time\"\ntype c interface{ Now() time.Time }\nfunc f(clk c) time.Time { return clk.Now() }\n",
			nil},
		"another package's Now": {"package p\nimport \"example.com/clock\"\nvar now = clock.System.Now()\n",
			nil},
		"a local named time": {"package p\nfunc f() { time := struct{ Now int }{}; _ = time.Now }\n",
			nil},
	} {
		if got := wallClockReads(t, "p.go", []byte(row.src)); !slices.Equal(got, row.want) {
			t.Errorf("%s: %q, want %q", name, got, row.want)
		}
	}
}
