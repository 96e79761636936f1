//go:build chaos

package chaos

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type opKind uint8

const (
	opRead  opKind = iota // GET /t/<t>/items/<id>
	opWrite               // POST /t/<t>/items without Idempotency-Key
	opKeyed               // POST /t/<t>/items with Idempotency-Key
	opSSE                 // GET /t/<t>/events, held open a while
	opProbe               // the harness's own GET (warm-up, learning, table check)
)

var opNames = [...]string{"read", "write", "keyed", "sse", "probe"}

func (o opKind) String() string { return opNames[o] }

// connKind is how a request reaches its entry: on a kept-alive connection (the pool of one
// transport, shared by every client) or on a connection of its own (keep-alives off: dialled
// for the request and closed after it), in plain HTTP or over TLS (the TLS entry). Every
// record carries its kind, so that a loss names it.
type connKind uint8

const (
	connKeepAlive    connKind = iota // keep-alive, plain HTTP/1.1
	connNew                          // a new TCP connection per request, plain HTTP/1.1
	connKeepAliveTLS                 // keep-alive, HTTPS (HTTP/1.1 by ALPN)
	connNewTLS                       // a new TCP connection and TLS handshake per request
	numConnKinds
)

var connNames = [...]string{"keepalive-plain", "newconn-plain", "keepalive-tls", "newconn-tls"}

func (k connKind) String() string { return connNames[k] }

func kindOf(newConn, tls bool) connKind {
	k := connKeepAlive
	if newConn {
		k = connNew
	}
	if tls {
		k += connKeepAliveTLS
	}
	return k
}

// newConnShare is the percentage of the clients' well-formed requests sent on a new
// connection (keep-alives off), drawn from the client's seeded generator for each request
// (each try of a keyed write): to every entry, plain and TLS alike. A malformed request has a
// connection of its own always.
const newConnShare = 35

// Where a request got to before it failed (httptrace): whether the entry had accepted its
// connection (every stage from stageDialed on) is what tells a lost request from a refused one.
const (
	stageNone      int32 = iota // not even a TCP connection: nothing reached the entry
	stageDialed                 // the TCP connection made (the entry's kernel accepted it), TLS not done
	stageConn                   // got a connection (dialled, the TLS handshake done; or an idle one)
	stageWrote                  // wrote the whole request
	stageFirstByte              // read the first byte of the answer
)

var stageNames = [...]string{"before a connection", "TCP connected, TLS handshake not done", "connected, writing",
	"request written, no answer", "answer started"}

// entryCodes are the entry's own error codes (docs/REFERENCE.md, "Streams, cancellation, errors").
var entryCodes = map[string]bool{"may_have_run": true, "no_region_reachable": true,
	"overloaded": true, "bad_path": true, "length_required": true}

// record is one request as the client saw it.
type record struct {
	ID        string // X-Request-Id, set by the client, unique
	Client    int    // -1 for the harness
	Entry     string
	Op        opKind
	Tenant    string
	Key       string // Idempotency-Key
	Try       int    // 0, 1, 2: the client's own retries of a keyed write
	NewConn   bool   // sent on a new connection (keep-alives off); else on the keep-alive pool
	Conn      connKind
	Start     time.Time
	End       time.Time
	Status    int    // 0: no answer head
	Code      string // "error" of a JSON body
	EntryMade bool   // an entry-made error: Code among entryCodes and no Fenec-Shard
	Shard     bool   // the answer carries Fenec-Shard (a router's answer)
	Err       string // client-side failure (timeout, refused, reset, cut stream)
	ErrText   string // the failure as the client's library said it
	Stage     string // how far a failed request got (httptrace), and on what connection
	StageN    int32  // the same as a stage constant (stageNone: the entry never had its connection)
	Reused    bool   // a failed request's connection was a kept-alive one reused
	Events    int    // SSE: data lines received
}

func (r *record) ok() bool { return r.Err == "" && r.Status >= 200 && r.Status < 300 }

// errDetail is, for a client error, how far the request got and the client library's words
// (" (...)"); "" otherwise.
func (r *record) errDetail() string {
	if r.Err == "" {
		return ""
	}
	return fmt.Sprintf(" (%s; %s)", r.Stage, r.ErrText)
}

