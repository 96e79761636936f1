package wire

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/homes/record"
	"github.com/fenec/fenec-entry/internal/clock"
)

// EventName is the serf user event that carries homes, marks and clears.
const EventName = "fenec-homes"

const (
	// DefaultEventSizeLimit is serf's UserEventSizeLimit (name + payload, encoded). serf's own
	// default is 512 B; an event larger than a gossip packet's free space is silently never
	// gossiped. A packet carries gossip's Membership.UDPBufferSize - 44 B (compound header 2,
	// label 13, AES-GCM 29) and an event costs 3 B more inside it, so up to ~1,325 B would
	// fit; 1,024 B leaves ~300 B for the membership messages (alive, suspect, acks) and the
	// small events (marks, clears, one or two homes) that share the packet.
	DefaultEventSizeLimit = 1024

	// MinEventSizeLimit fits one home with the longest tenant name and its envelope.
	MinEventSizeLimit = 512
)

// An event's payload is a small header and a body:
//
//	byte 0     format: formatMsgpack (body is msgpack) or formatFlate (raw DEFLATE of it,
//	           with flateDict as preset dictionary)
//	byte 1     n, the length of the sender's node name
//	2 .. 2+n   the sender's node name, so that a node drops its own events unread
//	rest       body: a Batch
//
// The sender encodes both and keeps the smaller: DEFLATE pays from a few homes on.
const (
	formatMsgpack byte = 1
	formatFlate   byte = 2
)

// maxDecoded bounds a decompressed body: a peer cannot make us inflate a bomb.
const maxDecoded = 64 << 10

// serfEnvelope is what serf adds to name + payload when it encodes a user event (message
// type, msgpack map of LTime, Name, Payload, CC: 38 B plus the name at most), with a margin.
// serf checks the encoded size against UserEventSizeLimit.
const serfEnvelope = 48

// Home and Mark are the records of a home and a mark (package record), the one encoding
// every entry writes: an event's carry the sender's name as "" (From fills it in).
type (
	Home = record.Home
	Mark = record.Mark
)

// Batch is an event's body. Marks come first: they are few and urgent. S is when the
// sender encoded it, unix milliseconds on the sender's clock, so that a receiver can tell how
// long each home waited at its origin without comparing two clocks (0 from older senders).
// The batch is a map, its records arrays; an earlier entry's maps of maps decode too.
type Batch struct {
	M []Mark `msgpack:"m,omitempty"`
	H []Home `msgpack:"h,omitempty"`
	S int64  `msgpack:"s,omitempty"`
}

// flateDict primes DEFLATE with what bodies repeat, so that even a small event compresses.
// It is part of the wire: a sender and its receivers must hold the same bytes, so it stays
// what earlier entries computed, from their map-encoded records (dictHome, dictMark), though
// records are arrays now.
var flateDict = func() []byte {
	type dictHome struct {
		T string `msgpack:"t"`
		R string `msgpack:"r"`
		V uint64 `msgpack:"v"`
		O string `msgpack:"o,omitempty"`
	}
	type dictMark struct {
		R string `msgpack:"r"`
		C bool   `msgpack:"c,omitempty"`
		B string `msgpack:"b,omitempty"`
		W int64  `msgpack:"w,omitempty"`
		V uint64 `msgpack:"v"`
		O string `msgpack:"o,omitempty"`
	}
	b, _ := msgpack.Marshal(struct {
		M []dictMark `msgpack:"m,omitempty"`
		H []dictHome `msgpack:"h,omitempty"`
		S int64      `msgpack:"s,omitempty"`
	}{
		M: []dictMark{{R: "eu", W: 1 << 42, V: 1 << 56}},
		H: []dictHome{{T: "tenant", R: "us", V: 1 << 56}, {T: "tenant", R: "ap", V: 1 << 56, O: "node"}},
	})
	return b
}()

// Encoder builds event payloads for one sender. Not safe for concurrent use (the publisher
// owns it); it reuses its buffers and its DEFLATE writer (~600 KB, made once).
type Encoder struct {
	sender string
	budget int              // most payload bytes per event
	now    func() time.Time // the batch's S

	raw, z bytes.Buffer
	enc    *msgpack.Encoder
	fw     *flate.Writer
	batch  Batch
}

// NewEncoder makes an encoder for sender; now stamps each batch (nil: time.Now).
func NewEncoder(sender string, eventSizeLimit int, now func() time.Time) *Encoder {
	if now == nil {
		now = clock.System.Now
	}
	e := &Encoder{sender: sender, budget: eventSizeLimit - serfEnvelope - len(EventName), now: now}
	e.enc = msgpack.NewEncoder(&e.raw)
	e.fw, _ = flate.NewWriterDict(&e.z, flate.BestCompression, flateDict) // the level is valid
	return e
}

// Budget is the most payload bytes an event may carry: the event size limit less serf's
// envelope and the event's name.
func (e *Encoder) Budget() int { return e.budget }

