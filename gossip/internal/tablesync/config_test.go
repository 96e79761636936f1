package tablesync

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
		"RepairInterval": func(c *Config) { c.RepairInterval = 0 },
		"Timeout":        func(c *Config) { c.Timeout = -1 },
		"RepairSettle":   func(c *Config) { c.RepairSettle = 0 },
		"MaxStreams":     func(c *Config) { c.MaxStreams = 0 },
	} {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), field+":") {
			t.Errorf("%s out of range: %v, want an error naming it first", field, err)
		}
	}
}
