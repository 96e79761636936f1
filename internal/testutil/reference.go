package testutil

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// ReferenceFile is the users' reference, from the module's root: every flag, error code,
// refusal, metric and /status.json field the code defines is written in it, each in
// backquotes. Package tests hold the code to it with ReferenceMissing, so that nothing is
// added to the code without its line in the reference.
const ReferenceFile = "docs/REFERENCE.md"

// ModuleRoot returns the directory of go.mod, found upward from the working directory (a
// package test runs in its package's directory).
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			tb.Fatal("no go.mod above the working directory")
		}
		dir = up
	}
}

// ReferenceMissing returns the words the reference does not write in backquotes (`word`),
// in the order given.
func ReferenceMissing(tb testing.TB, words []string) []string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(ModuleRoot(tb), ReferenceFile))
	if err != nil {
		tb.Fatalf("the reference: %v", err)
	}
	doc := string(b)
	var missing []string
	for _, w := range words {
		if !strings.Contains(doc, "`"+w+"`") {
			missing = append(missing, w)
		}
	}
	return missing
}

// StringLiterals returns every Go string literal matching re in the module's product Go files
// (ProductFiles), each once: the names the code defines, such as its metrics, wherever they
// are registered.
func StringLiterals(tb testing.TB, re *regexp.Regexp) []string {
	tb.Helper()
	quoted := regexp.MustCompile(`"(` + re.String() + `)"`)
	seen := map[string]bool{}
	var out []string
	for _, path := range ProductFiles(tb) {
		src, err := os.ReadFile(path)
		if err != nil {
			tb.Fatal(err)
		}
		for _, m := range quoted.FindAllStringSubmatch(string(src), -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				out = append(out, m[1])
			}
		}
	}
	return out
}
