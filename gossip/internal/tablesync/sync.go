package tablesync

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/fenec/fenec-entry/gossip/internal/keyring"
	"github.com/fenec/fenec-entry/gossip/internal/validate"
	"github.com/fenec/fenec-entry/homes"
	"github.com/fenec/fenec-entry/homes/record"
	"github.com/fenec/fenec-entry/internal/clock"
)

// Paths of the snapshot listener.
const (
	pathChallenge = "/_gossip/challenge"
	pathSnapshot  = "/_gossip/snapshot"
	pathDigest    = "/_gossip/digest"
	pathPull      = "/_gossip/pull"

	streamContentType = "application/vnd.fenec.snapshot+msgpack"
)

// Peer is another entry as the snapshot client sees it.
type Peer struct {
	Name string // its node name, as in the membership (the name its reply proof must carry)
	Addr string // host:port the client dials: its gossip address (Gossip's client sorts the stream there)
}

// Config is the joiner's table and repair: gossip.Config's Sync, handed to NewSync as it is.
// DefaultConfig fills every field; each says its default, why, and what it costs.
type Config struct {
	// RepairInterval (30 s) is the mean time between repair rounds with a random peer,
	// jittered ±25 %: the backstop for what gossip lost, a lost home within about a minute.
	// Each round costs both sides one Range over their tables and a digest exchange.
	RepairInterval time.Duration

	// Timeout (10 s) bounds one snapshot, digest or pull exchange, on both sides: a joiner's
	// whole table of a million homes streams in about 2 s here.
	Timeout time.Duration

	// RepairSettle (2 s) is how old a home must be (by its version) to count in a repair
	// digest. A home reaches every entry within 3 s (docs/REFERENCE.md, "Homes"), in about 0.3
	// s on one network; older than 2 s and still missing, it was lost. Newer homes are
	// gossip's: left out on both sides, they do not make a table of a million homes pull whole
	// buckets for homes still in flight.
	RepairSettle time.Duration

	// MaxStreams (4) is how many snapshot and pull streams this entry serves at once, each
	// bounded by Timeout; more are refused with 503 and counted.
	MaxStreams int
}

// DefaultConfig is the production table exchange, every field as its comment gives it.
func DefaultConfig() Config {
	return Config{RepairInterval: 30 * time.Second, Timeout: 10 * time.Second, RepairSettle: 2 * time.Second, MaxStreams: 4}
}

// Validate reports the first field of c that is out of range, by name. It does not change c.
func (c Config) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"RepairInterval", c.RepairInterval}, {"Timeout", c.Timeout}, {"RepairSettle", c.RepairSettle}} {
		if d.v <= 0 {
			return fmt.Errorf("%s: %v; need more than 0", d.name, d.v)
		}
	}
	if c.MaxStreams < 1 {
		return fmt.Errorf("MaxStreams: %d; need at least 1", c.MaxStreams)
	}
	return nil
}

// Setup is what NewSync is handed: the settings (Config) and this entry's identity, table
// and membership. Table, Validator, MemberAddr and Peers are required.
type Setup struct {
	Config

	// Node is this entry's node name: sent in proofs, checked in replies. Required.
	Node string

	// Keys are the gossip keys: requests are proven with the primary key and accepted under
	// any installed one, and the answer is proven and sealed with the key its request used.
	// The zero Keys is insecure gossip: requests are then accepted from any current member's
	// address without proof, and answers are not proven (the stream's seals are then
	// checksums against corruption, not against forgery).
	Keys keyring.Keys

	Table     *homes.Table
	Validator *validate.Validator

	// MemberAddr returns the address of node if it is a current alive member. A request is
	// served only if its source address is that of the member its proof names.
	MemberAddr func(node string) (netip.Addr, bool)

	// Peers returns the alive members other than this one, with the addresses to dial them at.
	Peers func() []Peer

	// Capacity is the table's capacity (--homes), at least 1. A stream may carry at most
	// 2×Capacity homes and marks, and about 4 KB for each.
	Capacity int

	// Client makes the requests to peers. Nil: a client with dial, header and idle timeouts
	// and no proxy (peers are on the private network).
	Client *http.Client

	// Now is the clock: nonce expiry, the digests' settle, a fetch's time; nil means
	// time.Now. The streams' pacers time this process's own work on real time.
	Now func() time.Time

	Logger     zerolog.Logger
	Registerer prometheus.Registerer // nil: metrics are kept but not registered
}

