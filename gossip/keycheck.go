package gossip

import (
	"bytes"
	"net"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// keyMismatchReasons are memberlist's words for a stream sealed with a key this entry does
// not hold, or sealed when it holds none, or not sealed when it holds one. memberlist gives
// them only as text (in its log, and in Join's error), so they are matched as text; the test
// that runs two entries with different keys, and one keyed beside one in clear, fails if a
// memberlist upgrade changes them (TestWrongKeySaidOnBothSides).
var keyMismatchReasons = []string{
	"no installed keys could decrypt the message",
	"remote state is encrypted and encryption is not configured",
	"encryption is configured but remote state is not encrypted",
}

// keyMismatch reports whether an error text names one of keyMismatchReasons.
func keyMismatch(text string) bool {
	for _, r := range keyMismatchReasons {
		if strings.Contains(text, r) {
			return true
		}
	}
	return false
}

// memberlist's log lines of a message it could not open with this entry's keys: a stream
// ("failed to receive: <reason> from=<addr>") and a packet ("Decrypt packet failed: <reason>
// from=<addr>"; any reason there is a packet this entry's keys do not open).
var (
	streamRefused = []byte("memberlist: failed to receive: ")
	packetRefused = []byte("memberlist: Decrypt packet failed: ")
	fromMarker    = []byte(" from=")
)

// maxKeyPeers bounds the hosts keyReport names: past it, a new host is counted and, once, one
// line says that further ones are not named.
const maxKeyPeers = 256

// keyReport says that a peer holds another gossip key, or none: at warn, once per peer host
// (a stream's address has a fresh port each time, so the host names the peer), on whichever
// side sees it first, and counts every mismatch in fenec_entry_gossip_key_mismatches_total.
// Safe for concurrent use.
type keyReport struct {
	log     zerolog.Logger
	counter prometheus.Counter

	mu    sync.Mutex
	named map[string]struct{} // hosts said, at most maxKeyPeers
	full  bool                // the "not named further" line was said
}

// keyHint is what every key mismatch line tells the operator.
const keyHint = "give every entry the same --gossip-key (FENEC_ENTRY_GOSSIP_KEY); during a rotation, install the new key on every entry before using it"

func newKeyReport(log zerolog.Logger) *keyReport {
	return &keyReport{
		log: log,
		counter: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_entry_gossip_key_mismatches_total",
			Help: "Gossip messages from a peer this entry could not open, and this entry's joins a peer refused, because the two hold different gossip keys (or one has none). Each such peer is named once in a warn line.",
		}),
		named: make(map[string]struct{}),
	}
}

// first counts one mismatch with host and reports whether host is to be named now: the first
// time it is seen, while fewer than maxKeyPeers are named.
func (k *keyReport) first(host string) bool {
	k.counter.Inc()
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.named[host]; ok {
		return false
	}
	if len(k.named) >= maxKeyPeers {
		if !k.full {
			k.full = true
			k.log.Warn().Int("named", maxKeyPeers).
				Msg("gossip: more peers hold another gossip key; not named further, counted in fenec_entry_gossip_key_mismatches_total")
		}
		return false
	}
	k.named[host] = struct{}{}
	return true
}

// received takes one of memberlist's log lines and reports whether it was a message this
// entry could not open for its key; if so it counts it and, the first time for its sender's
// host, says so.
func (k *keyReport) received(line []byte) bool {
	var rest []byte
	if i := bytes.Index(line, streamRefused); i >= 0 {
		rest = line[i+len(streamRefused):]
		if !keyMismatch(string(rest)) {
			return false
		}
	} else if i := bytes.Index(line, packetRefused); i >= 0 {
		rest = line[i+len(packetRefused):]
	} else {
		return false
	}
	reason, from := rest, []byte(nil)
	if i := bytes.LastIndex(rest, fromMarker); i >= 0 {
		reason, from = rest[:i], rest[i+len(fromMarker):]
	}
	host := hostOf(string(from))
	if k.first(host) {
		k.log.Warn().Str("peer", host).Str("reason", string(reason)).
			Msg("gossip: a peer's message could not be opened: it holds another gossip key, or none; " + keyHint)
	}
	return true
}

// refusedJoin counts a join of target the peer refused for its key and reports whether this
// is the first time for target's host (the join failure line then says it: joinReport).
func (k *keyReport) refusedJoin(target string) bool {
	return k.first(hostOf(target))
}

// hostOf is the host of a host:port address; addr itself if it has no port.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
