package state

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/homes/record"
)

// The file, format 2: a header of its own, then the stream every table travels in (package
// record), sealed with the file's own key.
//
//	magic    "FENECHOM" (8 bytes)
//	format   1 byte: 2
//	written  8 bytes, little endian: when, Unix milliseconds
//	stream   a record stream of version 2 whose header names the entry that wrote it: its
//	         homes oldest first, an own home for each it heard from a router itself, a home
//	         for each a peer told it; no marks; the trailer last, nothing after it.
//
// The seal is an HMAC under a key every entry knows, over the written time (as the stream's
// nonce) and the stream: it finds damage (a bit flipped, a file cut short) as a checksum
// would; it is no secret. Format 1, a file of earlier builds, is
// foreign: it is moved aside and the entry starts empty (docs/DECISIONS.md).
const (
	magic         = "FENECHOM"
	formatVersion = 2
	headerSize    = len(magic) + 1 + 8
	maxNameLen    = 128 // node names, in bytes (gossip's limit)
)

// fileKey seals the file's stream, path its name in the seal.
var fileKey = []byte("fenec-entry state file")

const sealPath = HomesFile

// ErrForeign: the file is not a state file of this format (another magic or format).
var ErrForeign = errors.New("state: not a fenec-entry state file of format 2")

// ErrDamaged: the file starts as a state file but is truncated or does not check.
var ErrDamaged = errors.New("state: damaged")

// header is what a file says of itself.
type header struct {
	Node    string
	Written time.Time
}

// fileHome is one home read back, with the source it had.
type fileHome struct {
	Home   homes.Home
	Source homes.Source
}

// encoder writes one file.
type encoder struct {
	bw *bufio.Writer
	sw *record.Writer
}

func newEncoder(w io.Writer, h header, homesHint int) (*encoder, error) {
	if h.Node == "" || len(h.Node) > maxNameLen {
		return nil, fmt.Errorf("node name %q: want 1 to %d bytes", h.Node, maxNameLen)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	head := append([]byte(magic), formatVersion)
	bw.Write(binary.LittleEndian.AppendUint64(head, uint64(h.Written.UnixMilli())))
	mac := record.NewMAC(fileKey, strconv.FormatInt(h.Written.UnixMilli(), 10), sealPath)
	e := &encoder{bw: bw, sw: record.NewWriter(bw, mac, record.Version, nil)}
	return e, e.sw.Header(h.Node, homesHint, 0)
}

// home writes h as src: false (nothing written) for a home no reader would take back.
func (e *encoder) home(h homes.Home, src homes.Source) (bool, error) {
	if h.Tenant == "" || len(h.Tenant) > record.MaxString || len(h.Version.Origin) > maxNameLen {
		return false, nil
	}
	if src == homes.SourceLocal {
		return true, e.sw.OwnHome(h)
	}
	return true, e.sw.Home(h)
}

func (e *encoder) close() error {
	if err := e.sw.Trailer(); err != nil {
		return err
	}
	return e.bw.Flush()
}

func damaged(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDamaged, fmt.Sprintf(format, args...))
}

// decode reads a whole file, calling fn (if not nil) for each home in order, and returns the
// header and the number of homes. Errors wrap ErrForeign or ErrDamaged, except those of r.
// fn sees a home only once the block holding it is sealed.
func decode(r io.Reader, fn func(*fileHome) error) (h header, n uint64, err error) {
	er := &errReader{r: r}
	defer func() {
		if err != nil && er.err != nil {
			err = er.err // the file could not be read: not damage
		}
	}()
	br := bufio.NewReaderSize(er, 64<<10)
	head := make([]byte, headerSize)
	if n, err := io.ReadFull(br, head); err != nil {
		if n < len(magic)+1 || string(head[:len(magic)]) != magic {
			return h, 0, fmt.Errorf("%w (%d bytes)", ErrForeign, n)
		}
		if err != io.ErrUnexpectedEOF && err != io.EOF {
			return h, 0, err
		}
	}
	if string(head[:len(magic)]) != magic {
		return h, 0, fmt.Errorf("%w (no %s at its start)", ErrForeign, magic)
	}
	if head[len(magic)] != formatVersion {
		return h, 0, fmt.Errorf("%w (format %d)", ErrForeign, head[len(magic)])
	}
	h.Written = time.UnixMilli(int64(binary.LittleEndian.Uint64(head[len(magic)+1:])))
	// No bound but the file's: a table held more homes than --homes now allows is read
	// whole (the restore keeps the newest); a block of 256 is what is held at once.
	mac := record.NewMAC(fileKey, strconv.FormatInt(h.Written.UnixMilli(), 10), sealPath)
	sr := record.NewReader(br, mac, math.MaxInt)
	first, err := sr.Next()
	if err != nil {
		return h, 0, streamErr(err)
	}
	if first.Version != record.Version {
		return h, 0, damaged("stream version %d in a format %d file", first.Version, formatVersion)
	}
	h.Node = first.Node
	var held []fileHome
	for {
		x, err := sr.Next()
		if err != nil {
			return h, n, streamErr(err)
		}
		switch x.Kind {
		case record.KindHome, record.KindOwnHome:
			src := homes.SourceGossip
			if x.Kind == record.KindOwnHome {
				src = homes.SourceLocal
			}
			held = append(held, fileHome{Home: x.Home, Source: src})
		case record.KindSeal, record.KindTrailer:
			for i := range held {
				if fn != nil {
					if err := fn(&held[i]); err != nil {
						return h, n, err
					}
				}
				n++
			}
			held = held[:0]
			if x.Last {
				if _, err := br.ReadByte(); err != io.EOF {
					return h, n, damaged("data after the end")
				}
				return h, n, nil
			}
		default:
			return h, n, damaged("a record of kind %d", x.Kind)
		}
	}
}

// streamErr is a stream's error as the file's: whatever the stream refused is damage (an
// error of the file's reading is decode's to tell).
func streamErr(err error) error {
	return fmt.Errorf("%w: %v", ErrDamaged, err)
}

// errReader keeps the first error of its reader other than the end.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}
