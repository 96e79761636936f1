//go:build !linux

package wan

import (
	"context"
	"net/netip"
	"os/exec"
)

// Emulator is a running WAN; off Linux there is none (Start returns ErrUnsupported).
type Emulator struct{}

// Start returns ErrUnsupported off Linux.
func Start(ctx context.Context, cfg Config) (*Emulator, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return nil, ErrUnsupported
}

// Sites returns nil off Linux.
func (e *Emulator) Sites() []string { return nil }

// Addr returns the invalid address off Linux.
func (e *Emulator) Addr(site string) netip.Addr { return netip.Addr{} }

// Namespace returns "" off Linux.
func (e *Emulator) Namespace(site string) string { return "" }

// Link returns the zero link off Linux.
func (e *Emulator) Link(from, to string) Link { return Link{} }

// Command returns a command that fails off Linux.
func (e *Emulator) Command(ctx context.Context, site, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", "netns", "exec", "", name)
}

// SetLoss returns ErrUnsupported off Linux.
func (e *Emulator) SetLoss(from, to string, loss float64) error { return ErrUnsupported }

// Do returns ErrUnsupported off Linux.
func (e *Emulator) Do(site string, f func() error) error { return ErrUnsupported }

// Stats returns nothing off Linux.
func (e *Emulator) Stats() Stats { return Stats{} }

// Close does nothing off Linux.
func (e *Emulator) Close() error { return nil }

// RemoveStale does nothing off Linux.
func RemoveStale() ([]string, error) { return nil, nil }

// Missing says what this host lacks to run an emulator: Linux.
func Missing() string { return "Linux (network namespaces and TUN)" }
