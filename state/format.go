package state

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"time"
	"unicode/utf8"

	"github.com/fenec/fenec-entry/homes"
)

// The file, version 1. Integers are unsigned varints (encoding/binary's Uvarint) unless said
// otherwise; a string is its length as a varint, then its bytes.
//
//	magic    "FENECHOM" (8 bytes)
//	version  1 byte: 1
//	node     string: the --node of the entry that wrote it
//	written  8 bytes, little endian: when, Unix milliseconds
//	regions  varint n, then n strings: the configured regions, by index
//	records  oldest first, each:
//	           tag     1 byte: 1
//	           tenant  string
//	           region  varint: an index into regions
//	           source  1 byte: 1 local (heard by the writer), 2 gossip (told by a peer)
//	           hlc     8 bytes, little endian: Version.HLC
//	           origin  varint k: 0 = a string follows (Version.Origin, and it becomes the next
//	                   entry of a dictionary of at most maxOrigins), k > 0 = dictionary entry k-1
//	end      tag 0, varint: the number of records, then CRC-32C (Castagnoli) of every byte
//	         before it, 4 bytes little endian; nothing after it.
const (
	magic         = "FENECHOM"
	formatVersion = 1

	tagHome = 1
	tagEnd  = 0

	maxNameLen    = 128 // node and origin names, in bytes (gossip's limit)
	maxTenantLen  = 255 // as the request path allows
	maxOrigins    = 4096
	maxRecordSize = 1 + 2 + maxTenantLen + 1 + 1 + 8 + 2 + maxNameLen
)

// ErrForeign: the file is not a state file of this format (another magic or format version).
var ErrForeign = errors.New("state: not a fenec-entry state file of format 1")

// ErrDamaged: the file starts as a state file but is truncated or does not check.
var ErrDamaged = errors.New("state: damaged")

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// header is what a file says of itself.
type header struct {
	Node    string
	Written time.Time
	Regions []string
}

// record is one home as stored.
type record struct {
	Home   homes.Home
	Source homes.Source
}

// encoder writes a state file to w, summing what it writes. Not safe for concurrent use.
type encoder struct {
	w       *bufio.Writer
	crc     hash.Hash32
	buf     []byte
	regions map[string]int
	origins map[string]int
	n       uint64
}

// crcWriter sums what passes through it.
type crcWriter struct {
	w   io.Writer
	crc hash.Hash32
}

func (c crcWriter) Write(p []byte) (int, error) {
	c.crc.Write(p)
	return c.w.Write(p)
}

