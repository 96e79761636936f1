package gossip

import (
	"time"

	"github.com/fenec/fenec-entry/gossip/internal/validate"
)

// Validator checks homes and marks received from peers before they reach the table (package
// validate); node checks a restored state file's homes with it too.
type Validator = validate.Validator

// NewValidator knows a fixed set of configured regions; now is the clock (nil: time.Now).
func NewValidator(regions []string, now func() time.Time) *Validator {
	return validate.New(regions, now)
}
