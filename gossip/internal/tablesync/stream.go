package tablesync

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/fenec/fenec-entry/homes"
)

// The snapshot stream, the body of every answer of /_gossip/snapshot, /_gossip/digest and
// /_gossip/pull: msgpack arrays one after another, each starting with its kind.
//
//	header  [1, wireVersion, node, homesHint, marksHint]
//	home    [2, tenant, region, hlc, origin]
//	mark    [3, region, kind, clear, observer, expiresUnixNano (0: none), hlc, origin]
//	digest  [4, [bucket sums...], marksSum]
//	seal    [5, mac]
//	trailer [6, homes, marks, mac]
//
// One header first, one trailer last; a seal after every sealEvery homes and marks. mac is a
// running HMAC-SHA256 with the auth key over "fenec-snapshot-body <nonce> <path>" and then a
// canonical encoding of every record before it (not the msgpack bytes, so the reader need not
// capture them). The reader holds the records since the last seal and applies them only once
// the seal verifies: a stream altered in transit or served by a peer without the key applies
// nothing, a truncated one applies whole sealed blocks and ends in ErrTruncated. The trailer's
// counts must match what was read.
const (
	wireVersion = 1

	recHeader  = 1
	recHome    = 2
	recMark    = 3
	recDigest  = 4
	recSeal    = 5
	recTrailer = 6

	sealEvery   = 256            // records per sealed block: what a reader buffers before applying
	flushEvery  = 4              // sealed blocks per write to the peer: about 45 KB of homes
	maxWireStr  = 1024           // longest string a record may carry; longer ends the stream
	maxRecBytes = 4 * maxWireStr // bound on one record's bytes, for the stream's byte bound
)

// recFields is the array length of each record kind.
var recFields = [...]int{recHeader: 5, recHome: 5, recMark: 8, recDigest: 3, recSeal: 2, recTrailer: 4}

// Errors of a stream. Applied records stay applied: each one passed validation and Apply
// kept it only if newer.
var (
	ErrTruncated = errors.New("gossip: snapshot stream truncated")
	ErrBadSeal   = errors.New("gossip: snapshot stream seal does not verify")
	ErrBadReply  = errors.New("gossip: peer did not prove the key in Fenec-Proof-Reply")
	ErrTooLarge  = errors.New("gossip: snapshot stream over its bound")
	errBadStream = errors.New("gossip: malformed snapshot stream")
)

// streamMAC is the running seal of a stream.
type streamMAC struct {
	h   hash.Hash
	buf []byte
}

func newStreamMAC(authKey []byte, nonce, path string) *streamMAC {
	m := &streamMAC{h: hmac.New(sha256.New, authKey), buf: make([]byte, 0, 512)}
	m.h.Write([]byte("fenec-snapshot-body " + nonce + " " + path))
	return m
}

func (m *streamMAC) kind(k byte)   { m.buf = append(m.buf, k) }
func (m *streamMAC) uint(v uint64) { m.buf = binary.BigEndian.AppendUint64(m.buf, v) }
func (m *streamMAC) str(s string) {
	m.buf = binary.AppendUvarint(m.buf, uint64(len(s)))
	m.buf = append(m.buf, s...)
}
func (m *streamMAC) end()                 { m.h.Write(m.buf); m.buf = m.buf[:0] }
func (m *streamMAC) sum() []byte          { return m.h.Sum(nil) }
func (m *streamMAC) verify(b []byte) bool { return hmac.Equal(m.h.Sum(nil), b) }

func (m *streamMAC) home(h homes.Home) {
	m.kind(recHome)
	m.str(h.Tenant)
	m.str(h.Region)
	m.uint(h.Version.HLC)
	m.str(h.Version.Origin)
	m.end()
}

