package proxy

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fenec/fenec-entry/homes"
)

// Config.validate refuses every negative size and duration with an error naming the field:
// 0 means the default, and a negative value means nothing (a negative IdleTimeout silently
// turned off connection reuse).
func TestConfigRefusesNegatives(t *testing.T) {
	table, err := homes.New(homes.Config{Regions: []string{"eu"}, Origin: "test"})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://127.0.0.1:1")
	tests := map[string]struct {
		edit func(*Config)
		want string // in the error; "" for none
	}{
		"zero values take the defaults": {func(*Config) {}, ""},
		"MaxInflight":                   {func(c *Config) { c.MaxInflight = -1 }, "MaxInflight: -1 is negative (0 means 10000)"},
		"BodyBuffer":                    {func(c *Config) { c.BodyBuffer = -1 }, "BodyBuffer: -1 is negative"},
		"MaxBufferedBytes":              {func(c *Config) { c.MaxBufferedBytes = -1 }, "MaxBufferedBytes: -1 is negative"},
		"MaxIdlePerRouter":              {func(c *Config) { c.MaxIdlePerRouter = -1 }, "MaxIdlePerRouter: -1 is negative (0 means 128)"},
		"AnswerTimeout":                 {func(c *Config) { c.AnswerTimeout = -time.Second }, "AnswerTimeout: -1s is negative (0 means 35s)"},
		"DialTimeout":                   {func(c *Config) { c.DialTimeout = -time.Nanosecond }, "DialTimeout: -1ns is negative"},
		"IdleTimeout":                   {func(c *Config) { c.IdleTimeout = -time.Minute }, "IdleTimeout: -1m0s is negative (0 means 1m0s)"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := Config{Regions: []Region{{Name: "eu", Routers: []*url.URL{u}}}, Homes: table}
			tt.edit(&c)
			h, err := New(c)
			if h != nil {
				h.Close()
			}
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("New = %v, want no error", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("New = %v, want an error with %q", err, tt.want)
			}
		})
	}
}
