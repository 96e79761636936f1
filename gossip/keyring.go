package gossip

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"sync"

	"github.com/hashicorp/memberlist"
)

// Keys are the gossip keys everything entries exchange follows (CONTRACT.md section 10):
// memberlist's keyring, the one serf's key manager changes when an operator runs
// `serf keys -install/-use/-remove` through any entry's RPC. Every serf incarnation of a
// Gossip shares it, so a restarted serf keeps the keys a rotation installed. What this entry
// sends is sealed or proven with the primary key; what it receives is accepted under any
// installed key. The zero Keys (a nil ring) is insecure gossip: nothing is sealed.
type Keys struct{ ring *memberlist.Keyring }

// NewKeys returns Keys holding key as the only and primary key; nil key: insecure.
func NewKeys(key []byte) (Keys, error) {
	if len(key) == 0 {
		return Keys{}, nil
	}
	r, err := memberlist.NewKeyring(nil, key)
	if err != nil {
		return Keys{}, fmt.Errorf("gossip: keyring: %w", err)
	}
	return Keys{ring: r}, nil
}

// Secure reports whether there is a key.
func (k Keys) Secure() bool { return k.ring != nil }

// Primary is the key to send with; nil when insecure.
func (k Keys) Primary() []byte {
	if k.ring == nil {
		return nil
	}
	return k.ring.GetPrimaryKey()
}

// All are the installed keys, the primary first; nil when insecure.
func (k Keys) All() [][]byte {
	if k.ring == nil {
		return nil
	}
	return k.ring.GetKeys()
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
