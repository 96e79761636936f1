package httpsyntax

import "strings"

// ListHasToken reports whether one of the comma-separated lists in values (a header's values:
// Connection, Expect) has token as an element, ASCII case-insensitively (RFC 9110 section
// 5.6.1): httpguts.HeaderValuesContainsToken. An element with a byte past ASCII is no token.
func ListHasToken(values []string, token string) bool {
	for _, v := range values {
		for {
			elem, rest, more := strings.Cut(v, ",")
			if tokenEqual(TrimOWS(elem), token) {
				return true
			}
			if !more {
				break
			}
			v = rest
		}
	}
	return false
}

// LooseToken is net/http's hasToken, the match its server makes for "Connection: close",
// "Connection: keep-alive" on HTTP/1.0 and "Expect: 100-continue": whether token (ASCII, lower
// case) is in v, ASCII case-insensitively, between SP, HTAB, comma or the ends, so that
// "0 keep-alive" has it, where ListHasToken finds no element. httpguts has no such rule.
func LooseToken(v, token string) bool {
	if len(token) > len(v) || token == "" {
		return false
	}
	if v == token {
		return true
	}
	boundary := func(b byte) bool { return b == ' ' || b == ',' || b == '\t' }
	for sp := 0; sp <= len(v)-len(token); sp++ {
		if b := v[sp]; b != token[0] && b|0x20 != token[0] {
			continue
		}
		if sp > 0 && !boundary(v[sp-1]) {
			continue
		}
		if end := sp + len(token); end != len(v) && !boundary(v[end]) {
			continue
		}
		if equalFold(v[sp:sp+len(token)], token) {
			return true
		}
	}
	return false
}

// HasFoldPrefix reports whether s begins with prefix, ASCII case-insensitively (a header name's
// or a scheme's case does not matter).
func HasFoldPrefix(s, prefix string) bool {
	return len(s) >= len(prefix) && equalFold(s[:len(prefix)], prefix)
}

// equalFold reports whether a and b are the same but for the case of ASCII letters. Unlike
// strings.EqualFold it folds no other letter: "ſ" (U+017F) is not "s", nor "K" (U+212A) "k".
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

// tokenEqual is equalFold for a list element, which is no token if it holds a byte past ASCII
// (httpguts' tokenEqual).
func tokenEqual(elem, token string) bool {
	if len(elem) != len(token) {
		return false
	}
	for i := 0; i < len(elem); i++ {
		if elem[i] >= 0x80 || lower(elem[i]) != lower(token[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