// Sync serves this entry's table to peers and brings peers' tables here: the whole table to
// a joining entry (Bootstrap, Fetch), and periodic anti-entropy (Run, Repair).
//
// Every endpoint but the challenge needs a proof of the gossip key from a current member at
// its own address, and every answer proves the key back and seals its body (see
// auth.go and stream.go). Whatever a peer sends is validated and applied with
// Table.Apply and Table.ApplyMark, so versions decide: a snapshot never overwrites a newer
// home that gossip brought meanwhile, and a home applied before a stream broke stays valid.
//
// Safe for concurrent use. Sync starts no goroutine of its own; Run is the repair loop and
// returns when its context ends.
type Sync struct {
	cfg        Setup
	keys       keyring.Keys
	nonces     *nonces
	client     *http.Client
	streams    chan struct{} // semaphore of served streams
	maxRecords int
	pullCursor atomic.Uint32           // the digest bucket the next capped pull starts from (repair.go)
	bootstraps atomic.Int32            // this entry's table fetches in progress (BeginBootstrap)
	partial    atomic.Bool             // a fetch began with an empty table: digests and pulls are refused
	fetchFrom  atomic.Pointer[string]  // the peer whose whole table the current fetch brought (Fetch)
	fetched    atomic.Pointer[Fetched] // the last fetch of this entry's table to end
	maxBytes   int64
	m          *syncMetrics
	log        zerolog.Logger
	mux        *http.ServeMux
}

// NewSync checks cfg and returns a Sync, or an error naming the missing field or a metric
// that could not be registered.
func NewSync(cfg Setup) (*Sync, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gossip: sync: %w", err)
	}
	switch {
	case cfg.Node == "":
		return nil, errors.New("gossip: sync: Node is empty")
	case cfg.Table == nil:
		return nil, errors.New("gossip: sync: Table is nil")
	case cfg.Validator == nil:
		return nil, errors.New("gossip: sync: Validator is nil")
	case cfg.MemberAddr == nil:
		return nil, errors.New("gossip: sync: MemberAddr is nil")
	case cfg.Peers == nil:
		return nil, errors.New("gossip: sync: Peers is nil")
	case cfg.Capacity < 1:
		return nil, fmt.Errorf("gossip: sync: Capacity %d; need at least 1", cfg.Capacity)
	}
	if cfg.Now == nil {
		cfg.Now = clock.System.Now
	}
	m, err := newSyncMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("gossip: sync metrics: %w", err)
	}
	s := &Sync{
		cfg:        cfg,
		keys:       cfg.Keys,
		nonces:     newNonces(cfg.Now),
		client:     cfg.Client,
		streams:    make(chan struct{}, cfg.MaxStreams),
		maxRecords: 2 * cfg.Capacity,
		m:          m,
		log:        cfg.Logger.With().Str("component", "sync").Logger(),
	}
	s.maxBytes = int64(s.maxRecords)*record.MaxRecordBytes + 1<<20
	if s.client == nil {
		s.client = defaultSyncClient()
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET "+pathChallenge, s.serveChallenge)
	s.mux.HandleFunc("GET "+pathSnapshot, s.serveSnapshot)
	s.mux.HandleFunc("GET "+pathDigest, s.serveDigest)
	s.mux.HandleFunc("POST "+pathPull, s.servePull)
	return s, nil
}

func defaultSyncClient() *http.Client {
	d := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ResponseHeaderTimeout: 5 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   2,
		DisableCompression:    true, // tenant names compress, but a snapshot is a few MB on a private network
	}}
}

// Handler serves the snapshot listener: GET /_gossip/challenge, GET /_gossip/snapshot,
// GET /_gossip/digest and POST /_gossip/pull. Serve it only where peers reach it (on Fly the
// 6PN address); it needs no other routing.
func (s *Sync) Handler() http.Handler { return s.mux }