// recorder sends requests and records them; one per scenario.
type recorder struct {
	h  *harness
	t0 time.Time
	// ka keeps connections alive (its pool shared by every client); nc opens a new connection
	// for every request and closes it after. Both speak HTTP/1.1, TLS to the TLS entry.
	ka, nc   *http.Transport
	kaClient *http.Client
	ncClient *http.Client
	mu       sync.Mutex
	recs     []*record
	mal      []*malRecord // the malformed requests, apart: none of recs' checks applies to them
	seq      atomic.Uint64
}

func newRecorder(h *harness) *recorder {
	ka := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true, IdleConnTimeout: 30 * time.Second,
		TLSClientConfig: h.tls.client()}
	nc := &http.Transport{DisableKeepAlives: true, DisableCompression: true, TLSClientConfig: h.tls.client()}
	return &recorder{h: h, t0: time.Now(), ka: ka, nc: nc, kaClient: &http.Client{Transport: ka}, ncClient: &http.Client{Transport: nc}}
}

func (rc *recorder) closeIdle() {
	rc.ka.CloseIdleConnections()
	rc.nc.CloseIdleConnections()
}

func (rc *recorder) records() []*record {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*record(nil), rc.recs...)
}

func (rc *recorder) malformed() []*malRecord {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*malRecord(nil), rc.mal...)
}

func (rc *recorder) newID(client int) string {
	return fmt.Sprintf("%s-%d-c%d-%d", rc.h.scenario, rc.h.seed, client, rc.seq.Add(1))
}

// do sends one request and records its outcome. hold > 0 is an event stream read for hold.
func (rc *recorder) do(r *record, method, path, body string, hold time.Duration) *record {
	e := rc.h.entry(r.Entry)
	timeout := clientTimeout
	if hold > 0 {
		timeout = hold + clientTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r.Conn = kindOf(r.NewConn, e.tls)
	client := rc.kaClient
	if r.NewConn {
		client = rc.ncClient
	}
	// How far the request got, and on what connection, should it fail. The callbacks may run
	// on the transport's goroutines, after Do returns: atomics.
	var stage atomic.Int32
	var reused atomic.Bool
	var idle atomic.Int64
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		// A dial the keep-alive transport makes for this request may end after the request got
		// an idle connection instead: it only ever moves the stage on from none.
		ConnectDone: func(_, _ string, err error) {
			if err == nil {
				stage.CompareAndSwap(stageNone, stageDialed)
			}
		},
		GotConn: func(ci httptrace.GotConnInfo) {
			reused.Store(ci.Reused)
			idle.Store(int64(ci.IdleTime))
			stage.Store(stageConn)
		},
		WroteRequest: func(wi httptrace.WroteRequestInfo) {
			if wi.Err == nil {
				stage.CompareAndSwap(stageConn, stageWrote)
			}
		},
		GotFirstResponseByte: func() { stage.Store(stageFirstByte) },
	})
	stageOf := func() string {
		n := stage.Load()
		r.StageN, r.Reused = n, reused.Load()
		st := stageNames[n]
		if reused.Load() {
			st += fmt.Sprintf(", on a reused connection idle %v", time.Duration(idle.Load()).Round(time.Millisecond))
		} else if n >= stageDialed {
			st += ", on a new connection"
		}
		return st
	}
	req, _ := http.NewRequestWithContext(ctx, method, e.url(path), rd)
	req.Header.Set("X-Request-Id", r.ID)
	if r.Key != "" {
		req.Header.Set("Idempotency-Key", r.Key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	r.Start = time.Now()
	resp, err := client.Do(req)
	if err != nil {
		r.End = time.Now()
		r.Err, r.ErrText, r.Stage = errClass(err), err.Error(), stageOf()
		rc.add(r)
		return r
	}
	r.Status = resp.StatusCode
	r.Shard = resp.Header.Get("Fenec-Shard") != ""
	if hold > 0 && resp.StatusCode == http.StatusOK {
		r.Events, r.Err = readStream(resp.Body, hold)
		if r.Err != "" {
			r.ErrText, r.Stage = r.Err, stageOf()
		}
	} else {
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if err != nil {
			r.Err, r.ErrText, r.Stage = "body: "+errClass(err), err.Error(), stageOf()
		}
		var eb struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &eb) == nil {
			r.Code = eb.Error
			r.EntryMade = !r.Shard && entryCodes[eb.Error]
		}
	}
	resp.Body.Close()
	r.End = time.Now()
	rc.add(r)
	return r
}

