package door

import (
	"testing"

	"github.com/fenec/fenec-entry/internal/testutil"
)

// TestReferenceHasEveryRefusal: every reason the door refuses for (its label, the metric's
// reason) and every code it answers with is written in docs/REFERENCE.md.
func TestReferenceHasEveryRefusal(t *testing.T) {
	var words []string
	for _, r := range Reasons() {
		words = append(words, r.Label(), r.Code())
	}
	if missing := testutil.ReferenceMissing(t, words); len(missing) > 0 {
		t.Errorf("%s does not write these refusal labels or codes (in backquotes): %q", testutil.ReferenceFile, missing)
	}
}
