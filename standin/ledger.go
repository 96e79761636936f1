package standin

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Apply is one write applied by a home router: the ledger the chaos suite checks ("every write
// applied once, in its tenant's home region").
type Apply struct {
	Tenant    string    `json:"tenant"`
	Region    string    `json:"region"` // the region of the router that applied it
	Router    string    `json:"router"` // its address
	Method    string    `json:"method"`
	Key       string    `json:"key"`        // Idempotency-Key, "" if none
	RequestID string    `json:"request_id"` // X-Request-Id, "" if none
	ItemID    string    `json:"item_id"`
	At        time.Time `json:"at"`
}

// item is a tenant's item, as GET answers it and a write answers it.
type item struct {
	ID      string `json:"id"`
	Tenant  string `json:"tenant"`
	Region  string `json:"region"`
	Router  string `json:"router"`
	Body    int    `json:"body"` // length of the body of the write that made it
	Deleted bool   `json:"deleted,omitempty"`
}

// store holds the items and the ledger of the whole cluster. The ledger is unbounded: one
// Apply per write, until Reset.
type store struct {
	mu     sync.Mutex // guards the following fields
	ledger []Apply
	items  map[string]map[string]item // tenant -> id -> item
	nextID uint64                     // keeps counting across reset: ids are never reused
}

func (s *store) init() { s.items = make(map[string]map[string]item) }

// apply applies one write and records it. For a POST the item gets a new id (a.ItemID is
// ignored). publish is called with the answer while the store is locked, so that every
// subscriber sees a tenant's items in ledger order.
func (s *store) apply(a Apply, bodyLen int, publish func(tenant string, data []byte)) *storedAnswer {
	s.mu.Lock()
	defer s.mu.Unlock()
	status := http.StatusOK
	if a.Method == http.MethodPost {
		s.nextID++
		a.ItemID = strconv.FormatUint(s.nextID, 10)
		status = http.StatusCreated
	}
	it := item{ID: a.ItemID, Tenant: a.Tenant, Region: a.Region, Router: a.Router, Body: bodyLen}
	items := s.items[a.Tenant]
	if items == nil {
		items = make(map[string]item)
		s.items[a.Tenant] = items
	}
	if a.Method == http.MethodDelete {
		delete(items, a.ItemID)
		it.Deleted = true
	} else {
		items[a.ItemID] = it
	}
	s.ledger = append(s.ledger, a)
	b, _ := json.Marshal(it)
	publish(a.Tenant, b)
	return &storedAnswer{status: status, body: append(b, '\n')}
}

// seed puts the items among the others without a ledger entry; a numeric id moves nextID past
// it.
func (s *store) seed(its ...item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range its {
		s.seedLocked(it)
	}
}

func (s *store) seedLocked(it item) {
	items := s.items[it.Tenant]
	if items == nil {
		items = make(map[string]item)
		s.items[it.Tenant] = items
	}
	items[it.ID] = it
	if n, err := strconv.ParseUint(it.ID, 10, 64); err == nil && n > s.nextID {
		s.nextID = n
	}
}

func (s *store) item(tenant, id string) (item, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.items[tenant][id]
	return it, ok
}

// applies returns a copy of the ledger from index from on.
func (s *store) applies(from int) []Apply {
	s.mu.Lock()
	defer s.mu.Unlock()
	if from > len(s.ledger) {
		from = len(s.ledger)
	}
	return append([]Apply{}, s.ledger[from:]...)
}

// reset forgets the ledger and the items, then seeds its, at once: no reader sees the store
// without them.
func (s *store) reset(its []item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger = nil
	s.items = make(map[string]map[string]item)
	for _, it := range its {
		s.seedLocked(it)
	}
}

// storedAnswer is the answer to a write, kept for the repeats of its Idempotency-Key.
type storedAnswer struct {
	status int
	body   []byte
}

// keyStore dedupes writes per (tenant, Idempotency-Key). The first request of a key claims it
// and settles it with its answer; the others wait for that and get the same answer. A claim
// settled without an answer (its client left before the write was applied) is dropped, and
// one of the waiters claims the key again. Keys are kept until Reset.
type keyStore struct {
	mu sync.Mutex // guards m
	m  map[idemKey]*idemEntry
}

type idemKey struct{ tenant, key string }

type idemEntry struct {
	done chan struct{} // closed once settled
	ans  *storedAnswer // set before done is closed; nil if nothing was applied
}

func (k *keyStore) init() { k.m = make(map[idemKey]*idemEntry) }

// claim returns the key's entry and whether the caller created it (and must settle it).
func (k *keyStore) claim(tenant, key string) (*idemEntry, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	id := idemKey{tenant, key}
	if e := k.m[id]; e != nil {
		return e, false
	}
	e := &idemEntry{done: make(chan struct{})}
	k.m[id] = e
	return e, true
}

// settle records the answer of a claimed key (nil: nothing applied, drop the claim).
func (k *keyStore) settle(tenant, key string, e *idemEntry, ans *storedAnswer) {
	k.mu.Lock()
	e.ans = ans
	id := idemKey{tenant, key}
	if ans == nil && k.m[id] == e {
		delete(k.m, id)
	}
	k.mu.Unlock()
	close(e.done)
}

func (k *keyStore) reset() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.m = make(map[idemKey]*idemEntry)
}
