package validate

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/clock"
)

// Limits on what a peer may send. Anything outside them is counted and
// dropped, never applied.
const (
	maxTenantLen = 255         // as the request path allows
	MaxNodeName  = 128         // a node name: a sender, an origin, an observer
	maxFuture    = time.Minute // a version this far ahead of our clock is refused
)

var errInvalid = errors.New("invalid")

// Validator checks homes and marks received from peers (events, snapshots,
// repair) before they reach the table. The zero value is not usable; build
// it with New or NewTable. Safe for concurrent use (read-only after New).
type Validator struct {
	known func(region string) bool
	now   func() time.Time
}

// New knows a fixed set of configured regions; now is the clock (nil: time.Now).
func New(regions []string, now func() time.Time) *Validator {
	set := make(map[string]bool, len(regions))
	for _, r := range regions {
		set[r] = true
	}
	return newValidator(func(r string) bool { return set[r] }, now)
}

// NewTable knows the regions t configures at each moment, so that a region a reload adds or
// removes is taken or refused from then on.
func NewTable(t *homes.Table, now func() time.Time) *Validator {
	return newValidator(func(r string) bool { _, ok := t.RegionID(r); return ok }, now)
}

func newValidator(known func(string) bool, now func() time.Time) *Validator {
	if now == nil {
		now = clock.System.Now
	}
	return &Validator{known: known, now: now}
}

// Home returns nil if h may be applied: a sane tenant name, a configured
// region, an origin, and a version not absurdly in the future.
func (v *Validator) Home(h homes.Home) error {
	if err := validTenant(h.Tenant); err != nil {
		return err
	}
	if !v.known(h.Region) {
		return fmt.Errorf("%w: home of %q in unknown region %q", errInvalid, h.Tenant, h.Region)
	}
	return v.version(h.Version)
}

// Mark returns nil if m may be applied: a configured region, an observer, a time, a version
// not absurdly in the future.
func (v *Validator) Mark(m homes.Mark) error {
	if !v.known(m.Region) {
		return fmt.Errorf("%w: mark of unknown region %q", errInvalid, m.Region)
	}
	if m.Observer == "" || len(m.Observer) > MaxNodeName {
		return fmt.Errorf("%w: mark observer", errInvalid)
	}
	if m.At.IsZero() || m.At.After(v.now().Add(maxFuture)) {
		return fmt.Errorf("%w: mark time %v", errInvalid, m.At)
	}
	return v.version(m.Version)
}

func (v *Validator) version(ver homes.Version) error {
	if ver.HLC == 0 || ver.Origin == "" || len(ver.Origin) > MaxNodeName {
		return fmt.Errorf("%w: version %v", errInvalid, ver)
	}
	if ver.Time().After(v.now().Add(maxFuture)) {
		return fmt.Errorf("%w: version %v is more than %v ahead", errInvalid, ver, maxFuture)
	}
	return nil
}

func validTenant(t string) error {
	if t == "" || len(t) > maxTenantLen || !utf8.ValidString(t) {
		return fmt.Errorf("%w: tenant name", errInvalid)
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; c < 0x20 || c == 0x7f || c == '/' {
			return fmt.Errorf("%w: tenant name has a control character or slash", errInvalid)
		}
	}
	return nil
}
