package testutil

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestTestOnly(t *testing.T) {
	for name, row := range map[string]struct {
		src  string
		want bool
	}{
		"no constraint":         {"package p\n", false},
		"an OS":                 {"//go:build linux\n\npackage p\n", false},
		"not an OS":             {"//go:build !linux && !windows\n\npackage p\n", false},
		"a test-only tag":       {"//go:build chaos\n\npackage p\n", true},
		"test-only and an OS":   {"//go:build linux && memnet100\n\npackage p\n", true},
		"test-only or an OS":    {"//go:build gossip100 || linux\n\npackage p\n", false},
		"not test-only":         {"//go:build !chaos\n\npackage p\n", false},
		"a build option":        {"//go:build pprof\n\npackage p\n", false},
		"after a comment":       {"// Copyright.\n\n//go:build chaos\n\npackage p\n", true},
		"after the package":     {"package p\n\n//go:build chaos\n", false},
		"a line that is broken": {"//go:build chaos &&\n\npackage p\n", false},
	} {
		if got := TestOnly([]byte(row.src)); got != row.want {
			t.Errorf("%s: TestOnly(%q) = %v, want %v", name, row.src, got, row.want)
		}
	}
}

// Every kind of file ProductFiles leaves out, in a module of its own.
func TestProductFilesLeavesOut(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"go.mod":                   "module m\n",
		"a.go":                     "package m\n",
		"a_test.go":                "package m\n",
		"p/linux.go":               "//go:build linux\n\npackage p\n",
		"p/chaos.go":               "//go:build chaos\n\npackage p\n",
		"p/testdata/x.go":          "package x\n",
		"bench/b.go":               "package b\n",
		".git/hooks/h.go":          "package h\n",
		"cmd/m/main.go":            "package main\n",
		"cmd/m/README.md":          "not go\n",
		"internal/bench/inside.go": "package bench\n", // any bench/ directory: benchmark code
		"internal/testutil/t.go":   "package testutil\n",
		"internal/testutils/u.go":  "package testutils\n",
	}
	for name, src := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := productFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range got {
		r, _ := filepath.Rel(root, p)
		got[i] = filepath.ToSlash(r)
	}
	slices.Sort(got)
	if want := []string{"a.go", "cmd/m/main.go", "internal/testutils/u.go", "p/linux.go"}; !slices.Equal(got, want) {
		t.Errorf("productFiles = %q, want %q", got, want)
	}
}

func TestProductFiles(t *testing.T) {
	root := ModuleRoot(t)
	var rel []string
	for _, p := range ProductFiles(t) {
		r, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		rel = append(rel, filepath.ToSlash(r))
	}
	for _, want := range []string{"internal/clock/clock.go", "cmd/fenec-entry/pprof.go"} {
		if !slices.Contains(rel, want) {
			t.Errorf("ProductFiles lacks %s", want)
		}
	}
	for _, r := range rel {
		if strings.HasSuffix(r, "_test.go") || strings.HasPrefix(r, "bench/") || strings.Contains(r, "testdata/") || strings.HasPrefix(r, "internal/testutil/") {
			t.Errorf("ProductFiles has %s", r)
		}
	}
}
