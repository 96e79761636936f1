package wire

import "github.com/fenec/fenec-entry/gossip/internal/validate"

// An ack is a sealed direct packet of kind KindAck: [1 B name length][acker's name]
// [n × 12 B nonces], the nonces of packets from one sender that the acker took at about the
// same time.

// MaxAckNonces bounds the nonces one ack packet carries (12 B each).
const MaxAckNonces = 64

// Nonce names a sealed packet in acks: its nonce, unique to the packet and the same in every
// resend of it.
type Nonce [NonceSize]byte

// NonceOf is the nonce of a sealed packet (a kind other than plain).
func NonceOf(pkt []byte) Nonce {
	var n Nonce
	copy(n[:], pkt[2:2+NonceSize])
	return n
}

// EncodeAck is an ack's payload: from's name and the nonces.
func EncodeAck(from string, ns []Nonce) []byte {
	out := make([]byte, 0, 1+len(from)+len(ns)*NonceSize)
	out = append(out, byte(len(from)))
	out = append(out, from...)
	for _, n := range ns {
		out = append(out, n[:]...)
	}
	return out
}

// DecodeAck reads an ack's payload; ok is false for a malformed one (counted by the caller).
func DecodeAck(p []byte) (from string, ns []Nonce, ok bool) {
	if len(p) < 1 || len(p) < 1+int(p[0]) || p[0] == 0 || int(p[0]) > validate.MaxNodeName {
		return "", nil, false
	}
	from, rest := string(p[1:1+int(p[0])]), p[1+int(p[0]):]
	if len(rest) == 0 || len(rest)%NonceSize != 0 || len(rest)/NonceSize > MaxAckNonces {
		return "", nil, false
	}
	ns = make([]Nonce, len(rest)/NonceSize)
	for i := range ns {
		copy(ns[i][:], rest[i*NonceSize:])
	}
	return from, ns, true
}