// Encode returns the payload carrying marks and hs, a fresh slice.
func (e *Encoder) Encode(marks []homes.Mark, hs []homes.Home) ([]byte, error) {
	e.batch.M, e.batch.H, e.batch.S = e.batch.M[:0], e.batch.H[:0], e.now().UnixMilli()
	for _, m := range marks {
		e.batch.M = append(e.batch.M, record.MarkOf(m, e.sender))
	}
	for _, h := range hs {
		e.batch.H = append(e.batch.H, record.HomeOf(h, e.sender))
	}
	e.raw.Reset()
	if err := e.enc.Encode(&e.batch); err != nil {
		return nil, fmt.Errorf("gossip: encode batch: %w", err)
	}
	e.z.Reset()
	e.fw.Reset(&e.z)
	if _, err := e.fw.Write(e.raw.Bytes()); err != nil {
		return nil, fmt.Errorf("gossip: compress batch: %w", err)
	}
	if err := e.fw.Close(); err != nil {
		return nil, fmt.Errorf("gossip: compress batch: %w", err)
	}
	format, body := formatMsgpack, e.raw.Bytes()
	if e.z.Len() < len(body) {
		format, body = formatFlate, e.z.Bytes()
	}
	out := make([]byte, 0, 2+len(e.sender)+len(body))
	out = append(out, format, byte(len(e.sender)))
	out = append(out, e.sender...)
	return append(out, body...), nil
}

// Event is one encoded payload and what it carries.
type Event struct {
	Payload      []byte
	Marks, Homes int
}

// Split encodes the first items of marks then hs into at most maxEvents events, each
// within the budget and each as full as it can be. It returns the events and how many
// marks and homes they carry in all. With fullOnly, it stops before an event that would not be full
// (the rest waits for more). An item that cannot fit an event alone is skipped and counted
// in skipped (it cannot happen with validated names and MinEventSizeLimit).
func (e *Encoder) Split(marks []homes.Mark, hs []homes.Home, maxEvents int, fullOnly bool) (events []Event, nMarks, nHomes, skipped int, err error) {
	for len(events) < maxEvents && (nMarks < len(marks) || nHomes < len(hs)) {
		restM, restH := marks[nMarks:], hs[nHomes:]
		total := len(restM) + len(restH)
		fits := func(k int) ([]byte, bool, error) {
			km := min(k, len(restM))
			p, err := e.Encode(restM[:km], restH[:k-km])
			return p, err == nil && len(p) <= e.budget, err
		}
		// Grow k by doubling while it fits, then bisect between the last fit and the first
		// miss: O(log k) encodings of at most ~2 events' worth.
		var best []byte
		lo, hi := 0, 0 // lo fits (0: nothing yet), hi does not (0: none found)
		for k := 1; ; k *= 2 {
			k = min(k, total)
			p, ok, err := fits(k)
			if err != nil {
				return events, nMarks, nHomes, skipped, err
			}
			if !ok {
				hi = k
				break
			}
			lo, best = k, p
			if k == total {
				break
			}
		}
		for hi != 0 && hi-lo > 1 {
			mid := (lo + hi) / 2
			p, ok, err := fits(mid)
			if err != nil {
				return events, nMarks, nHomes, skipped, err
			}
			if ok {
				lo, best = mid, p
			} else {
				hi = mid
			}
		}
		if lo == 0 { // the first item alone is too large
			if len(restM) > 0 {
				nMarks++
			} else {
				nHomes++
			}
			skipped++
			continue
		}
		if fullOnly && hi == 0 {
			break // everything left fits one event: not full yet
		}
		km := min(lo, len(restM))
		events = append(events, Event{Payload: best, Marks: km, Homes: lo - km})
		nMarks += km
		nHomes += lo - km
	}
	return events, nMarks, nHomes, skipped, nil
}

var errBadEvent = errors.New("bad event")

// Decoder reads event payloads. Not safe for concurrent use (the receive worker owns it).
type Decoder struct {
	fr  io.ReadCloser
	out bytes.Buffer
}

func NewDecoder() *Decoder {
	return &Decoder{fr: flate.NewReaderDict(bytes.NewReader(nil), flateDict)}
}

// Sender returns the sender named in payload's header, without decoding the body.
func Sender(payload []byte) (string, bool) {
	if len(payload) < 2 || len(payload) < 2+int(payload[1]) {
		return "", false
	}
	return string(payload[2 : 2+int(payload[1])]), true
}

// Decode returns the sender and the batch in payload; errors wrap errBadEvent.
func (d *Decoder) Decode(payload []byte) (string, Batch, error) {
	var b Batch
	sender, ok := Sender(payload)
	if !ok || sender == "" {
		return "", b, fmt.Errorf("%w: short header", errBadEvent)
	}
	body := payload[2+len(sender):]
	switch payload[0] {
	case formatMsgpack:
	case formatFlate:
		if err := d.fr.(flate.Resetter).Reset(bytes.NewReader(body), flateDict); err != nil {
			return sender, b, fmt.Errorf("%w: %v", errBadEvent, err)
		}
		d.out.Reset()
		n, err := d.out.ReadFrom(io.LimitReader(d.fr, maxDecoded+1))
		if err != nil {
			return sender, b, fmt.Errorf("%w: inflate: %v", errBadEvent, err)
		}
		if n > maxDecoded {
			return sender, b, fmt.Errorf("%w: inflates past %d bytes", errBadEvent, maxDecoded)
		}
		body = d.out.Bytes()
	default:
		return sender, b, fmt.Errorf("%w: format %d", errBadEvent, payload[0])
	}
	if err := msgpack.Unmarshal(body, &b); err != nil {
		return sender, b, fmt.Errorf("%w: msgpack: %v", errBadEvent, err)
	}
	return sender, b, nil
}
