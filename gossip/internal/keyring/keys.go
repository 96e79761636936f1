package keyring

import (
	"fmt"

	"github.com/hashicorp/memberlist"
)

// Keys are the gossip keys everything entries exchange follows (docs/REFERENCE.md, "Cluster and
// operations"): memberlist's keyring, the one serf's key manager changes when an operator runs
// `serf keys -install/-use/-remove` through any entry's RPC. Every serf incarnation of a
// Gossip shares it, so a restarted serf keeps the keys a rotation installed. What this entry
// sends is sealed or proven with the primary key; what it receives is accepted under any
// installed key. The zero Keys (a nil ring) is insecure gossip: nothing is sealed.
type Keys struct{ ring *memberlist.Keyring }

// New returns Keys holding key as the only and primary key; nil key: insecure.
func New(key []byte) (Keys, error) {
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

// Ring is memberlist's keyring itself, for memberlist.Config.Keyring: the one serf's key
// manager changes; nil when insecure.
func (k Keys) Ring() *memberlist.Keyring { return k.ring }

// All are the installed keys, the primary first; nil when insecure.
func (k Keys) All() [][]byte {
	if k.ring == nil {
		return nil
	}
	return k.ring.GetKeys()
}
