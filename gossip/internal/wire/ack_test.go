package wire_test

import (
	"bytes"
	"testing"

	"github.com/fenec/fenec-entry/gossip/internal/wire"
)

func TestAckCodec(t *testing.T) {
	ns := []wire.Nonce{{1}, {2, 3}}
	from, got, ok := wire.DecodeAck(wire.EncodeAck("entry-a", ns))
	if !ok || from != "entry-a" || len(got) != 2 || got[0] != ns[0] || got[1] != ns[1] {
		t.Fatalf("round trip: %q %v %v", from, got, ok)
	}
	for _, bad := range [][]byte{
		nil, {}, {0}, {5, 'a'}, // empty name, short name
		append([]byte{1, 'a'}, make([]byte, 11)...), // a partial nonce
		{1, 'a'}, // no nonce
		append([]byte{1, 'a'}, make([]byte, wire.NonceSize*(wire.MaxAckNonces+1))...), // too many
	} {
		if _, _, ok := wire.DecodeAck(bad); ok {
			t.Errorf("wire.DecodeAck(%x) accepted", bad)
		}
	}
}

// An ack's payload comes from a peer holding the key; still, no input panics or is taken
// half-read.
func FuzzDecodeAck(f *testing.F) {
	f.Add(wire.EncodeAck("entry-a", []wire.Nonce{{1}}))
	f.Add([]byte{0})
	f.Add([]byte{255, 1, 2})
	f.Fuzz(func(t *testing.T, p []byte) {
		from, ns, ok := wire.DecodeAck(p)
		if !ok {
			return
		}
		if !bytes.Equal(wire.EncodeAck(from, ns), p) {
			t.Errorf("wire.DecodeAck(%x) = %q %v, which encodes back differently", p, from, ns)
		}
	})
}
