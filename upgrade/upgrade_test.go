package upgrade

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// The counts a process passes on are read back as written; a file that holds anything else
// is an error, not zeros.
func TestCountsPassedOn(t *testing.T) {
	f, err := passedFile("the counts", func(w io.Writer) error { _, err := fmt.Fprintf(w, "%d %d\n", 3, 2); return err })
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := readCounts(f)
	if err != nil || c != (counts{ready: 3, failed: 2}) {
		t.Fatalf("read back %+v, %v; want ready 3, failed 2", c, err)
	}
	for _, bad := range []string{"", "3\n", "x y\n", "-1 0\n"} {
		f, err := passedFile("the counts", func(w io.Writer) error { _, err := io.WriteString(w, bad); return err })
		if err != nil {
			t.Fatal(err)
		}
		if c, err := readCounts(f); err == nil {
			t.Errorf("%q read as %+v", bad, c)
		}
		f.Close()
	}
}

// The PID file holds the PID and a newline, and is replaced whole.
func TestWritePIDFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "entry.pid")
	for _, pid := range []int{4242, 77} {
		if err := writePIDFile(path, pid); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%d\n", pid); string(b) != want {
			t.Errorf("PID file %q, want %q", b, want)
		}
	}
	if left, _ := filepath.Glob(path + ".*"); len(left) != 0 {
		t.Errorf("files left beside it: %v", left)
	}
}
