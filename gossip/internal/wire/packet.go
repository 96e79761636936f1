package wire

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"

	"github.com/fenec/fenec-entry/gossip/internal/keyring"
)

// A direct packet shares memberlist's UDP port: the transport under memberlist takes the
// packets that begin with Magic (no memberlist packet does: memberlist's own begin with a
// message type below 16, an encryption version 0 or 1, or the label header 244) and hands
// the rest to memberlist. The body is an event payload (event.go), sealed with the gossip
// key:
//
//	byte 0        Magic
//	byte 1        KindSealed: 12 B nonce, then AES-GCM(key) of the payload, with
//	              directAAD + cluster label as additional data (so another cluster's key or
//	              label fails to open it)
//	              kindPlain (--insecure-gossip): 1 B label length, label, payload
const (
	Magic      byte = 0xFB
	kindPlain  byte = 0
	KindSealed byte = 1
	// Relays, keyed clusters only, acked (package spread): a payload sealed as
	// KindRelay is applied and its homes passed on to the receiver's group; one sealed as
	// KindAcked is applied; both are acked with a KindAck packet.
	KindRelay byte = 2
	KindAcked byte = 3
	KindAck   byte = 4

	NonceSize = 12
	tagSize   = 16
	// Overhead is what a sealed direct packet adds to its payload.
	Overhead = 2 + NonceSize + tagSize
)

const directAAD = "fenec-entry direct homes\x00"

var errDirect = errors.New("bad direct packet")

// Codec seals and opens direct packets: sealed with the keyring's primary key, opened
// under any installed key (a rotation in progress). Safe for concurrent use.
type Codec struct {
	keys  keyring.Keys // zero: insecure
	label string
	aad   []byte
	gcm   aeads
}

// NewCodec seals with keys, for the cluster label.
func NewCodec(keys keyring.Keys, label string) *Codec {
	return &Codec{keys: keys, label: label, aad: []byte(directAAD + label)}
}

// Seal returns the packet carrying payload, a fresh slice.
func (c *Codec) Seal(payload []byte) ([]byte, error) { return c.SealAs(KindSealed, payload) }

// SealAs is Seal with the packet's kind: KindSealed, or with a key one of the relays' kinds
// (without one every packet is kindPlain).
func (c *Codec) SealAs(kind byte, payload []byte) ([]byte, error) {
	if !c.keys.Secure() {
		out := make([]byte, 0, 3+len(c.label)+len(payload))
		out = append(out, Magic, kindPlain, byte(len(c.label)))
		out = append(out, c.label...)
		return append(out, payload...), nil
	}
	aead, err := c.gcm.get(c.keys.Primary())
	if err != nil {
		return nil, fmt.Errorf("gossip: direct: %w", err)
	}
	out := make([]byte, 2+NonceSize, Overhead+len(payload))
	out[0], out[1] = Magic, kind
	if _, err := rand.Read(out[2 : 2+NonceSize]); err != nil {
		return nil, fmt.Errorf("gossip: direct: nonce: %w", err)
	}
	return aead.Seal(out, out[2:2+NonceSize], payload, c.aadFor(kind)), nil
}

// aadFor is the additional data of a kind: the kind is sealed too, so that a packet cannot be
// turned into a relay's on the way (KindSealed's stays as it was, for peers of
// earlier releases).
func (c *Codec) aadFor(kind byte) []byte {
	if kind == KindSealed {
		return c.aad
	}
	return append(append([]byte(nil), c.aad...), kind)
}

// Open returns the payload of a packet from Seal; errors wrap errDirect. An insecure entry
// refuses sealed packets and a keyed one plain packets.
func (c *Codec) Open(pkt []byte) ([]byte, error) {
	p, _, err := c.OpenKind(pkt)
	return p, err
}

// OpenKind is Open, and the packet's kind (kindPlain's payload comes back as KindSealed's:
// it is applied the same way).
func (c *Codec) OpenKind(pkt []byte) ([]byte, byte, error) {
	p, err := c.openAny(pkt)
	if err != nil {
		return nil, 0, err
	}
	kind := pkt[1]
	if kind == kindPlain {
		kind = KindSealed
	}
	return p, kind, nil
}

func (c *Codec) openAny(pkt []byte) ([]byte, error) {
	if len(pkt) < 2 || pkt[0] != Magic {
		return nil, fmt.Errorf("%w: header", errDirect)
	}
	switch pkt[1] {
	case kindPlain:
		if c.keys.Secure() {
			return nil, fmt.Errorf("%w: not sealed", errDirect)
		}
		if len(pkt) < 3 || len(pkt) < 3+int(pkt[2]) || string(pkt[3:3+int(pkt[2])]) != c.label {
			return nil, fmt.Errorf("%w: label", errDirect)
		}
		return pkt[3+int(pkt[2]):], nil
	case KindSealed, KindRelay, KindAcked, KindAck:
		if !c.keys.Secure() {
			return nil, fmt.Errorf("%w: sealed, and no key", errDirect)
		}
		if len(pkt) < Overhead {
			return nil, fmt.Errorf("%w: short", errDirect)
		}
		for _, k := range c.keys.All() {
			aead, err := c.gcm.get(k)
			if err != nil {
				continue
			}
			if p, err := aead.Open(nil, pkt[2:2+NonceSize], pkt[2+NonceSize:], c.aadFor(pkt[1])); err == nil {
				return p, nil
			}
		}
		return nil, fmt.Errorf("%w: no installed key opens it", errDirect)
	default:
		return nil, fmt.Errorf("%w: kind %d", errDirect, pkt[1])
	}
}

// aeads caches one AES-GCM per key, so that a packet costs no key schedule. Safe for
// concurrent use; a key removed from the ring is dropped at the next miss past the bound.
type aeads struct {
	mu sync.Mutex // guards m
	m  map[string]cipher.AEAD
}

// maxCachedKeys bounds aeads: serf's keyring holds a handful of keys during a rotation.
const maxCachedKeys = 16

func (c *aeads) get(key []byte) (cipher.AEAD, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.m[string(key)]; ok {
		return a, nil
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		return nil, err
	}
	if c.m == nil || len(c.m) >= maxCachedKeys {
		c.m = make(map[string]cipher.AEAD)
	}
	c.m[string(key)] = a
	return a, nil
}