// StatusError is a peer's refusal: its status and JSON error.
type StatusError struct {
	Status  int    `json:"-"`
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("gossip: peer answered %d %s: %s", e.Status, e.Code, e.Message)
}

func (s *Sync) writeError(w http.ResponseWriter, endpoint string, e *authError) {
	s.m.served.WithLabelValues(endpoint, e.code).Inc()
	s.log.Debug().Str("endpoint", endpoint).Str("refused", e.code).Msg("snapshot request refused")
	b, _ := json.Marshal(StatusError{Code: e.code, Message: e.msg})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(e.status)
	w.Write(append(b, '\n'))
}

type challengeBody struct {
	Nonce     string `json:"nonce"`
	ExpiresIn int    `json:"expires_in"` // seconds
}

// serveChallenge issues a nonce to a member, from its own address.
func (s *Sync) serveChallenge(w http.ResponseWriter, r *http.Request) {
	node := r.URL.Query().Get("node")
	if aerr := s.member(r, node); aerr != nil {
		s.writeError(w, "challenge", aerr)
		return
	}
	nonce, ok := s.nonces.issue(node)
	if !ok {
		s.m.noncesFull.Inc()
		s.writeError(w, "challenge", errNoncesFull)
		return
	}
	s.m.served.WithLabelValues("challenge", "ok").Inc()
	b, _ := json.Marshal(challengeBody{Nonce: nonce, ExpiresIn: int(nonceTTL / time.Second)})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(append(b, '\n'))
}

// partialHeader marks a table answered by an entry that is fetching its own from empty
// (BeginBootstrap): part of a peer's, not a whole one. A joiner applies it (any subset of a
// table is safe) and prefers a whole one from another peer (Bootstrap). Not sealed: a peer
// that strips it gets today's behaviour, a table taken as whole.
const partialHeader = "Fenec-Table-Partial"

// streamVersionHeader carries, on a request, the newest stream version (package record) the
// requester reads; the answer is written in it, or in version 1 when the header is missing
// (an entry from before version 2). Not covered by the proof: changing it changes only the
// encoding of a stream that is sealed either way.
const streamVersionHeader = "Fenec-Stream-Version"

func (s *Sync) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	who, aerr := s.authenticate(r)
	if aerr != nil {
		s.writeError(w, "snapshot", aerr)
		return
	}
	if s.partial.Load() {
		w.Header().Set(partialHeader, "1")
	}
	s.stream(w, r, "snapshot", who, func(sw *record.Writer) error {
		if err := sw.Header(s.cfg.Node, s.cfg.Table.Len(), 0); err != nil {
			return err
		}
		return s.writeTable(sw, nil)
	})
}

// writeTable writes the table's homes (those of tenants keep takes; all when keep is nil),
// at most maxRecords of them, paced, and then its marks: the body of a snapshot and of a pull.
func (s *Sync) writeTable(sw *record.Writer, keep func(tenant string) bool) error {
	var err error
	n := 0
	pace := newPacer()
	s.cfg.Table.Range(func(h homes.Home, _ homes.Source) bool {
		if keep != nil && !keep(h.Tenant) {
			return true
		}
		if n++; n > s.maxRecords {
			return false
		}
		if err = sw.Home(h); err != nil {
			return false
		}
		pace.wait(n)
		return true
	})
	if err != nil {
		return err
	}
	return s.writeMarks(sw)
}

func (s *Sync) writeMarks(sw *record.Writer) error {
	for _, m := range s.cfg.Table.Marks() {
		if err := sw.Mark(m); err != nil {
			return err
		}
	}
	return nil
}

// maxStreamRate bounds the homes a table or pull stream sends a second: a million in 2.5 s,
// within a joiner's 5 s. minStreamRate is the pace below which a stream stops yielding half
// its CPU: a million in 3.3 s, so that a contended CPU still brings a joiner a million homes
// within its bootstrap's 4.5 s (node: a first peer within 2 s, then its table within 2.5 s).
const (
	maxStreamRate = 400_000
	minStreamRate = 300_000
)

