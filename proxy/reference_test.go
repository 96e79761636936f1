package proxy

import (
	"testing"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// TestReferenceHasEveryErrorAndOutcome: every error code the entry answers with, every
// outcome of an attempt (fenec_entry_attempts_total's class, /status.json's last_outcome) and
// every outcome of a request (fenec_entry_requests_total's) is written in docs/REFERENCE.md.
func TestReferenceHasEveryErrorAndOutcome(t *testing.T) {
	var words []string
	for _, e := range entryErrors {
		words = append(words, e.code)
	}
	words = append(words, outcomeNames[:]...)
	words = append(words, resultNames...)
	if missing := testutil.ReferenceMissing(t, words); len(missing) > 0 {
		t.Errorf("%s does not write these codes or outcomes (in backquotes): %q", testutil.ReferenceFile, missing)
	}
}
