//go:build linux

package h1

import (
	"strings"

	"github.com/fenec/fenec-entry/internal/httpsyntax"
)

// isTokenByte reports whether b may be in an RFC 9110 token (a header field name).
func isTokenByte(b byte) bool { return httpsyntax.IsTokenByte(b) }

// validFieldName reports whether k is a valid header field name.
func validFieldName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !isTokenByte(k[i]) {
			return false
		}
	}
	return true
}

// hasToken reports whether the comma-separated values hold token, case-insensitively.
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

// looseToken is net/http's hasToken: whether token (ASCII, lower case) is in v, case-
// insensitively, between SP, HTAB, comma or the ends (so "0 keep-alive" has it).
func looseToken(v, token string) bool {
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
		if strings.EqualFold(v[sp:sp+len(token)], token) {
			return true
		}
	}
	return false
}

// validHost reports whether h holds only bytes a Host header may (httpguts.ValidHostHeader).
func validHost[T string | []byte](h T) bool {
	for i := 0; i < len(h); i++ {
		b := h[i]
		switch {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case strings.IndexByte("!$%&()*+,-.:;=[]'_~", b) >= 0:
		default:
			return false
		}
	}
	return true
}
