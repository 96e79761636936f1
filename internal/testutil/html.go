package testutil

import (
	"regexp"
	"strings"
	"testing"
)

var tableRow = regexp.MustCompile(`(?s)<tr>.*?</tr>`)

// TableRow returns the first table row (<tr>...</tr>) of page that contains needle, and
// fails the test when none does.
func TableRow(tb testing.TB, page, needle string) string {
	tb.Helper()
	for _, row := range tableRow.FindAllString(page, -1) {
		if strings.Contains(row, needle) {
			return row
		}
	}
	tb.Fatalf("no table row contains %q", needle)
	return ""
}
