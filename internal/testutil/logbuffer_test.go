package testutil

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Writers and readers at once (run with -race): every line arrives whole.
func TestLogBufferConcurrent(t *testing.T) {
	var b LogBuffer // the zero value is ready
	if b.String() != "" {
		t.Fatalf("zero LogBuffer holds %q", b.String())
	}
	const writers, lines = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				fmt.Fprintf(&b, "writer %d line %d\n", w, i)
			}
		})
	}
	wg.Go(func() {
		for range lines {
			_ = b.String()
		}
	})
	wg.Wait()
	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines, want %d", len(got), writers*lines)
	}
	for _, l := range got {
		if !strings.HasPrefix(l, "writer ") || !strings.Contains(l, " line ") {
			t.Fatalf("torn line %q", l)
		}
	}
}