// pacer spreads a stream's work so that the serving entry's own requests keep its CPU: after
// each write (record.FlushEvery sealed blocks, 1,024 homes, about 0.2-0.5 ms of Range, encoding,
// sealing and the write) it sleeps at least as long as that took (at most half of a CPU, in
// slices short enough that a request never waits behind a whole stream), and longer if that
// is still ahead of maxStreamRate. Behind minStreamRate it pauses only yieldPause: on a
// contended CPU a batch's time is mostly the time the stream waited for the CPU, and pausing
// as long again slowed a million homes to 4.5 s (bench/joiner, pinned). Without it a stream ran as one CPU-bound goroutine for a
// second a million homes, and the entry's requests waited behind it for the scheduler's time
// slices (bench/joiner: p99 7x its idle p99 while a joiner fetched a million homes). It
// pauses once a write, not once a block: each pause and each write wakes the joiner's reader
// and this entry's scheduler, which cost more of the serving CPU than the bytes did.
type pacer struct {
	start, block time.Time
	now          func() time.Time    // clock.System.Now but in tests
	sleep        func(time.Duration) // time.Sleep but in tests
}

// paceEvery is how many homes a stream writes between pauses: one write.
const paceEvery = record.FlushEvery * record.SealEvery

// yieldPause is the pause of a stream behind minStreamRate: enough for the requests waiting
// for the entry's CPU to run (a goroutine that does not sleep holds its P up to 10 ms).
const yieldPause = 50 * time.Microsecond

func newPacer() *pacer { return newPacerClock(clock.System.Now, time.Sleep) }

func newPacerClock(now func() time.Time, sleep func(time.Duration)) *pacer {
	t := now()
	return &pacer{start: t, block: t, now: now, sleep: sleep}
}

// wait is called after the n-th home (from 1) is written; it pauses after every paceEvery.
func (p *pacer) wait(n int) {
	if n%paceEvery != 0 {
		return
	}
	now := p.now()
	elapsed := now.Sub(p.start)
	pause := now.Sub(p.block) // as long as the homes since the last pause took
	if elapsed > rateTime(n, minStreamRate) {
		pause = min(pause, yieldPause)
	}
	if ahead := rateTime(n, maxStreamRate) - elapsed; ahead > pause {
		pause = ahead
	}
	p.sleep(pause)
	p.block = p.now()
}

// rateTime is how long n homes take at rate homes a second.
func rateTime(n, rate int) time.Duration {
	return time.Duration(float64(n) / float64(rate) * float64(time.Second))
}

var errBusy = &authError{http.StatusServiceUnavailable, "busy", "too many snapshot streams at once"}

// stream answers an authenticated request with a sealed stream that fill writes (from the
// header to the last record; stream adds the trailer), flushed every record.FlushEvery sealed blocks.
// A write error ends it without a trailer, which the peer detects.
//
// The body is not chunked: it ends with the connection (Transfer-Encoding: identity, which
// net/http's server answers without chunking and then closes). The stream frames itself (its
// trailer counts the records and its seals prove them), and a chunked body cost three writes
// a flush (the chunk's size, its data past net/http's 4 KB buffer, and its CRLF at the
// flush), each waking the peer's reader. A peer's client reads either.
func (s *Sync) stream(w http.ResponseWriter, r *http.Request, endpoint string, who caller, fill func(*record.Writer) error) {
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		s.writeError(w, endpoint, errBusy)
		return
	}
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(clock.System.Now().Add(s.cfg.Timeout)) // best effort: not every writer has one
	s.signReply(w, r, who)
	h := w.Header()
	h.Set("Content-Type", streamContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("Transfer-Encoding", "identity")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10) // a flush's FlushEvery blocks, about 45 KB, in one write
	version := record.OldestVersion      // what a reader that names no version reads
	if v, err := strconv.Atoi(r.Header.Get(streamVersionHeader)); err == nil && v >= record.Version {
		version = record.Version
	}
	sw := record.NewWriter(bw, record.NewMAC(who.authKey, who.nonce, r.URL.Path), version, func() error {
		if err := bw.Flush(); err != nil {
			return err
		}
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		return nil
	})
	err := fill(sw)
	if err == nil {
		err = sw.Trailer()
	}
	if err != nil {
		s.m.served.WithLabelValues(endpoint, "error").Inc()
		s.log.Debug().Err(err).Str("endpoint", endpoint).Str("peer", who.node).Msg("snapshot stream broken")
		return
	}
	s.m.served.WithLabelValues(endpoint, "ok").Inc()
}

