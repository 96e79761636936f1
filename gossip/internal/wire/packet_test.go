package wire_test

import (
	"bytes"
	"testing"

	"github.com/fenec/fenec-entry/gossip/internal/gossiptest"
	"github.com/fenec/fenec-entry/gossip/internal/wire"
)

func TestDirectCodec(t *testing.T) {
	payload := []byte("\x01\x01a-some-payload")
	keyed := wire.NewCodec(gossiptest.Keys(gossiptest.ClusterKey), "lbl")
	other := wire.NewCodec(gossiptest.Keys(gossiptest.StrangerKey), "lbl")
	otherLabel := wire.NewCodec(gossiptest.Keys(gossiptest.ClusterKey), "other")
	plain := wire.NewCodec(gossiptest.Keys(nil), "lbl")
	plainOtherLabel := wire.NewCodec(gossiptest.Keys(nil), "other")

	pkt, err := keyed.Seal(payload)
	if err != nil {
		t.Fatal(err)
	}
	if pkt[0] != wire.Magic || len(pkt) != len(payload)+wire.Overhead {
		t.Fatalf("sealed packet: % x", pkt[:2])
	}
	if bytes.Contains(pkt, payload[2:]) {
		t.Fatal("sealed packet carries the payload in clear")
	}
	if got, err := keyed.Open(pkt); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("open: %q, %v", got, err)
	}
	pkt2, _ := keyed.Seal(payload)
	if bytes.Equal(pkt, pkt2) {
		t.Fatal("two seals of one payload are equal: nonce reused")
	}
	tampered := append([]byte(nil), pkt...)
	tampered[len(tampered)-20] ^= 1
	ppkt, _ := plain.Seal(payload)
	if got, err := plain.Open(ppkt); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("plain open: %q, %v", got, err)
	}
	for name, c := range map[string]struct {
		codec *wire.Codec
		pkt   []byte
	}{
		"other key": {other, pkt}, "other label": {otherLabel, pkt}, "tampered": {keyed, tampered},
		"plain to keyed": {keyed, ppkt}, "sealed to plain": {plain, pkt},
		"plain, other label": {plainOtherLabel, ppkt}, "empty": {keyed, nil},
		"short": {keyed, pkt[:wire.Overhead-1]}, "bad kind": {keyed, []byte{wire.Magic, 7, 0}},
		"not direct": {keyed, []byte{0, 1, 2}}, "plain short": {plain, []byte{wire.Magic, wire.KindPlain, 9, 'l'}},
	} {
		if _, err := c.codec.Open(c.pkt); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}

// A relay's kind is sealed: a relay packet changed into a plain direct one (or back) opens
// under no key.
func TestRelayKindIsSealed(t *testing.T) {
	c := wire.NewCodec(gossiptest.Keys(gossiptest.ClusterKey), "lbl")
	pkt, err := c.SealAs(wire.KindRelay, []byte("\x01\x01apayload"))
	if err != nil {
		t.Fatal(err)
	}
	if _, kind, err := c.OpenKind(pkt); err != nil || kind != wire.KindRelay {
		t.Fatalf("open: kind %d, %v", kind, err)
	}
	pkt[1] = wire.KindSealed
	if _, _, err := c.OpenKind(pkt); err == nil {
		t.Error("a relay packet opened as a plain direct one")
	}
}
