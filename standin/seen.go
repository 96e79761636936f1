package standin

import (
	"net/http"
	"sync"
	"time"
)

// SeenCapacity is how many requests Cluster.Seen keeps: the last ones received, older ones are
// forgotten.
const SeenCapacity = 20000

// Seen is one request received by a router (the admin API excepted). It is recorded when the
// request arrives and completed (End, Status, ClientGone, Relayed) when the router is done
// with it, which may be just after the client has the answer: wait for a non-zero End.
type Seen struct {
	Seq       uint64 `json:"seq"` // 1, 2, ... in arrival order across the cluster; never reused
	Router    string `json:"router"`
	Region    string `json:"region"`
	Method    string `json:"method"`
	Path      string `json:"path"` // decoded once
	Tenant    string `json:"tenant"`
	RequestID string `json:"request_id"`
	// From is the Fenec-Router of a request relayed by another router, "" from outside.
	From string `json:"from,omitempty"`
	// Relayed: this router relayed the request to RelayedTo, a router of the home region
	// (the last one tried).
	Relayed   bool        `json:"relayed"`
	RelayedTo string      `json:"relayed_to,omitempty"`
	Header    http.Header `json:"header"` // as received; read-only
	// ClientMark is named, bad_mark, stale or absent for a request from outside with
	// Config.EntryToken set; "" otherwise.
	ClientMark string `json:"client_mark"`
	// Fault is the router's fault when the request arrived (Fault.String), "" for none.
	Fault string    `json:"fault,omitempty"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"` // zero while in flight
	// ClientGone: the client left before the router was done (a stream ended by the client,
	// a held write abandoned, a blackholed request given up).
	ClientGone bool `json:"client_gone"`
	// Status is the status answered; 0 when there was no answer (the connection was reset
	// or closed, or the client left first).
	Status int `json:"status"`
}

// seenLog is a ring of the last Seen records.
type seenLog struct {
	mu   sync.Mutex // guards the following fields
	ring []Seen     // record seq is at (seq-1) % len(ring)
	last uint64     // seq of the newest record
	from uint64     // oldest seq kept after a reset (records before it are gone)
}

func (s *seenLog) init(capacity int) { s.ring = make([]Seen, capacity) }

// add records rec and returns its Seq.
func (s *seenLog) add(rec Seen) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last++
	rec.Seq = s.last
	s.ring[s.indexLocked(rec.Seq)] = rec
	return rec.Seq
}

func (s *seenLog) indexLocked(seq uint64) int { return int((seq - 1) % uint64(len(s.ring))) }

// oldestLocked is the oldest seq still kept.
func (s *seenLog) oldestLocked() uint64 {
	oldest := s.from
	if n := uint64(len(s.ring)); s.last >= n && s.last-n+1 > oldest {
		oldest = s.last - n + 1
	}
	return max(oldest, 1)
}

// update changes the record seq, if it is still kept.
func (s *seenLog) update(seq uint64, fn func(*Seen)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq < s.oldestLocked() || seq > s.last {
		return
	}
	fn(&s.ring[s.indexLocked(seq)])
}

// since returns copies of the records with Seq > seq, oldest first.
func (s *seenLog) since(seq uint64) []Seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Seen{}
	for q := max(seq+1, s.oldestLocked()); q <= s.last; q++ {
		rec := s.ring[s.indexLocked(q)]
		rec.Header = rec.Header.Clone()
		out = append(out, rec)
	}
	return out
}

// reset forgets every record; Seq keeps counting.
func (s *seenLog) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.ring)
	s.from = s.last + 1
}
