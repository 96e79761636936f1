package testutil

import (
	"strings"
	"testing"
)

func TestTableRow(t *testing.T) {
	page := "<table><tr><td>a</td><td>up</td></tr>\n<tr>\n<td>b</td><td>failing</td></tr></table>"
	if row := TableRow(t, page, ">b<"); !strings.Contains(row, "failing") || strings.Contains(row, ">a<") {
		t.Errorf("TableRow(b) = %q", row)
	}
	f := &fakeTB{}
	done := make(chan struct{})
	go func() { // fakeTB.Fatalf ends the goroutine, as testing.T's does
		defer close(done)
		TableRow(f, page, ">c<")
	}()
	<-done
	if !strings.Contains(f.fatal, `no table row contains ">c<"`) {
		t.Errorf("TableRow of a missing needle failed with %q", f.fatal)
	}
}
