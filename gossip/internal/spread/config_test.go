package spread

import (
	"strings"
	"testing"
)

// DefaultConfig passes Validate, and Validate names the field it refuses.
func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	for field, mod := range map[string]func(*Config){
		"FlushInterval":      func(c *Config) { c.FlushInterval = 0 },
		"MaxFlushInterval":   func(c *Config) { c.MaxFlushInterval = c.FlushInterval / 2 },
		"EventSizeLimit":     func(c *Config) { c.EventSizeLimit = 100 },
		"MaxPending":         func(c *Config) { c.MaxPending = 0 },
		"MaxEventsPerFlush":  func(c *Config) { c.MaxEventsPerFlush = -1 },
		"QueueLow":           func(c *Config) { c.QueueLow = c.QueueHigh },
		"RecvQueue":          func(c *Config) { c.RecvQueue = 0 },
		"DirectCopies":       func(c *Config) { c.DirectCopies = 0 },
		"DirectCopyInterval": func(c *Config) { c.DirectCopyInterval = -1 },
		"DirectBudget":       func(c *Config) { c.DirectBudget = 0 },
		"RelayFlush":         func(c *Config) { c.RelayFlush = 0 },
		"RelayAckTimeout":    func(c *Config) { c.RelayAckTimeout = 0 },
	} {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), field+":") {
			t.Errorf("%s out of range: %v, want an error naming it first", field, err)
		}
	}
	c := DefaultConfig()
	c.DirectLimit = -1 // relays never
	if err := c.Validate(); err != nil {
		t.Errorf("DirectLimit -1: %v", err)
	}
}