func (rc *recorder) add(r *record) {
	rc.mu.Lock()
	rc.recs = append(rc.recs, r)
	rc.mu.Unlock()
}

// readStream reads an event stream for hold, counting data lines; the stream ending before
// (a cut or a close) is an error.
func readStream(body io.Reader, hold time.Duration) (int, string) {
	type res struct {
		n   int
		err error
	}
	done := make(chan res, 1)
	var events atomic.Int64
	go func() {
		buf := make([]byte, 4096)
		var err error
		for {
			var n int
			n, err = body.Read(buf)
			events.Add(int64(strings.Count(string(buf[:n]), "\ndata:") + boolInt(strings.HasPrefix(string(buf[:n]), "data:"))))
			if err != nil {
				break
			}
		}
		done <- res{int(events.Load()), err}
	}()
	select {
	case r := <-done:
		if r.err == io.EOF {
			return r.n, "stream ended early"
		}
		return r.n, "stream: " + errClass(r.err)
	case <-time.After(hold):
		return int(events.Load()), "" // closed by the client, as intended
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func errClass(err error) string {
	s := err.Error()
	switch {
	case strings.Contains(s, "context deadline exceeded"), strings.Contains(s, "Client.Timeout"):
		return "timeout"
	case strings.Contains(s, "connection refused"):
		return "refused"
	case strings.Contains(s, "connection reset"):
		return "reset"
	case strings.Contains(s, "EOF"):
		return "eof"
	}
	return s
}

// probe is the harness's own GET of a tenant through one entry.
func (rc *recorder) probe(e *entryProc, tenant, what string) *record {
	r := &record{ID: rc.h.scenario + "-" + what + "-" + rc.newID(-1), Client: -1, Entry: e.name, Op: opProbe, Tenant: tenant}
	return rc.do(r, http.MethodGet, "/t/"+tenant+"/items/0", "", 0)
}

// traffic is N clients, each with its own seeded generator.
type traffic struct {
	h       *harness
	seed    int64 // the clients' generators, and their Idempotency-Keys
	stopped atomic.Bool
	wg      sync.WaitGroup
	avoid   sync.Map // entry name -> true: not targeted (stopped)
}

// startTraffic starts n clients over tenants ts, through every entry not avoided. They stop
// at tr.stop, or when the test ends (a scenario that fails early).
func (h *harness) startTraffic(seed int64, n int, ts []string) *traffic {
	tr := &traffic{h: h, seed: seed}
	h.t.Cleanup(tr.stop)
	for i := range n {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			tr.client(i, rand.New(rand.NewPCG(uint64(seed), uint64(i))), ts)
		}()
	}
	return tr
}

func (tr *traffic) stop() {
	tr.stopped.Store(true)
	tr.wg.Wait()
}

func (tr *traffic) setAvoid(name string, on bool) {
	if on {
		tr.avoid.Store(name, true)
	} else {
		tr.avoid.Delete(name)
	}
}

func (tr *traffic) pickEntry(rng *rand.Rand) string {
	var names []string
	for _, e := range tr.h.entries {
		if _, no := tr.avoid.Load(e.name); !no {
			names = append(names, e.name)
		}
	}
	if len(names) == 0 {
		return tr.h.entries[0].name
	}
	return names[rng.IntN(len(names))]
}

func (tr *traffic) client(i int, rng *rand.Rand, ts []string) {
	rc := tr.h.rec
	nkey, nmal := 0, 0
	for !tr.stopped.Load() {
		tenant := ts[rng.IntN(len(ts))]
		if rng.IntN(100) < malformedShare {
			// Each client rotates through the kinds, from its own offset.
			m := &malRecord{ID: rc.newID(i), Client: i, Entry: tr.pickEntry(rng), Tenant: tenant,
				Kind: malKind((i + nmal) % int(numMalKinds)), Key: fmt.Sprintf("m-%d-%d-%d", tr.seed, i, nmal)}
			nmal++
			rc.sendMalformed(m)
			time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
			continue
		}
		r := &record{ID: rc.newID(i), Client: i, Entry: tr.pickEntry(rng), Tenant: tenant, NewConn: rng.IntN(100) < newConnShare}
		switch x := rng.IntN(100); {
		case x < 40:
			r.Op = opRead
			rc.do(r, http.MethodGet, fmt.Sprintf("/t/%s/items/%d", tenant, rng.IntN(200)), "", 0)
		case x < 65:
			r.Op = opWrite
			rc.do(r, http.MethodPost, "/t/"+tenant+"/items", `{"n":1}`, 0)
		case x < 92:
			r.Op = opKeyed
			nkey++
			// Unique in the scenario: the warm-up's clients run with another seed.
			r.Key = fmt.Sprintf("k-%d-%d-%d", tr.seed, i, nkey)
			for try := 0; ; try++ {
				r.Try = try
				rc.do(r, http.MethodPost, "/t/"+tenant+"/items", `{"n":2}`, 0)
				if r.ok() || (r.Err == "" && r.Status < 500) || try == 2 || tr.stopped.Load() {
					break
				}
				time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
				r = &record{ID: rc.newID(i), Client: i, Entry: tr.pickEntry(rng), Tenant: tenant, Op: opKeyed, Key: r.Key,
					NewConn: rng.IntN(100) < newConnShare}
			}
		default:
			r.Op = opSSE
			rc.do(r, http.MethodGet, "/t/"+tenant+"/events", "", time.Duration(300+rng.IntN(1500))*time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
	}
}

// ---- malformed requests ----

// malformedShare is the percentage of each client's requests that are malformed writes: a
// keyed POST to a real tenant's items whose framing the entry must refuse itself (400, the
// connection closed), sent as raw bytes over a connection of its own (a TLS session on it to
// the TLS entry). Drawn from the client's seeded generator before the kind of a well-formed
// request; the other kinds keep their shares of the rest.
const malformedShare = 5

// malformedTimeout bounds the dial and every write and read of a malformed request; after the
// answer, malformedDrain bounds the wait for the entry to close the connection.
const (
	malformedTimeout = 5 * time.Second
	malformedDrain   = 2 * time.Second
)

type malKind uint8

const (
	malChunkSize       malKind = iota // chunk size 5_0
	malLengthChunked                  // Content-Length and Transfer-Encoding, a request smuggled in the body
	malNoCRLFAfterData                // 5\r\nhello0\r\n\r\n
	malObsFold                        // Transfer-Encoding:\r\n chunked
	malCutChunked                     // the client stops in the middle of a chunk (CloseWrite)
	malHexChunkSize                   // chunk size 0x5
	malBareCR                         // a CR alone in a chunk's size line
	numMalKinds
)

var malNames = [...]string{"chunk_size_5_0", "length_and_chunked", "no_crlf_after_data", "obs_fold",
	"cut_chunked", "chunk_size_0x5", "bare_cr_chunk_line"}

func (k malKind) String() string { return malNames[k] }

// malRecord is one malformed request as the client saw it. Its X-Request-Id and
// Idempotency-Key (and those of the smuggled twin, with "-smuggled") are unique, so the ledger
// and the routers' record of requests tell whether it ever reached a router or was applied.
type malRecord struct {
	ID     string // X-Request-Id
	Client int
	Entry  string
	Tenant string
	Kind   malKind
	Conn   connKind // newconn-plain, or newconn-tls to the TLS entry
	Key    string   // Idempotency-Key
	Start  time.Time
	End    time.Time
	Status int    // 0: no answer head
	Code   string // "error" of a JSON body
	Shard  bool   // the answer carries Fenec-Shard (a router's answer)
	Err    string // no answer: "dial: ..." (nothing reached the entry), "handshake: ...", "read: ..." (a reset, a timeout, the connection closed)
	// WriteErr: the write failed (the entry may have answered and closed first; not an error
	// by itself).
	WriteErr string
	// After: bytes the entry sent after its answer (a second answer: the smuggled request);
	// NotClosed: the entry kept the connection open malformedDrain after its answer.
	After     string
	NotClosed bool
}

func (m *malRecord) smuggledKey() string { return m.Key + "-smuggled" }
func (m *malRecord) smuggledID() string  { return m.ID + "-smuggled" }

// refused: the entry itself answered 4xx or 5xx.
func (m *malRecord) refused() bool { return m.Err == "" && m.Status >= 400 && !m.Shard }

// falseSuccess: answered 2xx.
func (m *malRecord) falseSuccess() bool { return m.Status >= 200 && m.Status < 300 }

func (m *malRecord) outcome() string {
	if m.Status == 0 {
		return "no answer: " + m.Err
	}
	s := fmt.Sprintf("%d", m.Status)
	if m.Code != "" {
		s += " " + m.Code
	}
	if m.Shard {
		s += " (router)"
	}
	return s
}

// request returns the bytes of m's request and, for malCutChunked, true: the client then closes
// its side of the connection with the body unfinished.
func (m *malRecord) request(host string) (string, bool) {
	head := "POST /t/" + m.Tenant + "/items HTTP/1.1\r\nHost: " + host + "\r\nX-Request-Id: " + m.ID +
		"\r\nIdempotency-Key: " + m.Key + "\r\nContent-Type: application/json\r\n"
	const te = "Transfer-Encoding: chunked\r\n"
	switch m.Kind {
	case malChunkSize:
		return head + te + "\r\n" + "5_0\r\n{\"a\":1}\r\n0\r\n\r\n", false
	case malLengthChunked:
		return head + "Content-Length: 4\r\n" + te + "\r\n" +
			"0\r\n\r\nPOST /t/" + m.Tenant + "/items HTTP/1.1\r\nHost: x\r\nX-Request-Id: " + m.smuggledID() +
			"\r\nIdempotency-Key: " + m.smuggledKey() + "\r\nContent-Length: 2\r\n\r\n{}", false
	case malNoCRLFAfterData:
		return head + te + "\r\n" + "5\r\nhello0\r\n\r\n", false
	case malObsFold:
		return head + "Transfer-Encoding:\r\n chunked\r\n\r\n" + "7\r\n{\"a\":1}\r\n0\r\n\r\n", false
	case malCutChunked:
		return head + te + "\r\n" + "10\r\n{\"a\":", true
	case malHexChunkSize:
		return head + te + "\r\n" + "0x5\r\nhello\r\n0\r\n\r\n", false
	case malBareCR:
		return head + te + "\r\n" + "5\rX\r\nhello\r\n0\r\n\r\n", false
	}
	panic("unknown malformed kind")
}

// sendMalformed sends m over a TCP connection of its own to the entry's client address (a TLS
// session on it to the TLS entry) and records what came back. Every step is bounded by a
// deadline: nothing can hang.
func (rc *recorder) sendMalformed(m *malRecord) {
	e := rc.h.entry(m.Entry)
	req, cut := m.request(e.listen)
	m.Conn = kindOf(true, e.tls)
	m.Start = time.Now()
	defer func() {
		m.End = time.Now()
		rc.mu.Lock()
		rc.mal = append(rc.mal, m)
		rc.mu.Unlock()
	}()
	deadline := time.Now().Add(malformedTimeout)
	d := &net.Dialer{Deadline: deadline}
	c, err := d.Dial("tcp", e.listen)
	if err != nil {
		m.Err = "dial: " + netErrClass(err) // nothing reached the entry
		return
	}
	defer func() { c.Close() }() // the TLS session once there is one: close_notify, then the FIN
	if e.tls {
		// Apart from the dial: a handshake cut is on a connection the entry's kernel accepted.
		cfg := rc.h.tls.client()
		cfg.ServerName, _, _ = net.SplitHostPort(e.listen) // as tls.Dial names it
		tc := tls.Client(c, cfg)
		tc.SetDeadline(deadline)
		if err := tc.Handshake(); err != nil {
			m.Err = "handshake: " + netErrClass(err)
			return
		}
		c = tc
	}
	c.SetWriteDeadline(time.Now().Add(malformedTimeout))
	if _, err := io.WriteString(c, req); err != nil {
		m.WriteErr = netErrClass(err)
	}
	if cut {
		// TCP: a FIN; TLS: close_notify, then the FIN.
		if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil && m.WriteErr == "" {
			m.WriteErr = netErrClass(err)
		}
	}
	c.SetReadDeadline(time.Now().Add(malformedTimeout))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		m.Err = "read: " + netErrClass(err)
		return
	}
	m.Status = resp.StatusCode
	m.Shard = resp.Header.Get("Fenec-Shard") != ""
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	var eb struct {
		Error string `json:"error"`
	}
	if err == nil && json.Unmarshal(b, &eb) == nil {
		m.Code = eb.Error
	}
	// The entry closes the connection after a refusal: anything more is a second answer.
	c.SetReadDeadline(time.Now().Add(malformedDrain))
	rest, err := io.ReadAll(io.LimitReader(br, 4096))
	if len(rest) > 0 {
		m.After = string(rest[:min(len(rest), 120)])
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		m.NotClosed = true
	}
}

func netErrClass(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "eof"
	}
	return errClass(err)
}

// ---- timelines of router faults and home moves ----

// change is one switch, known to have taken effect between Before and After.
type change struct {
	Value         string
	Before, After time.Time
}

// timeline is the changes of one thing (a router's fault, a tenant's home), in order.
type timeline struct {
	initial string
	changes []change
}

// during returns every value that may have been in effect at some instant of [s, e].
func (tl *timeline) during(s, e time.Time) []string {
	cur := tl.initial
	var out []string
	for _, c := range tl.changes {
		if !c.After.After(s) { // took effect before s
			cur = c.Value
			continue
		}
		if c.Before.After(e) {
			break
		}
		out = append(out, c.Value) // may have taken effect within [s, e]
	}
	return append(out, cur)
}

func (tl *timeline) last() string {
	if len(tl.changes) == 0 {
		return tl.initial
	}
	return tl.changes[len(tl.changes)-1].Value
}

type faultLog struct {
	mu sync.Mutex
	m  map[string]*timeline // router addr
}

func newFaultLog() *faultLog { return &faultLog{m: map[string]*timeline{}} }

func (f *faultLog) add(router, mode string, before, after time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tl := f.m[router]
	if tl == nil {
		tl = &timeline{initial: "ok"}
		f.m[router] = tl
	}
	tl.changes = append(tl.changes, change{mode, before, after})
}

func (f *faultLog) current(router string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tl := f.m[router]; tl != nil {
		return tl.last()
	}
	return "ok"
}

func (f *faultLog) offline(router string) bool {
	m := f.current(router)
	return m == "refuse" || m == "down"
}

// modes returns the fault modes router may have been in during [s, e].
func (f *faultLog) modes(router string, s, e time.Time) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tl := f.m[router]; tl != nil {
		return tl.during(s, e)
	}
	return []string{"ok"}
}