func newEncoder(w io.Writer, h header) (*encoder, error) {
	crc := crc32.New(crcTable)
	e := &encoder{
		w:       bufio.NewWriterSize(crcWriter{w, crc}, 64<<10),
		crc:     crc,
		buf:     make([]byte, 0, maxRecordSize),
		regions: make(map[string]int, len(h.Regions)),
		origins: make(map[string]int),
	}
	b := append(e.buf[:0], magic...)
	b = append(b, formatVersion)
	b = appendString(b, h.Node)
	b = binary.LittleEndian.AppendUint64(b, uint64(h.Written.UnixMilli()))
	b = binary.AppendUvarint(b, uint64(len(h.Regions)))
	if _, err := e.w.Write(b); err != nil {
		return nil, err
	}
	for i, r := range h.Regions {
		e.regions[r] = i
		if _, err := e.w.Write(appendString(e.buf[:0], r)); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// home writes one record and reports whether it did. A home the decoder would refuse (a
// region the header does not list, a name out of bounds) is not written.
func (e *encoder) home(h homes.Home, src homes.Source) (bool, error) {
	ri, ok := e.regions[h.Region]
	if !ok || !validName(h.Tenant, maxTenantLen) || !validName(h.Version.Origin, maxNameLen) {
		return false, nil
	}
	if src != homes.SourceLocal {
		src = homes.SourceGossip
	}
	b := append(e.buf[:0], tagHome)
	b = appendString(b, h.Tenant)
	b = binary.AppendUvarint(b, uint64(ri))
	b = append(b, byte(src))
	b = binary.LittleEndian.AppendUint64(b, h.Version.HLC)
	if k, ok := e.origins[h.Version.Origin]; ok {
		b = binary.AppendUvarint(b, uint64(k+1))
	} else {
		b = append(b, 0)
		b = appendString(b, h.Version.Origin)
		if len(e.origins) < maxOrigins {
			e.origins[h.Version.Origin] = len(e.origins)
		}
	}
	e.buf = b[:0]
	e.n++
	_, err := e.w.Write(b)
	return err == nil, err
}

func validName(s string, max int) bool { return s != "" && len(s) <= max && utf8.ValidString(s) }

// close writes the end and flushes; the caller syncs and closes the file.
func (e *encoder) close() error {
	b := append(e.buf[:0], tagEnd)
	b = binary.AppendUvarint(b, e.n)
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	if err := e.w.Flush(); err != nil {
		return err
	}
	// The sum covers everything flushed so far; that it sums its own bytes too is harmless.
	sum := binary.LittleEndian.AppendUint32(nil, e.crc.Sum32())
	_, err := e.w.Write(sum)
	if err == nil {
		err = e.w.Flush()
	}
	return err
}

// decoder reads a state file, checking it as it goes.
type decoder struct {
	r       *bufio.Reader
	crc     hash.Hash32
	buf     []byte
	origins []string
	regions []string
}

func newDecoder(r io.Reader) *decoder {
	return &decoder{r: bufio.NewReaderSize(r, 64<<10), crc: crc32.New(crcTable), buf: make([]byte, maxRecordSize)}
}

func damaged(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDamaged, fmt.Sprintf(format, args...))
}

// full reads exactly len(p) bytes, summed; a short file is damaged.
func (d *decoder) full(p []byte, what string) error {
	if _, err := io.ReadFull(d.r, p); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return damaged("truncated in %s", what)
		}
		return err
	}
	d.crc.Write(p)
	return nil
}

func (d *decoder) byte(what string) (byte, error) {
	if err := d.full(d.buf[:1], what); err != nil {
		return 0, err
	}
	return d.buf[0], nil
}

func (d *decoder) uvarint(what string) (uint64, error) {
	var x uint64
	for i, s := 0, uint(0); i < binary.MaxVarintLen64; i, s = i+1, s+7 {
		c, err := d.byte(what)
		if err != nil {
			return 0, err
		}
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			return x | uint64(c)<<s, nil
		}
		x |= uint64(c&0x7f) << s
	}
	return 0, damaged("bad varint in %s", what)
}

func (d *decoder) uint64(what string) (uint64, error) {
	if err := d.full(d.buf[:8], what); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(d.buf[:8]), nil
}

// string reads a string of 1 to max bytes of valid UTF-8 (0 bytes if empty is allowed).
func (d *decoder) string(what string, max int, empty bool) (string, error) {
	n, err := d.uvarint(what)
	if err != nil {
		return "", err
	}
	if n > uint64(max) || n == 0 && !empty {
		return "", damaged("%s of %d bytes (want 1 to %d)", what, n, max)
	}
	b := d.buf[:n]
	if err := d.full(b, what); err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", damaged("%s is not UTF-8", what)
	}
	return string(b), nil
}

