// Package wire owns the bytes of spreading: the event payload that carries homes, marks and
// clears (a serf user event's, or a direct packet's body: Encoder, Decoder), the direct packet
// that seals one with the gossip keys (Codec), and the ack that names packets taken (EncodeAck,
// DecodeAck). Every entry of every release must read them alike: they change only with a
// new kind or format, which older entries refuse.
//
// It must not know who sends what to whom or when: the members, the transport, the relays,
// the table and serf are its callers' (package spread's). It only makes and reads bytes,
// and says when they are not what they should be.
package wire
