package gossip

import (
	"strconv"
	"testing"
)

// TestDefaultConfig pins that DefaultConfig holds every default, and that the address and port
// defaults agree.
func TestDefaultConfig(t *testing.T) {
	d := DefaultConfig()
	if d.ProbeInterval != DefaultProbeInterval || d.FlushInterval != DefaultFlushInterval ||
		d.DirectCopies != DefaultDirectCopies || d.UDPBufferSize != DefaultUDPBufferSize || d.Label != DefaultLabel {
		t.Errorf("DefaultConfig() = %+v: a default is missing", d)
	}
	if DefaultBindAddr != ":"+strconv.Itoa(DefaultBindPort) || d.BindAddr != DefaultBindAddr {
		t.Errorf("DefaultBindAddr %q, DefaultBindPort %d, DefaultConfig().BindAddr %q", DefaultBindAddr, DefaultBindPort, d.BindAddr)
	}
}
