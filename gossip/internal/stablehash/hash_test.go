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

// Jump's buckets are the same in every release (0xdeadbeef in 128 is 87 in the paper's
// reference implementation too), and growing the buckets by one moves only keys to the new
// bucket, about 1/buckets of them.
func TestJump(t *testing.T) {
	for _, row := range []struct {
		key          uint64
		buckets, got int
	}{
		{0, 1, 0}, {1, 10, 6}, {Of("entry-001"), 32, 8}, {0xdeadbeef, 1000, 285}, {0xdeadbeef, 128, 87},
	} {
		if b := Jump(row.key, row.buckets); b != row.got {
			t.Errorf("Jump(%#x, %d) = %d, want %d", row.key, row.buckets, b, row.got)
		}
	}
	const keys = 100000
	for _, n := range []int{1, 7, 31, 100} {
		moved := 0
		for k := range keys {
			key := Mix(uint64(k))
			before, after := Jump(key, n), Jump(key, n+1)
			if before < 0 || before >= n || after < 0 || after > n {
				t.Fatalf("Jump(%#x) = %d of %d, %d of %d", key, before, n, after, n+1)
			}
			if before != after {
				if after != n {
					t.Fatalf("key %#x moved from %d to %d, not to the new bucket %d", key, before, after, n)
				}
				moved++
			}
		}
		want := keys / (n + 1)
		if moved < want*85/100 || moved > want*115/100 {
			t.Errorf("%d to %d buckets moved %d of %d keys, want about %d", n, n+1, moved, keys, want)
		}
	}
}
