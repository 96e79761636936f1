package door

import "github.com/fenec/fenec-entry/internal/httpsyntax"

// chunks reads a chunked body (RFC 9112 section 7.1) a byte at a time, but for the data,
// which it skips by count:
//
//	chunked-body = *chunk last-chunk trailer-section CRLF
//	chunk        = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//	chunk-size   = 1*HEXDIG (at most 16 digits, as net/http)
//	chunk-ext    = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//	chunk-ext-val = token / quoted-string
//
// Nothing else is taken: no whitespace between a size and its ";" (net/http refuses it too),
// no bare CR or LF, no sign or "0x", no folded trailer line, no trailer that names the
// framing. And what net/http's chunked reader refuses is refused here first, so that a body
// the door let through is one it reads: a size line of 1 KiB at most (net/http: 4 KiB), a
// trailer section that fits its 4 KiB buffer, and its bound on the bytes that are not data
// (excess). The zero value is at a chunk's first byte.
type chunks struct {
	st     chunkState
	digits int
	size   uint64 // the chunk's size, then the data left of it
	line   int    // bytes of the size line, or of the trailer line, so far
	excess int64  // net/http's count of the bytes that are not data
	tbytes int    // bytes of the trailer section so far
	tlines int    // trailer field lines
	name   [len("transfer-encoding")]byte
	nlen   int // bytes of the trailer field's name so far
}

// maxTrailer bounds a trailer section with its final CRLF: net/http's server looks for its
// end within its 4 KiB buffer and refuses a longer one, so the door refuses one that fills it.
const maxTrailer = 4095

type chunkState uint8

const (
	ckSize         chunkState = iota // the size's digits
	ckExtName0                       // after ";" and BWS: the extension's name
	ckExtName                        // in the name
	ckExtNameWS                      // BWS after the name: "=" or ";"
	ckExtVal0                        // after "=" and BWS: a token or a quoted string
	ckExtValToken                    // in a token value
	ckExtValQuoted                   // in a quoted value
	ckExtValEsc                      // after a backslash in a quoted value
	ckExtValEnd                      // after a quoted value: ";", CR, or BWS
	ckExtValWS                       // BWS after a value: ";" only
	ckSizeLF                         // the size line's CR came: LF
	ckData                           // the chunk's data
	ckDataCR                         // after the data: CR
	ckDataLF                         // after the data's CR: LF
	ckTrailer0                       // a trailer line's first byte, or the final CR
	ckTrailerName                    // in a trailer field's name
	ckTrailerValue                   // in a trailer field's value
	ckTrailerLF                      // a trailer line's CR came: LF
	ckEndLF                          // the final CR came: LF
)

