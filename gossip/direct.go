package gossip

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/maphash"
	"log"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fenec/fenec-entry/gossip/internal/keyring"
	"github.com/hashicorp/memberlist"
)

// Direct homes. serf re-sends every user event RetransmitMult x ceil(log10(N+1)) times from
// every entry (8 sends per entry at 10 entries, 12 at 100), and an entry learns only R/N of
// the R homes a second the cluster learns, so per-entry batching cannot fill events: every
// home costs a dozen event sends at every entry, and 50 homes/s saturates serf's packets at
// 100 entries (bench/gossipsim/README.md). Homes therefore go straight from the entry that
// learned them to every member, in one hop, on memberlist's own port: the packet is
// sent to each member DirectCopies times, DirectCopyInterval apart, so that with 1 % loss a
// (home, entry) pair is missed with probability 0.01^DirectCopies, and repair carries those.
// Cost: an entry sends each of its batches (N-1) x DirectCopies times, against serf's
// N x 12 event sends per event cluster-wide, and a home arrives after one network hop, not
// log(N) gossip rounds. Marks and clears, rare and urgent, stay on serf user events, whose
// epidemic reaches members the origin does not know yet.
//
// A direct packet shares memberlist's UDP port: directTransport, under memberlist, takes
// the packets that begin with directMagic (no memberlist packet does: memberlist's own begin
// with a message type below 16, an encryption version 0 or 1, or the label header 244) and
// hands the rest to memberlist. The body is an event payload (wire.go), sealed with the
// gossip key:
//
//	byte 0        directMagic
//	byte 1        directSealed: 12 B nonce, then AES-GCM(key) of the payload, with
//	              directAAD + cluster label as additional data (so another cluster's key or
//	              label fails to open it)
//	              directPlain (--insecure-gossip): 1 B label length, label, payload
const (
	directMagic  byte = 0xFB
	directPlain  byte = 0
	directSealed byte = 1
	// Relays (relay.go), keyed clusters only, acked (acked.go): a payload sealed as
	// directRelay is applied and its homes passed on to the receiver's group; one sealed as
	// directAcked is applied; both are acked with a directAck packet.
	directRelay byte = 2
	directAcked byte = 3
	directAck   byte = 4

	directNonce = 12
	directTag   = 16
	// directOverhead is what a sealed direct packet adds to its payload.
	directOverhead = 2 + directNonce + directTag
)

const directAAD = "fenec-entry direct homes\x00"

var errDirect = errors.New("bad direct packet")

// directCodec seals and opens direct packets: sealed with the keyring's primary key, opened
// under any installed key (a rotation in progress). Safe for concurrent use.
type directCodec struct {
	keys  keyring.Keys // zero: insecure
	label string
	aad   []byte
	gcm   aeads
}

func newDirectCodec(keys keyring.Keys, label string) *directCodec {
	return &directCodec{keys: keys, label: label, aad: []byte(directAAD + label)}
}

// seal returns the packet carrying payload, a fresh slice.
func (c *directCodec) seal(payload []byte) ([]byte, error) { return c.sealAs(directSealed, payload) }

// sealAs is seal with the packet's kind: directSealed, or with a key one of the relays' kinds
// (without one every packet is directPlain).
func (c *directCodec) sealAs(kind byte, payload []byte) ([]byte, error) {
	if !c.keys.Secure() {
		out := make([]byte, 0, 3+len(c.label)+len(payload))
		out = append(out, directMagic, directPlain, byte(len(c.label)))
		out = append(out, c.label...)
		return append(out, payload...), nil
	}
	aead, err := c.gcm.get(c.keys.Primary())
	if err != nil {
		return nil, fmt.Errorf("gossip: direct: %w", err)
	}
	out := make([]byte, 2+directNonce, directOverhead+len(payload))
	out[0], out[1] = directMagic, kind
	if _, err := rand.Read(out[2 : 2+directNonce]); err != nil {
		return nil, fmt.Errorf("gossip: direct: nonce: %w", err)
	}
	return aead.Seal(out, out[2:2+directNonce], payload, c.aadFor(kind)), nil
}

// aadFor is the additional data of a kind: the kind is sealed too, so that a packet cannot be
// turned into a relay's on the way (directSealed's stays as it was, for peers of
// earlier releases).
func (c *directCodec) aadFor(kind byte) []byte {
	if kind == directSealed {
		return c.aad
	}
	return append(append([]byte(nil), c.aad...), kind)
}

// open returns the payload of a packet from seal; errors wrap errDirect. An insecure entry
// refuses sealed packets and a keyed one plain packets.
func (c *directCodec) open(pkt []byte) ([]byte, error) {
	p, _, err := c.openKind(pkt)
	return p, err
}

// openKind is open, and the packet's kind (directPlain's payload comes back as directSealed's:
// it is applied the same way).
func (c *directCodec) openKind(pkt []byte) ([]byte, byte, error) {
	p, err := c.openAny(pkt)
	if err != nil {
		return nil, 0, err
	}
	kind := pkt[1]
	if kind == directPlain {
		kind = directSealed
	}
	return p, kind, nil
}