// healthyMode: a router in this mode answers every request within --answer-timeout.
func healthyMode(m string) bool {
	if m == "ok" {
		return true
	}
	var ms int
	if _, err := fmt.Sscanf(m, "slow=%d", &ms); err == nil {
		return time.Duration(ms)*time.Millisecond < answerTimeout/2
	}
	return false
}

// healthyThroughout: the router was in a healthy mode at every instant of [s, e].
func (f *faultLog) healthyThroughout(router string, s, e time.Time) bool {
	for _, m := range f.modes(router, s, e) {
		if !healthyMode(m) {
			return false
		}
	}
	return true
}

// anyFault: some router may have been in a fault mode (slow included) during [s, e].
func (f *faultLog) anyFault(s, e time.Time) bool {
	f.mu.Lock()
	routers := make([]string, 0, len(f.m))
	for r := range f.m {
		routers = append(routers, r)
	}
	f.mu.Unlock()
	for _, r := range routers {
		for _, m := range f.modes(r, s, e) {
			if m != "ok" {
				return true
			}
		}
	}
	return false
}

type directoryLog struct {
	mu sync.Mutex
	m  map[string]*timeline // tenant
}

func newDirectoryLog() *directoryLog {
	d := &directoryLog{m: map[string]*timeline{}}
	for t, home := range initialHomes {
		d.m[t] = &timeline{initial: home}
	}
	return d
}

func (d *directoryLog) add(tenant, home string, before, after time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.m[tenant].changes = append(d.m[tenant].changes, change{home, before, after})
}

func (d *directoryLog) homes(tenant string, s, e time.Time) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m[tenant].during(s, e)
}

func (d *directoryLog) home(tenant string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m[tenant].last()
}

// moved: the tenant's home may have changed during [s, e].
func (d *directoryLog) moved(tenant string, s, e time.Time) bool {
	return len(d.homes(tenant, s, e)) > 1
}
