package stablehash

import "testing"

// The hash is the same in every release: these values were computed by the release that
// first shipped it (as repair's and the relays' private copy), and any change here splits a
// fleet's digests and relay groups between releases.
func TestHashIsStable(t *testing.T) {
	for _, row := range []struct {
		name      string
		got, want uint64
	}{
		{`String(Offset, "acme")`, String(Offset, "acme"), 0xbbad6543cdaa0c9b},
		{"Uint64(Offset, 42)", Uint64(Offset, 42), 0xff3add6b3789daef},
		{"Mix(1)", Mix(1), 0xb456bcfc34c2cb2c},
		{`Of("entry-001")`, Of("entry-001"), 0x8c523499e0fc2140},
	} {
		if row.got != row.want {
			t.Errorf("%s = %#x, want %#x", row.name, row.got, row.want)
		}
	}
}