func (m *streamMAC) mark(mk homes.Mark) {
	m.kind(recMark)
	m.str(mk.Region)
	m.uint(0) // an older entry's mark kind
	m.uint(b2u(mk.Clear))
	m.str(mk.Observer)
	m.uint(uint64(timeNano(mk.At)))
	m.uint(mk.Version.HLC)
	m.str(mk.Version.Origin)
	m.end()
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func timeNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// streamWriter writes one stream. flush is called after every flushEvery seals and at the
// end, to push the blocks to the peer (the http.Flusher); it may be nil. The peer applies a
// block once its seal arrives: flushing four at a time makes one write of about 45 KB where
// a block alone (11 KB) cost nearly as much to write (bench/joiner, docs/BENCHMARKS.md).
type streamWriter struct {
	enc          *msgpack.Encoder
	mac          *streamMAC
	flush        func() error
	block        int // records since the last seal
	seals        int // seals since the last flush
	homes, marks uint64
}

func newStreamWriter(w io.Writer, mac *streamMAC, flush func() error) *streamWriter {
	return &streamWriter{enc: msgpack.NewEncoder(w), mac: mac, flush: flush}
}

func (w *streamWriter) header(node string, homesHint, marksHint int) error {
	w.mac.kind(recHeader)
	w.mac.uint(wireVersion)
	w.mac.str(node)
	w.mac.uint(uint64(homesHint))
	w.mac.uint(uint64(marksHint))
	w.mac.end()
	return w.enc.EncodeMulti(encArray(5), recHeader, wireVersion, node, homesHint, marksHint)
}

func (w *streamWriter) home(h homes.Home) error {
	w.mac.home(h)
	e := w.enc // field by field: EncodeMulti would box each value
	if err := errors.Join(e.EncodeArrayLen(5), e.EncodeUint(recHome), e.EncodeString(h.Tenant),
		e.EncodeString(h.Region), e.EncodeUint(h.Version.HLC), e.EncodeString(h.Version.Origin)); err != nil {
		return err
	}
	w.homes++
	return w.counted()
}

func (w *streamWriter) mark(m homes.Mark) error {
	w.mac.mark(m)
	if err := w.enc.EncodeMulti(encArray(8), recMark, m.Region, uint8(0), m.Clear, m.Observer,
		timeNano(m.At), m.Version.HLC, m.Version.Origin); err != nil {
		return err
	}
	w.marks++
	return w.counted()
}

func (w *streamWriter) digest(d *digest) error {
	w.mac.kind(recDigest)
	w.mac.uint(uint64(len(d.buckets)))
	for _, v := range d.buckets {
		w.mac.uint(v)
	}
	w.mac.uint(d.marks)
	w.mac.end()
	if err := w.enc.EncodeArrayLen(3); err != nil {
		return err
	}
	if err := w.enc.EncodeUint(recDigest); err != nil {
		return err
	}
	if err := w.enc.EncodeArrayLen(len(d.buckets)); err != nil {
		return err
	}
	for _, v := range d.buckets {
		if err := w.enc.EncodeUint(v); err != nil {
			return err
		}
	}
	return w.enc.EncodeUint(d.marks)
}

// counted seals the block after sealEvery records, and flushes after flushEvery seals.
func (w *streamWriter) counted() error {
	if w.block++; w.block < sealEvery {
		return nil
	}
	w.block = 0
	if err := w.enc.EncodeMulti(encArray(2), recSeal, w.mac.sum()); err != nil {
		return err
	}
	if w.seals++; w.seals < flushEvery {
		return nil
	}
	w.seals = 0
	return w.doFlush()
}

func (w *streamWriter) trailer() error {
	w.mac.kind(recTrailer)
	w.mac.uint(w.homes)
	w.mac.uint(w.marks)
	w.mac.end()
	if err := w.enc.EncodeMulti(encArray(4), recTrailer, w.homes, w.marks, w.mac.sum()); err != nil {
		return err
	}
	return w.doFlush()
}

func (w *streamWriter) doFlush() error {
	if w.flush == nil {
		return nil
	}
	return w.flush()
}

// encArray makes EncodeMulti write an array header.
type encArray int

var _ msgpack.CustomEncoder = encArray(0)

func (n encArray) EncodeMsgpack(e *msgpack.Encoder) error { return e.EncodeArrayLen(int(n)) }

// streamReader reads one stream, record by record, verifying seals. Not safe for concurrent use.
type streamReader struct {
	dec        *msgpack.Decoder
	mac        *streamMAC
	maxRecords int
	records    int
	homes      uint64
	marks      uint64
	strBuf     []byte
}

// record is one decoded record; kind says which field is set.
type record struct {
	kind   int
	home   homes.Home
	mark   homes.Mark
	digest *digest
	node   string // header
	hint   int    // header: homes hint
	sealed bool   // seal or trailer: the block before it verified
	last   bool   // trailer
}

func newStreamReader(r io.Reader, mac *streamMAC, maxRecords int) *streamReader {
	d := msgpack.NewDecoder(r)
	return &streamReader{dec: d, mac: mac, maxRecords: maxRecords}
}

// next returns the next record. io.EOF before the trailer is ErrTruncated.
func (r *streamReader) next() (rec record, err error) {
	defer func() {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = ErrTruncated
		}
	}()
	n, err := r.dec.DecodeArrayLen()
	if err != nil {
		return rec, err
	}
	k, err := r.dec.DecodeUint8()
	if err != nil {
		return rec, err
	}
	rec.kind = int(k)
	if int(k) >= len(recFields) || recFields[k] == 0 || n != recFields[k] {
		return rec, fmt.Errorf("%w: record kind %d with %d fields", errBadStream, k, n)
	}
	switch rec.kind {
	case recHeader:
		return rec, r.header(&rec)
	case recHome:
		if r.records++; r.records > r.maxRecords {
			return rec, ErrTooLarge
		}
		h := &rec.home
		if h.Tenant, err = r.str(); err == nil {
			if h.Region, err = r.str(); err == nil {
				if h.Version.HLC, err = r.dec.DecodeUint64(); err == nil {
					h.Version.Origin, err = r.str()
				}
			}
		}
		if err == nil {
			r.mac.home(*h)
			r.homes++
		}
		return rec, err
	case recMark:
		if r.records++; r.records > r.maxRecords {
			return rec, ErrTooLarge
		}
		return rec, r.mark(&rec.mark)
	case recDigest:
		return rec, r.digest(&rec)
	case recSeal:
		b, err := r.dec.DecodeBytes()
		if err != nil {
			return rec, err
		}
		if !r.mac.verify(b) {
			return rec, ErrBadSeal
		}
		rec.sealed = true
		return rec, nil
	default: // recTrailer
		nh, err := r.dec.DecodeUint64()
		if err != nil {
			return rec, err
		}
		nm, err := r.dec.DecodeUint64()
		if err != nil {
			return rec, err
		}
		b, err := r.dec.DecodeBytes()
		if err != nil {
			return rec, err
		}
		r.mac.kind(recTrailer)
		r.mac.uint(nh)
		r.mac.uint(nm)
		r.mac.end()
		if !r.mac.verify(b) {
			return rec, ErrBadSeal
		}
		if nh != r.homes || nm != r.marks {
			return rec, fmt.Errorf("%w: trailer counts %d homes and %d marks, read %d and %d",
				ErrTruncated, nh, nm, r.homes, r.marks)
		}
		rec.sealed, rec.last = true, true
		return rec, nil
	}
}

