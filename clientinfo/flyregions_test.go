package clientinfo

import (
	"strings"
	"testing"
)

func TestFlyRegionsTable(t *testing.T) {
	for code, cont := range flyRegions {
		if len(code) != 3 || strings.ToLower(code) != code {
			t.Errorf("fly region %q: want three lower-case letters", code)
		}
		if cont == "AN" || canonicalContinent(cont) != cont {
			t.Errorf("fly region %q: continent %q", code, cont)
		}
	}
}
