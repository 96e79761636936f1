package record

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

// A stream is msgpack arrays one after another, each starting with its kind:
//
//	header   [1, version, node, homesHint, marksHint]
//	home     [2, home record]       a home the writer holds
//	own home [7, home record]       a home the writer heard from a router itself (files)
//	mark     [3, mark record]
//	digest   [4, [bucket sums...], marksSum]   (repair's)
//	seal     [5, mac]
//	trailer  [6, homes, marks, mac]
//
// One header first, one trailer last; a seal after every SealEvery homes and marks. mac is a
// running HMAC-SHA256 with the caller's key over "fenec-snapshot-body <nonce> <path>" and then
// a canonical encoding of every record before it (not the msgpack bytes, so the reader need
// not capture them). A reader holds the records since the last seal and uses them only once
// the seal verifies: a stream altered or written without the key yields nothing, a truncated
// one yields whole sealed blocks and ends in ErrTruncated. The trailer's counts must match.
//
// Version 1, what entries before this encoding wrote and read, has the same header, digest,
// seal and trailer, and flat records with every name written out: home [2, tenant, region,
// hlc, origin], mark [3, region, 0, clear, observer, at unix nanoseconds, hlc, origin]. A
// reader takes both; a writer writes version 1 only for a reader that did not ask for 2.
// Remove it once no entry that reads only version 1 runs.
const (
	Version       = 2
	OldestVersion = 1

	KindHeader  = 1
	KindHome    = 2
	KindMark    = 3
	KindDigest  = 4
	KindSeal    = 5
	KindTrailer = 6
	KindOwnHome = 7

	SealEvery      = 256           // records per sealed block: what a reader buffers before using them
	FlushEvery     = 4             // sealed blocks per flush: about 45 KB of homes
	MaxString      = 1024          // longest string a record may carry; longer ends the stream
	MaxRecordBytes = 4 * MaxString // bound on one record's bytes, for a stream's byte bound
	DigestBuckets  = 256
)

// fields is the array length of each kind's record, by version (index 0: version 1).
var fields = [2][8]int{
	{KindHeader: 5, KindHome: 5, KindMark: 8, KindDigest: 3, KindSeal: 2, KindTrailer: 4},
	{KindHeader: 5, KindHome: 2, KindMark: 2, KindDigest: 3, KindSeal: 2, KindTrailer: 4, KindOwnHome: 2},
}

// Errors of a stream. What a reader yielded before one stays with its caller.
var (
	ErrTruncated = errors.New("snapshot stream truncated")
	ErrBadSeal   = errors.New("snapshot stream seal does not verify")
	ErrTooLarge  = errors.New("snapshot stream over its bound")
	ErrBadStream = errors.New("malformed snapshot stream")
)

// Digest is repair's summary of a table: a sum per bucket of tenants, and one of the marks.
type Digest struct {
	Buckets [DigestBuckets]uint64
	Marks   uint64
}

// MAC is the running seal of a stream.
type MAC struct {
	h   hash.Hash
	buf []byte
}

// NewMAC starts the seal of one stream under key, for the exchange nonce and path name
// (a file: its own fixed key, no nonce, its name).
func NewMAC(key []byte, nonce, path string) *MAC {
	m := &MAC{h: hmac.New(sha256.New, key)}
	m.h.Write([]byte("fenec-snapshot-body " + nonce + " " + path))
	return m
}

func (m *MAC) kind(k byte)   { m.buf = append(m.buf, k) }
func (m *MAC) uint(v uint64) { m.buf = binary.BigEndian.AppendUint64(m.buf, v) }
func (m *MAC) str(s string) {
	m.buf = binary.AppendUvarint(m.buf, uint64(len(s)))
	m.buf = append(m.buf, s...)
}
func (m *MAC) end()                 { m.h.Write(m.buf); m.buf = m.buf[:0] }
func (m *MAC) sum() []byte          { return m.h.Sum(nil) }
func (m *MAC) verify(b []byte) bool { return hmac.Equal(m.h.Sum(nil), b) }

func (m *MAC) home(kind byte, h homes.Home) {
	m.kind(kind)
	m.str(h.Tenant)
	m.str(h.Region)
	m.uint(h.Version.HLC)
	m.str(h.Version.Origin)
	m.end()
}

