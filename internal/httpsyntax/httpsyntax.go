// Package httpsyntax holds the byte-level rules of HTTP/1.1 heads that the entry's own head
// parsers share (h1's plain requests, the proxy's plain router answers): both parse only what
// is plainly valid and leave everything else to net/http, so these rules are net/http's own
// (textproto's and httpguts'), and each parser is held to net/http by a differential fuzz test.
// It must not decide what is refused at the door (package door's): it says what is valid.
package httpsyntax

// IsTokenByte reports whether c may be in an RFC 9110 token (a header field name, a method).
func IsTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
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
		if !IsTokenByte(c) {
			return false
		}
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return false
		}
		upper = c == '-'
	}
	return true
}

// FieldValue is v, a header line's text after its colon, trimmed of SP and HTAB at both ends
// as textproto does; false: v holds a control byte other than HTAB, or DEL, which net/http
// refuses (httpguts.ValidHeaderFieldValue).
func FieldValue(v string) (string, bool) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return "", false
		}
	}
	i, j := 0, len(v)
	for i < j && (v[i] == ' ' || v[i] == '\t') {
		i++
	}
	for j > i && (v[j-1] == ' ' || v[j-1] == '\t') {
		j--
	}
	return v[i:j], true
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
