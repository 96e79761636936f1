package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// TestDocLinks: every relative link of every Markdown file in the repository names a file of
// the repository (none points outside it: a clone is all a reader has) and, with a #fragment,
// a heading of that file, as GitHub makes anchors of headings.
func TestDocLinks(t *testing.T) {
	root := testutil.ModuleRoot(t)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		b, _ := os.ReadFile(path)
		fence := false
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "```") {
				fence = !fence
			}
			if !fence && strings.HasPrefix(l, "#") {
				// A heading whose anchor is taken gets -1, -2, ... as on GitHub.
				s := slug(strings.TrimLeft(l, "# "))
				for n, try := 1, s; ; n++ {
					if !a[try] {
						a[try] = true
						break
					}
					try = fmt.Sprintf("%s-%d", s, n)
				}
			}
		}
		anchors[path] = a
		return a
	}
	checked := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), file)
			}
			checked++
			if r, err := filepath.Rel(root, dest); err != nil || strings.HasPrefix(r, "..") {
				t.Errorf("%s: %s points outside the repository", rel, target)
				continue
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s: %s: no such file", rel, target)
				continue
			}
			if frag != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[frag] {
				t.Errorf("%s: %s: no heading makes the anchor #%s", rel, target, frag)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("checked only %d links: the scan is broken", checked)
	}
}

// slug is GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces
// made -.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestNoPointerOutside: no file of the repository sends its reader to the project's private
// spec (the files beside the repository, which a clone does not have). What they say is in
// docs/, in the project's own words.
func TestNoPointerOutside(t *testing.T) {
	root := testutil.ModuleRoot(t)
	outside := []string{"../" + "shared", "CONTRACT" + ".md", "DESIGN" + ".md", "GOSSIP-NOTES" + ".md", "STYLE" + ".md"}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "bin": // bin: make build's binaries, not sources
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".sh", ".toml", ".yml", ".yaml", ".service", ".example", ".txt", "":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for i, l := range strings.Split(string(b), "\n") {
			for _, o := range outside {
				if strings.Contains(l, o) {
					t.Errorf("%s:%d points outside the repository (%s): %s", rel, i+1, o, strings.TrimSpace(l))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