// header reads the magic, the format version and the header.
func (d *decoder) header() (header, error) {
	var h header
	b := d.buf[:len(magic)+1]
	if _, err := io.ReadFull(d.r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return h, fmt.Errorf("%w (%d bytes: too short)", ErrForeign, len(b))
		}
		return h, err
	}
	if string(b[:len(magic)]) != magic {
		return h, fmt.Errorf("%w (no magic)", ErrForeign)
	}
	if b[len(magic)] != formatVersion {
		return h, fmt.Errorf("%w (format %d)", ErrForeign, b[len(magic)])
	}
	d.crc.Write(b)
	var err error
	if h.Node, err = d.string("node name", maxNameLen, true); err != nil {
		return h, err
	}
	ms, err := d.uint64("write time")
	if err != nil {
		return h, err
	}
	h.Written = time.UnixMilli(int64(ms))
	n, err := d.uvarint("region count")
	if err != nil {
		return h, err
	}
	if n > homes.MaxRegions {
		return h, damaged("%d regions (at most %d)", n, homes.MaxRegions)
	}
	h.Regions = make([]string, n)
	for i := range h.Regions {
		if h.Regions[i], err = d.string("region name", homes.MaxRegionNameLen, false); err != nil {
			return h, err
		}
	}
	d.regions = h.Regions
	return h, nil
}

// next reads the next record into r, or returns io.EOF after checking the end.
func (d *decoder) next(r *record, count uint64) error {
	tag, err := d.byte("record tag")
	if err != nil {
		return err
	}
	switch tag {
	case tagEnd:
		return d.end(count)
	case tagHome:
	default:
		return damaged("record %d: tag %d", count, tag)
	}
	if r.Home.Tenant, err = d.string("tenant", maxTenantLen, false); err != nil {
		return err
	}
	ri, err := d.uvarint("region")
	if err != nil {
		return err
	}
	if ri >= uint64(len(d.regions)) {
		return damaged("record %d: region %d of %d", count, ri, len(d.regions))
	}
	r.Home.Region = d.regions[ri]
	src, err := d.byte("source")
	if err != nil {
		return err
	}
	switch r.Source = homes.Source(src); r.Source {
	case homes.SourceLocal, homes.SourceGossip:
	default:
		return damaged("record %d: source %d", count, src)
	}
	if r.Home.Version.HLC, err = d.uint64("version"); err != nil {
		return err
	}
	k, err := d.uvarint("origin")
	if err != nil {
		return err
	}
	if k == 0 {
		o, err := d.string("origin", maxNameLen, false)
		if err != nil {
			return err
		}
		if len(d.origins) < maxOrigins {
			d.origins = append(d.origins, o)
		}
		r.Home.Version.Origin = o
	} else {
		if k > uint64(len(d.origins)) {
			return damaged("record %d: origin %d of %d", count, k, len(d.origins))
		}
		r.Home.Version.Origin = d.origins[k-1]
	}
	return nil
}

// end checks the record count, the sum and that nothing follows.
func (d *decoder) end(count uint64) error {
	n, err := d.uvarint("record count")
	if err != nil {
		return err
	}
	if n != count {
		return damaged("says %d records, holds %d", n, count)
	}
	want := d.crc.Sum32()
	b := d.buf[:4]
	if _, err := io.ReadFull(d.r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return damaged("truncated in the checksum")
		}
		return err
	}
	if got := binary.LittleEndian.Uint32(b); got != want {
		return damaged("checksum %08x, want %08x", got, want)
	}
	if _, err := d.r.ReadByte(); err != io.EOF {
		if err == nil {
			return damaged("data after the end")
		}
		return err
	}
	return io.EOF
}

// decode reads a whole state file from r, calling fn (if not nil) for each record in file
// order. It returns the header, the number of records, and an error wrapping ErrForeign,
// ErrDamaged or the reader's own; fn's error ends it too. The record fn gets is reused.
func decode(r io.Reader, fn func(*record) error) (header, uint64, error) {
	d := newDecoder(r)
	h, err := d.header()
	if err != nil {
		return h, 0, err
	}
	var rec record
	var n uint64
	for {
		if err := d.next(&rec, n); err != nil {
			if err == io.EOF {
				return h, n, nil
			}
			return h, n, err
		}
		n++
		if fn != nil {
			if err := fn(&rec); err != nil {
				return h, n, err
			}
		}
	}
}
