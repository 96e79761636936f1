package standin

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Client mark results, as Seen.ClientMark reports them.
const (
	MarkNamed  = "named"    // a valid mark, signed within 60 s of now
	MarkBad    = "bad_mark" // malformed, or not signed with the entry token
	MarkStale  = "stale"    // validly signed, more than 60 s from now either way
	MarkAbsent = "absent"   // no Fenec-Client
)

// markSkew is how far from now a mark's time may be, either way.
const markSkew = 60 * time.Second

// MarkCounts counts the Fenec-Client marks of the requests received from outside (without
// Fenec-Router), every fault mode included; relayed requests are counted once, at the router
// that received them.
type MarkCounts struct {
	Named   uint64 `json:"named"`
	BadMark uint64 `json:"bad_mark"`
	Stale   uint64 `json:"stale"`
	Absent  uint64 `json:"absent"`
}

// markCounter checks Fenec-Client against the entry token and counts the results. With no
// token it checks and counts nothing.
type markCounter struct {
	token []byte // set once by Start

	mu sync.Mutex // guards n
	n  MarkCounts
}

// check classifies the Fenec-Client values of one request received from outside, counts the
// result and returns it; "" without a token.
//
// The header is "<address> <unix-seconds> <mark>", the mark being the first 16 bytes of
// HMAC-SHA256 under the token of "fenec-client <address> <unix-seconds>", base64url without
// padding; the address is an IP, IPv6 without brackets.
func (m *markCounter) check(values []string, now time.Time) string {
	if m.token == nil {
		return ""
	}
	res := verifyMark(m.token, values, now)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch res {
	case MarkNamed:
		m.n.Named++
	case MarkStale:
		m.n.Stale++
	case MarkAbsent:
		m.n.Absent++
	default:
		m.n.BadMark++
	}
	return res
}

func verifyMark(token []byte, values []string, now time.Time) string {
	if len(values) == 0 {
		return MarkAbsent
	}
	if len(values) > 1 {
		return MarkBad
	}
	fields := strings.Split(values[0], " ")
	if len(fields) != 3 {
		return MarkBad
	}
	addr, secs, mark := fields[0], fields[1], fields[2]
	if _, err := netip.ParseAddr(addr); err != nil {
		return MarkBad // "[::1]" included: IPv6 goes without brackets
	}
	unix, err := strconv.ParseInt(secs, 10, 64)
	if err != nil {
		return MarkBad
	}
	got, err := base64.RawURLEncoding.DecodeString(mark)
	if err != nil {
		return MarkBad
	}
	h := hmac.New(sha256.New, token)
	h.Write([]byte("fenec-client " + addr + " " + secs))
	if !hmac.Equal(got, h.Sum(nil)[:16]) {
		return MarkBad
	}
	if d := now.Sub(time.Unix(unix, 0)); d > markSkew || d < -markSkew {
		return MarkStale
	}
	return MarkNamed
}

func (m *markCounter) counts() MarkCounts {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

func (m *markCounter) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n = MarkCounts{}
}
