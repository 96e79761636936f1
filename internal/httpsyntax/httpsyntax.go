// Package httpsyntax holds the byte-level rules of HTTP/1.1 (RFC 9110, RFC 9112, and RFC 3986
// for a Host) that every reader of HTTP in the entry shares: the door's strict reader, h1's and
// the proxy's plain head parsers, the proxy's header rewriting and its configuration. Each rule
// is written here once; the rules read per byte are tables. Where golang.org/x/net/http/httpguts
// has the same rule, FuzzHTTPGuts holds this one to it, and each difference is in the rule's
// comment.
//
// It says what is valid. What is refused and how is its callers': package door's at the door,
// net/http's behind the plain parsers, which take only what is plainly valid and leave the rest
// to net/http.
package httpsyntax

// Byte classes, by table: the door and the plain parsers read every byte of every head.
var (
	tchar  [256]bool // RFC 9110 section 5.6.2: a token's bytes
	fvchar [256]bool // RFC 9110 section 5.5: a field value's bytes (SP, HTAB, VCHAR, obs-text)
	hostc  [256]bool // RFC 3986 section 3.2.2: a reg-name's bytes but '%' (unreserved, sub-delims)
)

func init() {
	for c := range 256 {
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		tchar[c], hostc[c] = alnum, alnum
		fvchar[c] = c >= ' ' && c != 0x7f || c == '\t'
	}
	for _, c := range []byte("!#$%&'*+-.^_`|~") {
		tchar[c] = true
	}
	for _, c := range []byte("-._~!$&'()*+,;=") {
		hostc[c] = true
	}
}

// IsTokenByte reports whether c may be in a token (tchar): a header field name, a method, a
// transfer coding, a chunk extension's name. httpguts.IsTokenRune for the bytes below 0x80;
// none above is.
func IsTokenByte(c byte) bool { return tchar[c] }

// Token reports whether s is a token: one or more tchar. A header field name, a method and a
// transfer coding are tokens (httpguts.ValidHeaderFieldName).
func Token[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if !tchar[s[i]] {
			return false
		}
	}
	return len(s) > 0
}

// IsFieldValueByte reports whether c may be in a field value: not a control byte but HTAB,
// nor DEL. The same bytes make a reason phrase, a quoted string's text (less '"' and '\')
// and a quoted pair's second byte.
func IsFieldValueByte(c byte) bool { return fvchar[c] }

// ValidFieldValue reports whether every byte of v may be in a field value
// (httpguts.ValidHeaderFieldValue). It says nothing of the SP and HTAB at its ends, which are
// not part of the value (TrimOWS).
func ValidFieldValue[T string | []byte](v T) bool {
	for i := 0; i < len(v); i++ {
		if !fvchar[v[i]] {
			return false
		}
	}
	return true
}

// TrimOWS is v without the SP and HTAB at both ends (RFC 9110 section 5.6.3), as textproto
// trims a field value.
func TrimOWS[T string | []byte](v T) T {
	i, j := 0, len(v)
	for i < j && (v[i] == ' ' || v[i] == '\t') {
		i++
	}
	for j > i && (v[j-1] == ' ' || v[j-1] == '\t') {
		j--
	}
	return v[i:j]
}

// FieldValue is v, a header line's text after its colon, trimmed (TrimOWS); false: v holds a
// byte no field value may (ValidFieldValue), which net/http refuses.
func FieldValue(v string) (string, bool) {
	if !ValidFieldValue(v) {
		return "", false
	}
	return TrimOWS(v), true
}

// HexValue is the value of the hex digit c (HEXDIG, either case); false: c is not one.
func HexValue(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// PlainName reports whether name is a header name of token characters already in canonical
// form (upper case first and after each '-', lower case elsewhere), as
// textproto.CanonicalMIMEHeaderKey would leave it, so that it can be used as it is.
func PlainName(name string) bool {
	if name == "" {
		return false
	}
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !tchar[c] {
			return false
		}
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return false
		}
		upper = c == '-'
	}
	return true
}

// AddValue adds value to h[name] as textproto.ReadMIMEHeader does: a name's first value is
// taken from strs, one backing array for all of a head's values (so a head costs one
// allocation for them), further values are appended.
func AddValue(h map[string][]string, strs *[]string, name, value string) {
	if vv := h[name]; vv == nil && len(*strs) > 0 {
		h[name], *strs = (*strs)[:1:1], (*strs)[1:]
		h[name][0] = value
	} else {
		h[name] = append(vv, value)
	}
}