func (c *directCodec) openAny(pkt []byte) ([]byte, error) {
	if len(pkt) < 2 || pkt[0] != directMagic {
		return nil, fmt.Errorf("%w: header", errDirect)
	}
	switch pkt[1] {
	case directPlain:
		if c.keys.Secure() {
			return nil, fmt.Errorf("%w: not sealed", errDirect)
		}
		if len(pkt) < 3 || len(pkt) < 3+int(pkt[2]) || string(pkt[3:3+int(pkt[2])]) != c.label {
			return nil, fmt.Errorf("%w: label", errDirect)
		}
		return pkt[3+int(pkt[2]):], nil
	case directSealed, directRelay, directAcked, directAck:
		if !c.keys.Secure() {
			return nil, fmt.Errorf("%w: sealed, and no key", errDirect)
		}
		if len(pkt) < directOverhead {
			return nil, fmt.Errorf("%w: short", errDirect)
		}
		for _, k := range c.keys.All() {
			aead, err := c.gcm.get(k)
			if err != nil {
				continue
			}
			if p, err := aead.Open(nil, pkt[2:2+directNonce], pkt[2+directNonce:], c.aadFor(pkt[1])); err == nil {
				return p, nil
			}
		}
		return nil, fmt.Errorf("%w: no installed key opens it", errDirect)
	default:
		return nil, fmt.Errorf("%w: kind %d", errDirect, pkt[1])
	}
}

// directTransport sits under memberlist: it takes direct packets out of the packet stream
// and sync streams out of the stream channel (streams.go), and passes everything else on.
// Its goroutines run until Shutdown, which memberlist calls.
type directTransport struct {
	memberlist.NodeAwareTransport
	in        chan *memberlist.Packet
	streams   chan net.Conn
	handle    func(pkt []byte) // a direct packet, still sealed; must not block
	sync      *connListener    // where sync streams go; nil: closed
	onRefused func(reason string)

	mu      sync.Mutex            // guards sorting
	sorting map[net.Conn]struct{} // streams waiting for their first byte; closed by Shutdown

	// Shutdown closes closing first: the goroutines then drop what the inner transport still
	// hands them instead of forwarding it, and keep reading its channels, which memberlist's
	// NetTransport needs (its listeners block sending to unbuffered channels, and its Shutdown
	// waits for them). stop closes once the inner transport has shut down: they return.
	closing chan struct{}
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

func newDirectTransport(inner memberlist.NodeAwareTransport, handle func([]byte), syncLn *connListener,
	onRefused func(string)) *directTransport {
	t := &directTransport{NodeAwareTransport: inner, in: make(chan *memberlist.Packet),
		streams: make(chan net.Conn), handle: handle, sync: syncLn, onRefused: onRefused,
		sorting: make(map[net.Conn]struct{}), closing: make(chan struct{}), stop: make(chan struct{})}
	t.wg.Add(2)
	go t.run()
	go t.sortStreams()
	return t
}

func (t *directTransport) run() {
	defer t.wg.Done()
	src := t.NodeAwareTransport.PacketCh()
	for {
		select {
		case <-t.stop:
			return
		case p := <-src:
			if len(p.Buf) > 0 && p.Buf[0] == directMagic {
				t.handle(p.Buf)
				continue
			}
			select {
			case t.in <- p:
			case <-t.closing: // dropped: memberlist is shutting down
			}
		}
	}
}

// PacketCh is what memberlist reads: every packet but the direct ones.
func (t *directTransport) PacketCh() <-chan *memberlist.Packet { return t.in }

// Shutdown stops the filter and the transport under it. Safe to call twice.
func (t *directTransport) Shutdown() error {
	var err error
	t.once.Do(func() {
		close(t.closing)
		t.mu.Lock()
		for c := range t.sorting {
			c.Close()
		}
		t.mu.Unlock()
		err = t.NodeAwareTransport.Shutdown() // its channels are still read meanwhile
		close(t.stop)
		t.wg.Wait()
	})
	return err
}

// newNetTransport makes the UDP/TCP transport memberlist would make for mc (which it
// does only when Config.Transport is nil), so that directTransport can sit on it. Port 0
// picks a free port and writes it into mc, as memberlist does.
func newNetTransport(mc *memberlist.Config, logOut *log.Logger) (*memberlist.NetTransport, error) {
	nc := &memberlist.NetTransportConfig{BindAddrs: []string{mc.BindAddr}, BindPort: mc.BindPort, Logger: logOut}
	tries := 1
	if mc.BindPort == 0 {
		tries = 10 // the port is picked for TCP, then bound for UDP too: racy
	}
	var err error
	for range tries {
		var nt *memberlist.NetTransport
		if nt, err = memberlist.NewNetTransport(nc); err == nil {
			if mc.BindPort == 0 {
				mc.BindPort = nt.GetAutoBindPort()
				mc.AdvertisePort = mc.BindPort
			}
			return nt, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, fmt.Errorf("gossip: listen on %s: %w", net.JoinHostPort(mc.BindAddr, strconv.Itoa(mc.BindPort)), err)
}

// directDedup remembers the last directDedupSize payloads applied, so that the copies of a
// packet are decoded and applied once. Not safe for concurrent use.
type directDedup struct {
	seed maphash.Seed
	seen map[uint64]struct{}
	ring [directDedupSize]uint64
	next int
}

const directDedupSize = 1024

func newDirectDedup() *directDedup {
	return &directDedup{seed: maphash.MakeSeed(), seen: make(map[uint64]struct{}, directDedupSize)}
}

// has reports whether payload was added and not forgotten yet.
func (d *directDedup) has(payload []byte) bool {
	_, ok := d.seen[maphash.Bytes(d.seed, payload)]
	return ok
}

// add remembers payload, forgetting the oldest beyond directDedupSize.
func (d *directDedup) add(payload []byte) {
	h := maphash.Bytes(d.seed, payload)
	if _, ok := d.seen[h]; ok {
		return
	}
	delete(d.seen, d.ring[d.next])
	d.ring[d.next] = h
	d.next = (d.next + 1) % directDedupSize
	d.seen[h] = struct{}{}
}

// directCopy is a sealed packet with copies still to send.
type directCopy struct {
	pkt   []byte
	peers []memberlist.Address
	left  int
	due   time.Time
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