func (r *streamReader) header(rec *record) error {
	v, err := r.dec.DecodeUint64()
	if err != nil {
		return err
	}
	if v != wireVersion {
		return fmt.Errorf("%w: wire version %d, want %d", errBadStream, v, wireVersion)
	}
	if rec.node, err = r.str(); err != nil {
		return err
	}
	hh, err := r.dec.DecodeUint64()
	if err != nil {
		return err
	}
	mh, err := r.dec.DecodeUint64()
	if err != nil {
		return err
	}
	rec.hint = int(min(hh, uint64(r.maxRecords)))
	r.mac.kind(recHeader)
	r.mac.uint(v)
	r.mac.str(rec.node)
	r.mac.uint(hh)
	r.mac.uint(mh)
	r.mac.end()
	return nil
}

func (r *streamReader) mark(m *homes.Mark) error {
	var err error
	if m.Region, err = r.str(); err != nil {
		return err
	}
	if _, err := r.dec.DecodeUint8(); err != nil { // an older entry's mark kind
		return err
	}
	if m.Clear, err = r.dec.DecodeBool(); err != nil {
		return err
	}
	if m.Observer, err = r.str(); err != nil {
		return err
	}
	at, err := r.dec.DecodeInt64()
	if err != nil {
		return err
	}
	if at != 0 {
		m.At = time.Unix(0, at)
	}
	if m.Version.HLC, err = r.dec.DecodeUint64(); err != nil {
		return err
	}
	if m.Version.Origin, err = r.str(); err != nil {
		return err
	}
	r.mac.mark(*m)
	r.marks++
	return nil
}

func (r *streamReader) digest(rec *record) error {
	n, err := r.dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != digestBuckets {
		return fmt.Errorf("%w: digest of %d buckets, want %d", errBadStream, n, digestBuckets)
	}
	d := new(digest)
	r.mac.kind(recDigest)
	r.mac.uint(uint64(n))
	for i := range d.buckets {
		if d.buckets[i], err = r.dec.DecodeUint64(); err != nil {
			return err
		}
		r.mac.uint(d.buckets[i])
	}
	if d.marks, err = r.dec.DecodeUint64(); err != nil {
		return err
	}
	r.mac.uint(d.marks)
	r.mac.end()
	rec.digest = d
	return nil
}

// str decodes a string of at most maxWireStr bytes without allocating more than that.
func (r *streamReader) str() (string, error) {
	n, err := r.dec.DecodeBytesLen()
	if err != nil {
		return "", err
	}
	if n < 0 || n > maxWireStr {
		return "", fmt.Errorf("%w: string of %d bytes", errBadStream, n)
	}
	if cap(r.strBuf) < n {
		r.strBuf = make([]byte, maxWireStr)
	}
	b := r.strBuf[:n]
	if err := r.dec.ReadFull(b); err != nil {
		return "", err
	}
	return string(b), nil
}