// call makes one authenticated request to peer: a challenge first (with a key), then the
// request with its proof; it checks the status and the reply proof and returns the answer
// (whose body the caller reads and closes) and the seal to read it with.
func (s *Sync) call(ctx context.Context, peer Peer, method, path string, body []byte) (*http.Response, *record.MAC, error) {
	return s.callWith(ctx, peer, method, path, body, nil)
}

// callWith is call with more request headers (not covered by the proof: what they say must
// be harmless to change).
func (s *Sync) callWith(ctx context.Context, peer Peer, method, path string, body []byte, hdr map[string]string) (*http.Response, *record.MAC, error) {
	base := "http://" + peer.Addr
	proof := s.cfg.Node
	var nonce string
	authKey := deriveAuthKey(s.keys.Primary()) // the key of this whole exchange
	if s.keys.Secure() {
		var err error
		if nonce, err = s.challenge(ctx, base); err != nil {
			return nil, nil, err
		}
		proof += " " + nonce + " " + requestProof(authKey, s.cfg.Node, nonce, method, path)
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set(proofHeader, proof)
	req.Header.Set(streamVersionHeader, strconv.Itoa(record.Version))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if body != nil {
		req.Header.Set("Content-Type", streamContentType)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, nil, readStatusError(resp)
	}
	if err := s.checkReply(resp, peer, nonce, method, path, authKey); err != nil {
		resp.Body.Close()
		return nil, nil, err
	}
	return resp, record.NewMAC(authKey, nonce, path), nil
}

func (s *Sync) challenge(ctx context.Context, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+pathChallenge+"?node="+url.QueryEscape(s.cfg.Node), nil)
	if err != nil {
		return "", err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", readStatusError(resp)
	}
	var c challengeBody
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&c); err != nil {
		return "", fmt.Errorf("gossip: challenge: %w", err)
	}
	if c.Nonce == "" || len(c.Nonce) > 64 {
		return "", errors.New("gossip: challenge: no nonce")
	}
	return c.Nonce, nil
}

func readStatusError(resp *http.Response) error {
	e := &StatusError{Status: resp.StatusCode}
	json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(e) // best effort
	return e
}