// step reads b; n: the bytes of b taken. done: the body ended after n bytes; bad: the byte
// at n breaks the rules (n bytes before it are good).
func (c *chunks) step(b []byte) (n int, done, bad bool) {
	for i := 0; i < len(b); i++ {
		x := b[i]
		switch c.st {
		case ckData:
			take := uint64(len(b) - i)
			if take > c.size {
				take = c.size
			}
			c.size -= take
			i += int(take) - 1
			if c.size == 0 {
				c.st = ckDataCR
			}
			continue
		case ckDataCR:
			if x != '\r' {
				return i, false, true
			}
			c.st = ckDataLF
			continue
		case ckDataLF:
			if x != '\n' {
				return i, false, true
			}
			c.st, c.line, c.digits, c.size = ckSize, 0, 0, 0
			continue
		}
		if c.st < ckData {
			if c.line++; c.line > maxChunkLine {
				return i, false, true
			}
		} else {
			c.line++
			c.tbytes++
			if c.line > MaxFieldLine || c.tbytes > maxTrailer {
				return i, false, true
			}
		}
		switch c.st {
		case ckSize:
			if v, ok := httpsyntax.HexValue(x); ok {
				if c.digits++; c.digits > 16 || c.size > maxLength>>4 {
					return i, false, true // net/http's 16 digits; a size past 2^62
				}
				if c.size = c.size<<4 | uint64(v); c.size > maxLength {
					return i, false, true
				}
				continue
			}
			if c.digits == 0 {
				return i, false, true
			}
			switch x {
			case '\r':
				c.st = ckSizeLF
			case ';':
				c.st = ckExtName0
			default:
				return i, false, true
			}
		case ckExtName0:
			switch {
			case x == ' ' || x == '\t':
			case httpsyntax.IsTokenByte(x):
				c.st = ckExtName
			default:
				return i, false, true
			}
		case ckExtName:
			switch {
			case httpsyntax.IsTokenByte(x):
			case x == ' ' || x == '\t':
				c.st = ckExtNameWS
			case x == '=':
				c.st = ckExtVal0
			case x == ';':
				c.st = ckExtName0
			case x == '\r':
				c.st = ckSizeLF
			default:
				return i, false, true
			}
		case ckExtNameWS:
			switch x {
			case ' ', '\t':
			case '=':
				c.st = ckExtVal0
			case ';':
				c.st = ckExtName0
			default:
				return i, false, true
			}
		case ckExtVal0:
			switch {
			case x == ' ' || x == '\t':
			case x == '"':
				c.st = ckExtValQuoted
			case httpsyntax.IsTokenByte(x):
				c.st = ckExtValToken
			default:
				return i, false, true
			}
		case ckExtValToken:
			switch {
			case httpsyntax.IsTokenByte(x):
			case x == ' ' || x == '\t':
				c.st = ckExtValWS
			case x == ';':
				c.st = ckExtName0
			case x == '\r':
				c.st = ckSizeLF
			default:
				return i, false, true
			}
		case ckExtValQuoted:
			switch {
			case x == '"':
				c.st = ckExtValEnd
			case x == '\\':
				c.st = ckExtValEsc
			case httpsyntax.IsFieldValueByte(x): // qdtext and obs-text
			default:
				return i, false, true
			}
		case ckExtValEsc:
			if !httpsyntax.IsFieldValueByte(x) {
				return i, false, true
			}
			c.st = ckExtValQuoted
		case ckExtValEnd:
			switch x {
			case ' ', '\t':
				c.st = ckExtValWS
			case ';':
				c.st = ckExtName0
			case '\r':
				c.st = ckSizeLF
			default:
				return i, false, true
			}
		case ckExtValWS:
			switch x {
			case ' ', '\t':
			case ';':
				c.st = ckExtName0
			default:
				return i, false, true
			}
		case ckSizeLF:
			if x != '\n' {
				return i, false, true
			}
			// As net/http: 16 bytes of overhead a chunk, and twice its data, are free.
			c.excess = max(c.excess+int64(c.line)-16-2*int64(c.size), 0)
			if c.excess > 16<<10 {
				return i, false, true
			}
			c.line = 0
			if c.size == 0 {
				c.st = ckTrailer0
			} else {
				c.st = ckData
			}
		case ckTrailer0:
			switch {
			case x == '\r':
				c.st = ckEndLF
			case httpsyntax.IsTokenByte(x):
				if c.tlines++; c.tlines > MaxFields {
					return i, false, true
				}
				c.st = ckTrailerName
				c.name[0], c.nlen = x|0x20, 1
			default: // a folded line, a bare LF, no name
				return i, false, true
			}
		case ckTrailerName:
			switch {
			case httpsyntax.IsTokenByte(x):
				if c.nlen < len(c.name) {
					c.name[c.nlen] = x | 0x20
				}
				c.nlen++
			case x == ':':
				if c.nlen <= len(c.name) {
					switch string(c.name[:c.nlen]) {
					case "transfer-encoding", "content-length", "trailer": // net/http: a bad trailer key
						return i, false, true
					}
				}
				c.st = ckTrailerValue
			default:
				return i, false, true
			}
		case ckTrailerValue:
			switch {
			case x == '\r':
				c.st = ckTrailerLF
			case !httpsyntax.IsFieldValueByte(x):
				return i, false, true
			}
		case ckTrailerLF:
			if x != '\n' {
				return i, false, true
			}
			c.st, c.line = ckTrailer0, 0
		case ckEndLF:
			if x != '\n' {
				return i, false, true
			}
			return i + 1, true, false
		}
	}
	return len(b), false, false
}
