// Package gossiptest holds what the tests of gossip and of its parts share: the test keys
// (ClusterKey, StrangerKey, Keys), homes with random names in the test regions (Regions,
// Homes), and the marks and homes of event payloads (Decode). Only tests import it.
package gossiptest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fenec/fenec-entry/gossip/internal/keyring"
	"github.com/fenec/fenec-entry/gossip/internal/wire"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/internal/clock"
)

// The tests' gossip keys: the cluster's, and a stranger's.
var (
	ClusterKey  = bytes.Repeat([]byte{7}, 32)
	StrangerKey = bytes.Repeat([]byte{9}, 32)
)

// Keys is keyring.Keys holding k alone (nil: insecure); k must be a valid AES key.
func Keys(k []byte) keyring.Keys {
	keys, err := keyring.New(k)
	if err != nil {
		panic(err)
	}
	return keys
}

// Regions are the regions the tests' tables configure, and Homes picks from.
var Regions = []string{"eu", "us", "ap"}

// Homes are n homes learned by origin now, with random names of nameLen bytes and more (an
// index makes each unique) in random Regions, from seed.
func Homes(n, nameLen int, origin string, seed uint64) []homes.Home {
	r := rand.New(rand.NewPCG(seed, 1))
	base := uint64(clock.System.Now().UnixMilli()) << 16
	const alpha = "abcdefghijklmnopqrstuvwxyz0123456789-"
	out := make([]homes.Home, n)
	for i := range out {
		var b strings.Builder
		for b.Len() < nameLen {
			b.WriteByte(alpha[r.IntN(len(alpha))])
		}
		out[i] = homes.Home{Tenant: fmt.Sprintf("%s-%d", b.String(), i), Region: Regions[r.IntN(3)],
			Version: homes.Version{HLC: base + uint64(i)*7919, Origin: origin}}
	}
	return out
}

// Decode reads event payloads, in order: their sender (the last one's) and the marks and homes
// they carry. A payload that does not decode fails the test.
func Decode(t testing.TB, payloads ...[]byte) (string, []homes.Mark, []homes.Home) {
	t.Helper()
	d := wire.NewDecoder()
	var ms []homes.Mark
	var hs []homes.Home
	var sender string
	for _, p := range payloads {
		s, b, err := d.Decode(p)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		sender = s
		for _, w := range b.M {
			ms = append(ms, w.Mark(s))
		}
		for _, w := range b.H {
			hs = append(hs, w.Home(s))
		}
	}
	return sender, ms, hs
}