// limitedReader is io.LimitedReader that fails with ErrTooLarge instead of ending.
type limitedReader struct {
	r io.Reader
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// received is what one stream brought.
type received struct {
	homes, marks       int // records read
	homesApplied       int
	marksApplied       int
	homesInv, marksInv int
	digest             *digest
}

// readStream reads a sealed stream from body, applying each sealed block of homes and marks
// (validated first) as its seal verifies, and returns what it read. On error, what was applied
// stays applied.
func (s *Sync) readStream(body io.Reader, mac *record.MAC, via string) (got received, err error) {
	defer func() {
		s.m.applied.WithLabelValues(via, typeHome).Add(float64(got.homesApplied))
		s.m.applied.WithLabelValues(via, typeMark).Add(float64(got.marksApplied))
		s.m.invalid.WithLabelValues(via, typeHome).Add(float64(got.homesInv))
		s.m.invalid.WithLabelValues(via, typeMark).Add(float64(got.marksInv))
	}()
	sr := record.NewReader(&limitedReader{r: body, n: s.maxBytes}, mac, s.maxRecords)
	if _, err := sr.Next(); err != nil { // the header
		return got, err
	}
	var hs []homes.Home
	var ms []homes.Mark
	for {
		rec, err := sr.Next()
		if err != nil {
			return got, err
		}
		switch rec.Kind {
		case record.KindHome, record.KindOwnHome:
			hs = append(hs, rec.Home)
			got.homes++
		case record.KindMark:
			ms = append(ms, rec.Mark)
			got.marks++
		case record.KindDigest:
			got.digest = rec.Digest
		case record.KindSeal, record.KindTrailer:
			s.applyBlock(hs, ms, &got)
			hs, ms = hs[:0], ms[:0]
			if rec.Last {
				return got, nil
			}
		default:
			return got, fmt.Errorf("%w: unexpected record kind %d", record.ErrBadStream, rec.Kind)
		}
	}
}

func (s *Sync) applyBlock(hs []homes.Home, ms []homes.Mark, got *received) {
	t, v := s.cfg.Table, s.cfg.Validator
	for _, h := range hs {
		if v.Home(h) != nil {
			got.homesInv++
		} else if t.Apply(h) {
			got.homesApplied++
		}
	}
	for _, m := range ms {
		if v.Mark(m) != nil {
			got.marksInv++
		} else if t.ApplyMark(m) {
			got.marksApplied++
		}
	}
}

// Fetch streams peer's whole table (homes, then every region's latest failure and clear) and applies every valid home and
// mark that is newer than what this table holds, as each sealed block arrives. It returns how
// many changed the table and how many were invalid (counted, skipped). An error (the peer
// refused, did not prove the key, the stream broke, was truncated or over its bound: 2×Capacity
// records) leaves what was applied applied: versions make any subset of a peer's table safe.
// Bounded by Config.Timeout.
func (s *Sync) Fetch(ctx context.Context, peer Peer) (applied, invalid int, err error) {
	applied, invalid, _, err = s.fetch(ctx, peer)
	return applied, invalid, err
}

// fetch is Fetch, and whether the peer said its table was partial (partialHeader).
func (s *Sync) fetch(ctx context.Context, peer Peer) (applied, invalid int, partial bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	defer func() {
		res := "ok"
		switch {
		case err != nil:
			res = "error"
		case partial:
			res = "partial"
		}
		s.m.fetches.WithLabelValues(res).Inc()
	}()
	resp, mac, err := s.call(ctx, peer, http.MethodGet, pathSnapshot, nil)
	if err != nil {
		return 0, 0, false, fmt.Errorf("gossip: snapshot from %s: %w", peer.Name, err)
	}
	defer resp.Body.Close()
	partial = resp.Header.Get(partialHeader) == "1"
	got, err := s.readStream(resp.Body, mac, viaSnapshot)
	applied, invalid = got.homesApplied+got.marksApplied, got.homesInv+got.marksInv
	if err != nil {
		return applied, invalid, partial, fmt.Errorf("gossip: snapshot from %s: %w", peer.Name, err)
	}
	if !partial {
		name := peer.Name
		s.fetchFrom.Store(&name)
	}
	return applied, invalid, partial, nil
}

// Bootstrap brings this entry the table of one live peer: it tries the peers in random order
// until one snapshot succeeds, and returns nil then, or at once if there are no peers. A peer
// that is itself fetching its table from empty answers part of one (partialHeader): it is
// applied, and the round goes on to the other peers for a whole one; a round that found only
// partial ones returns nil at its end (every peer is joining: a fleet starting cold). While
// peers exist but every one fails, it tries again after a backoff (250 ms doubling to 5 s,
// jittered), asking Peers each time, until ctx ends; it then returns ctx's error and the last
// failure. The caller reports ready once it returns nil (or gives up, with a deadline on ctx,
// and serves with what repair brings later).
func (s *Sync) Bootstrap(ctx context.Context) error {
	defer s.BeginBootstrap()()
	backoff := 250 * time.Millisecond
	start := clock.System.Now()
	var last error
	for {
		peers := s.cfg.Peers()
		if len(peers) == 0 {
			s.log.Info().Msg("no peer to fetch the table from: serving alone")
			return nil
		}
		rand.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
		partialFrom := ""
		for _, p := range peers {
			applied, invalid, partial, err := s.fetch(ctx, p)
			if err == nil && partial {
				s.log.Debug().Str("peer", p.Name).Int("applied", applied).Msg("a joining peer's partial table: trying the others for a whole one")
				partialFrom = p.Name
				continue
			}
			if err == nil {
				s.log.Info().Str("peer", p.Name).Int("applied", applied).Int("invalid", invalid).
					Dur("took_ms", clock.System.Now().Sub(start)).Int("homes", s.cfg.Table.Len()).Msg("table fetched from peer")
				return nil
			}
			last = err
			lvl := zerolog.WarnLevel
			if se := (*StatusError)(nil); errors.As(err, &se) && se.Code == "not_member" {
				// Normal while joining: the joiner heard of this peer before the peer
				// heard of the joiner. The next round asks again.
				lvl = zerolog.DebugLevel
			}
			s.log.WithLevel(lvl).Err(err).Str("peer", p.Name).Int("applied", applied).Msg("snapshot failed")
			if ctx.Err() != nil {
				return fmt.Errorf("gossip: bootstrap: %w (last: %w)", ctx.Err(), last)
			}
		}
		if partialFrom != "" {
			s.log.Info().Str("peer", partialFrom).Dur("took_ms", clock.System.Now().Sub(start)).Int("homes", s.cfg.Table.Len()).
				Msg("table fetched from peers that are joining too: no whole one to be had")
			return nil
		}
		wait := backoff/2 + rand.N(backoff)
		backoff = min(2*backoff, 5*time.Second)
		select {
		case <-ctx.Done():
			return fmt.Errorf("gossip: bootstrap: %w (last: %w)", ctx.Err(), last)
		case <-time.After(wait):
		}
	}
}

// BeginBootstrap marks a fetch of this entry's table in progress until the returned func is
// called (once); fetches may nest (Gossip.Bootstrap around Sync.Bootstrap). While one is in
// progress this entry starts no repair (RepairPaused): the fetch brings a peer's whole table,
// and a repair round beside it costs that peer a digest of its table and a pull of a quarter
// of it, unpaced beside the stream. If the table was empty when the outermost began, digests
// and pulls are refused (503 "bootstrapping") until it ends: the table is part of a peer's,
// so a peer repairing with it (as every peer does with an entry that comes alive) would
// compute its own digest and pull buckets of homes it holds, for nothing. A warm entry's
// table (restored from its state file) is answered as usual: it may hold what peers lack.
func (s *Sync) BeginBootstrap() (end func()) {
	if s.bootstraps.Add(1) == 1 {
		s.fetchFrom.Store(nil)
		s.partial.Store(s.cfg.Table.Len() == 0)
	}
	var once atomic.Bool
	return func() {
		if !once.CompareAndSwap(false, true) {
			return
		}
		if s.bootstraps.Add(-1) == 0 {
			f := &Fetched{At: s.cfg.Now()}
			if from := s.fetchFrom.Swap(nil); from != nil {
				f.From = *from
			}
			s.fetched.Store(f)
			s.partial.Store(false)
		}
	}
}

// Fetched is the end of a fetch of this entry's table (BeginBootstrap to its end).
type Fetched struct {
	At   time.Time // when it ended
	From string    // the peer whose whole table it brought; "" if none did
}

// LastFetch is the last fetch of this entry's table to end; nil before any has. The homes
// that were in flight to this entry while it fetched, and that the peer it fetched from had
// not received yet either, reach it by no other way than repair: one round a RepairSettle
// after the fetch, with another peer, brings them (Gossip.RunRepair).
func (s *Sync) LastFetch() *Fetched { return s.fetched.Load() }

// RepairSettle is how old a home must be to count in a repair round (Config.RepairSettle).
func (s *Sync) RepairSettle() time.Duration { return s.cfg.RepairSettle }

// RepairPaused reports whether this entry is fetching its table (BeginBootstrap): no repair
// round starts then.
func (s *Sync) RepairPaused() bool { return s.bootstraps.Load() > 0 }

var errBootstrapping = &authError{http.StatusServiceUnavailable, "bootstrapping",
	"this entry is fetching its table from a peer: it holds part of it, repair with it later"}

// Errors of an exchange. A stream's are package record's; what was applied before one stays
// applied: each home and mark passed validation, and Apply kept it only if newer.
var (
	ErrTruncated = record.ErrTruncated
	ErrBadSeal   = record.ErrBadSeal
	ErrTooLarge  = record.ErrTooLarge
	ErrBadReply  = errors.New("gossip: peer did not prove the key in Fenec-Proof-Reply")
)
