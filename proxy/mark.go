package proxy

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"strconv"
	"sync"
)

// clientMarker makes Fenec-Client values: "<address> <unix-seconds> <mark>",
// mark = base64url (no padding) of the first 16 bytes of
// HMAC-SHA256(entry token, "fenec-client <address> <unix-seconds>").
// Safe for concurrent use; the HMAC states are pooled.
type clientMarker struct {
	pool sync.Pool // of hash.Hash keyed with the token
}

func newClientMarker(token string) *clientMarker {
	key := []byte(token)
	return &clientMarker{pool: sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

const markPrefix = "fenec-client "

// mark returns the header value for addr (IPv6 without brackets) at unix.
func (m *clientMarker) mark(addr string, unix int64) string {
	var tbuf [20]byte
	ts := strconv.AppendInt(tbuf[:0], unix, 10)

	// The signed text: "fenec-client <address> <unix-seconds>".
	var sbuf [128]byte
	msg := append(append(append(append(sbuf[:0], markPrefix...), addr...), ' '), ts...)

	h := m.pool.Get().(hash.Hash)
	h.Reset()
	h.Write(msg)
	var sum [sha256.Size]byte
	full := h.Sum(sum[:0])
	m.pool.Put(h)

	// The header: "<address> <unix-seconds> <mark>".
	out := make([]byte, 0, len(addr)+1+len(ts)+1+22)
	out = append(append(append(out, addr...), ' '), ts...)
	out = append(out, ' ')
	out = base64.RawURLEncoding.AppendEncode(out, full[:16])
	return string(out)
}