func (m *MAC) mark(mk homes.Mark) {
	m.kind(KindMark)
	m.str(mk.Region)
	m.uint(0) // version 1's mark kind
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

// Writer writes one stream. flush is called after every FlushEvery seals and at the end,
// to push the blocks on (an http.Flusher); it may be nil.
type Writer struct {
	enc          *msgpack.Encoder
	mac          *MAC
	version      int
	node         string // the header's: the writer, whose name a version 2 record leaves out
	flush        func() error
	block        int // records since the last seal
	seals        int // seals since the last flush
	homes, marks uint64
}

// NewWriter writes a stream of version (Version, or OldestVersion for a reader that asked
// for no other) to w.
func NewWriter(w io.Writer, mac *MAC, version int, flush func() error) *Writer {
	return &Writer{enc: msgpack.NewEncoder(w), mac: mac, version: version, flush: flush}
}

// Header starts the stream: node is its writer; the hints say how many homes and marks
// follow (a reader may size its buffers by them).
func (w *Writer) Header(node string, homesHint, marksHint int) error {
	w.node = node
	w.mac.kind(KindHeader)
	w.mac.uint(uint64(w.version))
	w.mac.str(node)
	w.mac.uint(uint64(homesHint))
	w.mac.uint(uint64(marksHint))
	w.mac.end()
	return w.enc.EncodeMulti(encArray(5), KindHeader, w.version, node, homesHint, marksHint)
}

// Home writes a home the writer holds.
func (w *Writer) Home(h homes.Home) error { return w.home(KindHome, h) }

// OwnHome writes a home the writer heard from a router itself (a state file's); in a
// version 1 stream it is a home.
func (w *Writer) OwnHome(h homes.Home) error {
	if w.version == OldestVersion {
		return w.home(KindHome, h)
	}
	return w.home(KindOwnHome, h)
}

func (w *Writer) home(kind byte, h homes.Home) error {
	w.mac.home(kind, h)
	e := w.enc // field by field: EncodeMulti would box each value
	var err error
	if w.version == OldestVersion {
		err = errors.Join(e.EncodeArrayLen(5), e.EncodeUint(KindHome), e.EncodeString(h.Tenant),
			e.EncodeString(h.Region), e.EncodeUint(h.Version.HLC), e.EncodeString(h.Version.Origin))
	} else {
		r := HomeOf(h, w.node)
		err = errors.Join(e.EncodeArrayLen(2), e.EncodeUint(uint64(kind)), e.EncodeArrayLen(4),
			e.EncodeString(r.T), e.EncodeString(r.R), e.EncodeUint(r.V), e.EncodeString(r.O))
	}
	if err != nil {
		return err
	}
	w.homes++
	return w.counted()
}

// Mark writes a mark. Its time goes to the millisecond in version 2 (Normal).
func (w *Writer) Mark(m homes.Mark) error {
	var err error
	if w.version == OldestVersion {
		w.mac.mark(m)
		err = w.enc.EncodeMulti(encArray(8), KindMark, m.Region, uint8(0), m.Clear, m.Observer,
			timeNano(m.At), m.Version.HLC, m.Version.Origin)
	} else {
		r := MarkOf(m, w.node)
		w.mac.mark(r.Mark(w.node))
		err = w.enc.EncodeMulti(encArray(2), KindMark, &r)
	}
	if err != nil {
		return err
	}
	w.marks++
	return w.counted()
}

// Digest writes repair's digest.
func (w *Writer) Digest(d *Digest) error {
	w.mac.kind(KindDigest)
	w.mac.uint(uint64(len(d.Buckets)))
	for _, v := range d.Buckets {
		w.mac.uint(v)
	}
	w.mac.uint(d.Marks)
	w.mac.end()
	e := w.enc
	if err := errors.Join(e.EncodeArrayLen(3), e.EncodeUint(KindDigest), e.EncodeArrayLen(len(d.Buckets))); err != nil {
		return err
	}
	for _, v := range d.Buckets {
		if err := e.EncodeUint(v); err != nil {
			return err
		}
	}
	return e.EncodeUint(d.Marks)
}

// counted seals the block after SealEvery records, and flushes after FlushEvery seals.
func (w *Writer) counted() error {
	if w.block++; w.block < SealEvery {
		return nil
	}
	w.block = 0
	if err := w.enc.EncodeMulti(encArray(2), KindSeal, w.mac.sum()); err != nil {
		return err
	}
	if w.seals++; w.seals < FlushEvery {
		return nil
	}
	w.seals = 0
	return w.doFlush()
}

// Trailer ends the stream and flushes it.
func (w *Writer) Trailer() error {
	w.mac.kind(KindTrailer)
	w.mac.uint(w.homes)
	w.mac.uint(w.marks)
	w.mac.end()
	if err := w.enc.EncodeMulti(encArray(4), KindTrailer, w.homes, w.marks, w.mac.sum()); err != nil {
		return err
	}
	return w.doFlush()
}

func (w *Writer) doFlush() error {
	if w.flush == nil {
		return nil
	}
	return w.flush()
}

// encArray makes EncodeMulti write an array header.
type encArray int

var _ msgpack.CustomEncoder = encArray(0)

func (n encArray) EncodeMsgpack(e *msgpack.Encoder) error { return e.EncodeArrayLen(int(n)) }

// Reader reads one stream, record by record, verifying seals. Not safe for concurrent use.
type Reader struct {
	dec        *msgpack.Decoder
	mac        *MAC
	maxRecords int
	records    int
	version    int // the header's; 0 before it
	node       string
	homes      uint64
	marks      uint64
	strBuf     []byte
	names      map[string]string // regions and node names read, so that each is one string
}

// maxNames bounds Reader.names: past it, names are not kept (a stream of many origins).
const maxNames = 256

// Rec is one record read; Kind says which field is set.
type Rec struct {
	Kind    int
	Home    homes.Home // KindHome, KindOwnHome
	Mark    homes.Mark
	Digest  *Digest
	Node    string // header: the writer
	Version int    // header
	Hint    int    // header: homes hint, at most the reader's bound
	Sealed  bool   // seal or trailer: the block before it verified
	Last    bool   // trailer
}

// NewReader reads a stream from r, sealed with mac, of at most maxRecords homes and marks.
func NewReader(r io.Reader, mac *MAC, maxRecords int) *Reader {
	return &Reader{dec: msgpack.NewDecoder(r), mac: mac, maxRecords: maxRecords}
}

// Next returns the next record; the first must be the header. io.EOF before the trailer is
// ErrTruncated.
func (r *Reader) Next() (rec Rec, err error) {
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
	rec.Kind = int(k)
	v := max(r.version, OldestVersion) - 1
	if int(k) >= len(fields[v]) || fields[v][k] == 0 || n != fields[v][k] {
		return rec, fmt.Errorf("%w: record kind %d with %d fields", ErrBadStream, k, n)
	}
	if r.version == 0 && rec.Kind != KindHeader {
		return rec, fmt.Errorf("%w: first record is kind %d, not a header", ErrBadStream, k)
	}
	switch rec.Kind {
	case KindHeader:
		if r.version != 0 {
			return rec, fmt.Errorf("%w: a second header", ErrBadStream)
		}
		return rec, r.header(&rec)
	case KindHome, KindOwnHome:
		if r.records++; r.records > r.maxRecords {
			return rec, ErrTooLarge
		}
		if err := r.home(&rec.Home); err != nil {
			return rec, err
		}
		r.mac.home(byte(rec.Kind), rec.Home)
		r.homes++
		return rec, nil
	case KindMark:
		if r.records++; r.records > r.maxRecords {
			return rec, ErrTooLarge
		}
		if err := r.mark(&rec.Mark); err != nil {
			return rec, err
		}
		r.mac.mark(rec.Mark)
		r.marks++
		return rec, nil
	case KindDigest:
		return rec, r.digest(&rec)
	case KindSeal:
		b, err := r.dec.DecodeBytes()
		if err != nil {
			return rec, err
		}
		if !r.mac.verify(b) {
			return rec, ErrBadSeal
		}
		rec.Sealed = true
		return rec, nil
	default: // KindTrailer
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
		r.mac.kind(KindTrailer)
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
		rec.Sealed, rec.Last = true, true
		return rec, nil
	}
}

func (r *Reader) header(rec *Rec) error {
	v, err := r.dec.DecodeUint64()
	if err != nil {
		return err
	}
	if v < OldestVersion || v > Version {
		return fmt.Errorf("%w: version %d, want %d to %d", ErrBadStream, v, OldestVersion, Version)
	}
	if rec.Node, err = r.str(); err != nil {
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
	rec.Version, rec.Hint = int(v), int(min(hh, uint64(r.maxRecords)))
	r.version, r.node = int(v), rec.Node
	r.mac.kind(KindHeader)
	r.mac.uint(v)
	r.mac.str(rec.Node)
	r.mac.uint(hh)
	r.mac.uint(mh)
	r.mac.end()
	return nil
}

func (r *Reader) home(h *homes.Home) error {
	if r.version != OldestVersion {
		if n, err := r.dec.DecodeArrayLen(); err != nil || n != 4 {
			return r.shape(err, "home", n)
		}
	}
	var rh Home
	var err error
	if rh.T, err = r.str(); err != nil {
		return err
	}
	if rh.R, err = r.name(); err != nil {
		return err
	}
	if rh.V, err = r.dec.DecodeUint64(); err != nil {
		return err
	}
	if rh.O, err = r.name(); err != nil {
		return err
	}
	if r.version == OldestVersion {
		*h = homes.Home{Tenant: rh.T, Region: rh.R, Version: homes.Version{HLC: rh.V, Origin: rh.O}}
	} else {
		*h = rh.Home(r.node)
	}
	return nil
}

func (r *Reader) mark(m *homes.Mark) error {
	var rm Mark
	var err error
	if r.version == OldestVersion {
		if rm.R, err = r.name(); err != nil {
			return err
		}
		if _, err := r.dec.DecodeUint8(); err != nil { // its mark kind
			return err
		}
		if rm.C, err = r.dec.DecodeBool(); err != nil {
			return err
		}
		if rm.B, err = r.name(); err != nil {
			return err
		}
		at, err := r.dec.DecodeInt64()
		if err != nil {
			return err
		}
		if rm.V, err = r.dec.DecodeUint64(); err != nil {
			return err
		}
		if rm.O, err = r.name(); err != nil {
			return err
		}
		*m = homes.Mark{Region: rm.R, Clear: rm.C, Observer: rm.B, Version: homes.Version{HLC: rm.V, Origin: rm.O}}
		if at != 0 {
			m.At = time.Unix(0, at)
		}
		return nil
	}
	if n, err := r.dec.DecodeArrayLen(); err != nil || n != 6 {
		return r.shape(err, "mark", n)
	}
	if rm.R, err = r.name(); err != nil {
		return err
	}
	if rm.C, err = r.dec.DecodeBool(); err != nil {
		return err
	}
	if rm.B, err = r.name(); err != nil {
		return err
	}
	if rm.W, err = r.dec.DecodeInt64(); err != nil {
		return err
	}
	if rm.V, err = r.dec.DecodeUint64(); err != nil {
		return err
	}
	if rm.O, err = r.name(); err != nil {
		return err
	}
	*m = rm.Mark(r.node)
	return nil
}

// shape is the error of a record that is not an array of the length its kind has.
func (r *Reader) shape(err error, what string, n int) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: a %s record of %d fields", ErrBadStream, what, n)
}

func (r *Reader) digest(rec *Rec) error {
	n, err := r.dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != DigestBuckets {
		return fmt.Errorf("%w: digest of %d buckets, want %d", ErrBadStream, n, DigestBuckets)
	}
	d := new(Digest)
	r.mac.kind(KindDigest)
	r.mac.uint(uint64(n))
	for i := range d.Buckets {
		if d.Buckets[i], err = r.dec.DecodeUint64(); err != nil {
			return err
		}
		r.mac.uint(d.Buckets[i])
	}
	if d.Marks, err = r.dec.DecodeUint64(); err != nil {
		return err
	}
	r.mac.uint(d.Marks)
	r.mac.end()
	rec.Digest = d
	return nil
}

// str decodes a string of at most MaxString bytes without allocating more than that.
func (r *Reader) str() (string, error) {
	b, err := r.bytes()
	return string(b), err
}

// name is str for a name that repeats (a region, a node): the same string each time.
func (r *Reader) name() (string, error) {
	b, err := r.bytes()
	if err != nil {
		return "", err
	}
	if s, ok := r.names[string(b)]; ok {
		return s, nil
	}
	s := string(b)
	if r.names == nil {
		r.names = make(map[string]string)
	}
	if len(r.names) < maxNames {
		r.names[s] = s
	}
	return s, nil
}

// bytes reads a string's bytes into the reader's buffer, valid until the next read.
func (r *Reader) bytes() ([]byte, error) {
	n, err := r.dec.DecodeBytesLen()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > MaxString {
		return nil, fmt.Errorf("%w: string of %d bytes", ErrBadStream, n)
	}
	if cap(r.strBuf) < n {
		r.strBuf = make([]byte, MaxString)
	}
	b := r.strBuf[:n]
	if err := r.dec.ReadFull(b); err != nil {
		return nil, err
	}
	return b, nil
}
