package conformance

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The recording upstream: a raw TCP server (not net/http, so that it sees the exact bytes a
// proxy sends) with a strict HTTP/1.1 framing parser. Every request it reads is recorded;
// anything ambiguous or malformed is recorded as such and the connection is closed.

// Record is what the upstream saw of one request.
type Record struct {
	Conn       int      `json:"conn"`  // connection number, from 1
	Seq        int      `json:"seq"`   // the request's place on its connection, from 1
	State      string   `json:"state"` // complete, malformed or aborted
	Reason     string   `json:"reason,omitempty"`
	Method     string   `json:"method,omitempty"`
	Target     string   `json:"target,omitempty"`
	Kind       string   `json:"kind,omitempty"` // conf, smuggled, or "" when unattributed
	Keys       []string `json:"keys,omitempty"` // the case keys this record is attributed to
	Head       string   `json:"head"`           // the raw head, cut at 4 KiB
	HeadLen    int      `json:"head_len"`
	Headers    []string `json:"headers,omitempty"` // field names, as received
	Chunked    bool     `json:"chunked,omitempty"`
	BodyLen    int      `json:"body_len"`
	BodySHA    string   `json:"body_sha"`
	BodyPrefix string   `json:"body_prefix,omitempty"` // the first 64 bytes
}

// The answer every request gets: the entry takes an answer without Fenec-Shard: 1 for a
// failed router.
const upstreamAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nFenec-Shard: 1\r\nFenec-Home: eu\r\n\r\n"

const (
	maxHead      = 4 << 20
	maxChunkLine = 1 << 20
)

// keyRE finds case keys in request targets and raw bytes.
var keyRE = regexp.MustCompile(`/(conf|smuggled)/([A-Za-z0-9_.~-]+)`)

// Upstream is the recording server.
type Upstream struct {
	ln    net.Listener
	mu    sync.Mutex
	recs  []Record
	nconn int
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// StartUpstream listens on addr and serves until Close.
func StartUpstream(addr string) (*Upstream, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	u := &Upstream{ln: ln, conns: map[net.Conn]struct{}{}}
	u.wg.Add(1)
	go u.accept()
	return u, nil
}

// Addr is the listener's address.
func (u *Upstream) Addr() string { return u.ln.Addr().String() }

// Records is a copy of everything recorded so far.
func (u *Upstream) Records() []Record {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Record(nil), u.recs...)
}

// Close stops the listener and every connection and waits for their goroutines.
func (u *Upstream) Close() error {
	err := u.ln.Close()
	u.mu.Lock()
	for c := range u.conns {
		c.Close()
	}
	u.mu.Unlock()
	u.wg.Wait()
	return err
}

func (u *Upstream) accept() {
	defer u.wg.Done()
	for {
		c, err := u.ln.Accept()
		if err != nil {
			return
		}
		u.mu.Lock()
		u.nconn++
		id := u.nconn
		u.conns[c] = struct{}{}
		u.mu.Unlock()
		u.wg.Add(1)
		go func() {
			defer u.wg.Done()
			u.serve(c, id)
			u.mu.Lock()
			delete(u.conns, c)
			u.mu.Unlock()
			c.Close()
		}()
	}
}

func (u *Upstream) add(r Record) {
	u.mu.Lock()
	u.recs = append(u.recs, r)
	u.mu.Unlock()
}

// idleTimeout bounds a read: a proxy's pooled connection idle for longer is closed.
const idleTimeout = 30 * time.Second

type deadlineReader struct{ c net.Conn }

func (d deadlineReader) Read(p []byte) (int, error) {
	d.c.SetReadDeadline(time.Now().Add(idleTimeout))
	return d.c.Read(p)
}

func (u *Upstream) serve(c net.Conn, id int) {
	br := bufio.NewReaderSize(deadlineReader{c}, 64<<10)
	for seq := 1; ; seq++ {
		req, err := ReadRequest(br, func() { io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n") })
		if req == nil {
			return // clean EOF between requests
		}
		rec := req.record(id, seq)
		if err != nil {
			// Whatever else the proxy had sent on this connection belongs to this record.
			rest, _ := br.Peek(br.Buffered())
			raw := append(append([]byte(nil), req.Raw...), rest...)
			rec.Keys, rec.Kind = allKeys(raw)
			var m *MalformedError
			if errors.As(err, &m) {
				rec.State, rec.Reason = "malformed", m.Reason
			} else {
				rec.State, rec.Reason = "aborted", err.Error()
			}
			u.add(rec)
			return
		}
		rec.State = "complete"
		u.add(rec)
		ans := upstreamAnswer
		if req.Method != "HEAD" {
			ans += "ok"
		}
		if _, err := io.WriteString(c, ans); err != nil || req.Close {
			return
		}
	}
}

// allKeys is every case key in raw bytes, and "smuggled" when one of them is a smuggled path.
func allKeys(raw []byte) ([]string, string) {
	var keys []string
	kind := ""
	for _, m := range keyRE.FindAllSubmatch(raw, -1) {
		k := string(m[2])
		if string(m[1]) == "smuggled" {
			kind = "smuggled"
		}
		dup := false
		for _, have := range keys {
			dup = dup || have == k
		}
		if !dup {
			keys = append(keys, k)
		}
	}
	return keys, kind
}

// Request is one request as the strict parser read it.
type Request struct {
	Raw     []byte // the head's bytes as read so far (and, when malformed, the body read so far)
	HeadLen int
	Method  string
	Target  string
	Version string
	Headers [][2]string
	Chunked bool
	Body    []byte
	Close   bool
}

func (r *Request) record(conn, seq int) Record {
	rec := Record{Conn: conn, Seq: seq, Method: r.Method, Target: r.Target, HeadLen: r.HeadLen, Chunked: r.Chunked}
	head := r.Raw
	if r.HeadLen > 0 && r.HeadLen <= len(head) {
		head = head[:r.HeadLen]
	}
	if len(head) > 4096 {
		head = head[:4096]
	}
	rec.Head = string(head)
	for _, h := range r.Headers {
		rec.Headers = append(rec.Headers, h[0])
	}
	sum := sha256.Sum256(r.Body)
	rec.BodyLen, rec.BodySHA = len(r.Body), hex.EncodeToString(sum[:])
	rec.BodyPrefix = string(r.Body[:min(64, len(r.Body))])
	if m := keyRE.FindStringSubmatch(r.Target); m != nil {
		rec.Kind, rec.Keys = m[1], []string{m[2]}
	} else if m := keyRE.FindStringSubmatch(rec.Head); m != nil {
		rec.Kind, rec.Keys = "conf", []string{m[2]} // e.g. GET * with the key in a header
	}
	return rec
}

// MalformedError is a request the strict parser refuses to frame.
type MalformedError struct{ Reason string }

func (e *MalformedError) Error() string { return "malformed: " + e.Reason }

func malformed(f string, a ...any) error { return &MalformedError{fmt.Sprintf(f, a...)} }

// errAborted: the connection ended (or idled out) in the middle of a request.
var errAborted = errors.New("connection ended mid-request")

// ReadRequest reads one request strictly. It returns (nil, nil-or-error) when the
// connection ended cleanly before any byte of a request; otherwise the request (as much of
// it as was read) and nil, a *MalformedError, or errAborted. expect100 is called before
// the body of a request carrying Expect: 100-continue is read.
func ReadRequest(br *bufio.Reader, expect100 func()) (*Request, error) {
	r := &Request{}
	line, err := readLine(br, &r.Raw, maxHead)
	if err != nil {
		if len(r.Raw) == 0 {
			return nil, err
		}
		return r, err
	}
	if len(line) == 0 {
		return r, malformed("empty line before the request line")
	}
	if err := r.parseRequestLine(line); err != nil {
		return r, err
	}
	var cl, te []string
	hosts := 0
	for {
		line, err := readLine(br, &r.Raw, maxHead-len(r.Raw))
		if err != nil {
			return r, err
		}
		if len(line) == 0 {
			break
		}
		name, value, err := parseField(line)
		if err != nil {
			return r, err
		}
		r.Headers = append(r.Headers, [2]string{name, value})
		switch strings.ToLower(name) {
		case "content-length":
			cl = append(cl, value)
		case "transfer-encoding":
			te = append(te, value)
		case "host":
			hosts++
			if !validHost(value) {
				return r, malformed("invalid Host %q", value)
			}
		case "connection":
			for _, t := range strings.Split(value, ",") {
				r.Close = r.Close || strings.EqualFold(strings.TrimSpace(t), "close")
			}
		}
	}
	r.HeadLen = len(r.Raw)
	if r.Version == "HTTP/1.0" {
		r.Close = true
	}
	if r.Version == "HTTP/1.1" && hosts != 1 {
		return r, malformed("%d Host fields on HTTP/1.1", hosts)
	}
	if hosts > 1 {
		return r, malformed("%d Host fields", hosts)
	}
	switch {
	case len(te) > 0 && len(cl) > 0:
		return r, malformed("both Content-Length and Transfer-Encoding")
	case len(te) > 1:
		return r, malformed("Transfer-Encoding twice")
	case len(te) == 1 && r.Version != "HTTP/1.1":
		return r, malformed("Transfer-Encoding on %s", r.Version)
	case len(te) == 1 && !isChunked(te[0]):
		return r, malformed("Transfer-Encoding %q", te[0])
	case len(cl) > 1:
		return r, malformed("Content-Length twice")
	}
	n := int64(0)
	if len(cl) == 1 {
		if !allDigits(cl[0]) || len(strings.TrimLeft(cl[0], "0")) > 15 {
			return r, malformed("invalid Content-Length %q", cl[0])
		}
		n, _ = strconv.ParseInt(cl[0], 10, 64)
	}
	r.Chunked = len(te) == 1
	if (r.Chunked || n > 0) && expect100 != nil && r.header("expect") == "100-continue" {
		expect100()
	}
	if !r.Chunked {
		r.Body = make([]byte, n)
		got, err := io.ReadFull(br, r.Body)
		r.Body = r.Body[:got]
		r.Raw = append(r.Raw, r.Body...)
		if err != nil {
			return r, errAborted
		}
		return r, nil
	}
	return r, r.readChunked(br)
}

func (r *Request) header(name string) string {
	for _, h := range r.Headers {
		if strings.EqualFold(h[0], name) {
			return strings.ToLower(h[1])
		}
	}
	return ""
}

func (r *Request) readChunked(br *bufio.Reader) error {
	for {
		line, err := readLine(br, &r.Raw, maxChunkLine)
		if err != nil {
			return err
		}
		size, err := parseChunkLine(line)
		if err != nil {
			return err
		}
		if size == 0 {
			break
		}
		if len(r.Body)+int(size) > 64<<20 {
			return malformed("body over 64 MiB")
		}
		data := make([]byte, size)
		got, err := io.ReadFull(br, data)
		r.Body = append(r.Body, data[:got]...)
		r.Raw = append(r.Raw, data[:got]...)
		if err != nil {
			return errAborted
		}
		var crlf [2]byte
		got, err = io.ReadFull(br, crlf[:])
		r.Raw = append(r.Raw, crlf[:got]...)
		if err != nil {
			return errAborted
		}
		if crlf != [2]byte{'\r', '\n'} {
			return malformed("no CRLF after chunk data")
		}
	}
	for { // the trailer section
		line, err := readLine(br, &r.Raw, maxChunkLine)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return nil
		}
		if _, _, err := parseField(line); err != nil {
			return malformed("trailer: %s", err.(*MalformedError).Reason)
		}
	}
}

// parseChunkLine parses chunk-size [chunk-ext] (without its CRLF), RFC 9112 section 7.1.
func parseChunkLine(line []byte) (int64, error) {
	i := 0
	for i < len(line) && isHex(line[i]) {
		i++
	}
	if i == 0 {
		return 0, malformed("chunk size %q", trunc(line))
	}
	if i > 15 {
		return 0, malformed("chunk size of %d digits", i)
	}
	size, _ := strconv.ParseInt(string(line[:i]), 16, 64)
	rest := line[i:]
	for len(rest) > 0 { // *( BWS ";" BWS name [ BWS "=" BWS value ] )
		rest = trimBWS(rest)
		if len(rest) == 0 || rest[0] != ';' {
			return 0, malformed("chunk line %q", trunc(line))
		}
		rest = trimBWS(rest[1:])
		n := tokenLen(rest)
		if n == 0 {
			return 0, malformed("chunk extension without a name in %q", trunc(line))
		}
		rest = rest[n:]
		if t := trimBWS(rest); len(t) > 0 && t[0] == '=' {
			rest = trimBWS(t[1:])
			if len(rest) > 0 && rest[0] == '"' {
				n = quotedLen(rest)
			} else {
				n = tokenLen(rest)
			}
			if n == 0 {
				return 0, malformed("chunk extension value in %q", trunc(line))
			}
			rest = rest[n:]
		}
	}
	return size, nil
}

func trimBWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

func tokenLen(b []byte) int {
	n := 0
	for n < len(b) && isTchar(b[n]) {
		n++
	}
	return n
}

// quotedLen is the length of the quoted-string b starts with, 0 if it is not one.
func quotedLen(b []byte) int {
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			i++
			if i >= len(b) || !(b[i] == '\t' || b[i] >= 0x20 && b[i] != 0x7f) {
				return 0
			}
		case c == '\t' || c >= 0x20 && c != 0x7f:
		default:
			return 0
		}
	}
	return 0
}

func trunc(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// readLine reads one CRLF-terminated line, appending its bytes to raw, and returns it
// without the CRLF. A bare LF or a bare CR anywhere in it is malformed; EOF within it is
// errAborted (io.EOF when nothing was read at all).
func readLine(br *bufio.Reader, raw *[]byte, limit int) ([]byte, error) {
	start := len(*raw)
	for {
		frag, err := br.ReadSlice('\n')
		*raw = append(*raw, frag...)
		if len(*raw)-start > limit {
			return nil, malformed("line or head over %d bytes", limit)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if len(*raw) == start {
				return nil, io.EOF
			}
			return nil, errAborted
		}
		break
	}
	line := (*raw)[start:]
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, malformed("bare LF")
	}
	line = line[:len(line)-2]
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, malformed("bare CR")
	}
	return line, nil
}

func (r *Request) parseRequestLine(line []byte) error {
	parts := bytes.Split(line, []byte(" "))
	if len(parts) != 3 {
		return malformed("request line of %d words: %q", len(parts), trunc(line))
	}
	m, t, v := parts[0], parts[1], parts[2]
	r.Method, r.Target, r.Version = string(m), string(t), string(v)
	if len(m) == 0 || tokenLen(m) != len(m) {
		return malformed("method %q", trunc(m))
	}
	if len(t) == 0 {
		return malformed("empty request target")
	}
	for _, c := range t {
		if c <= 0x20 || c >= 0x7f {
			return malformed("byte %#x in the request target", c)
		}
	}
	switch {
	case r.Method == "CONNECT":
		return malformed("CONNECT (this upstream does not tunnel)")
	case r.Target == "*":
		if r.Method != "OPTIONS" {
			return malformed("* target on %s", r.Method)
		}
	case t[0] == '/':
		if bytes.IndexByte(t, '#') >= 0 {
			return malformed("fragment in the request target")
		}
	case bytes.HasPrefix(t, []byte("http://")) || bytes.HasPrefix(t, []byte("https://")):
	default:
		return malformed("request target %q", trunc(t))
	}
	if r.Version != "HTTP/1.1" && r.Version != "HTTP/1.0" {
		return malformed("version %q", trunc(v))
	}
	return nil
}

// parseField parses name ":" OWS value OWS strictly.
func parseField(line []byte) (string, string, error) {
	if line[0] == ' ' || line[0] == '\t' {
		return "", "", malformed("obs-fold (a line starting with whitespace)")
	}
	colon := bytes.IndexByte(line, ':')
	if colon < 0 {
		return "", "", malformed("field line without a colon: %q", trunc(line))
	}
	name := line[:colon]
	if len(name) == 0 || tokenLen(name) != len(name) {
		return "", "", malformed("field name %q", trunc(name))
	}
	value := bytes.Trim(line[colon+1:], " \t")
	for _, c := range value {
		if c != '\t' && (c < 0x20 || c == 0x7f) {
			return "", "", malformed("byte %#x in the value of %s", c, name)
		}
	}
	return string(name), string(value), nil
}

func validHost(v string) bool {
	h := v
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return false
		}
		h = h[end+1:]
		if h != "" && h[0] != ':' {
			return false
		}
	} else if i := strings.LastIndexByte(h, ':'); i >= 0 {
		if strings.IndexByte(h[:i], ':') >= 0 {
			return false
		}
		h = h[i:]
	} else {
		h = ""
	}
	if h != "" && !allDigits(h[1:]) && h != ":" {
		return false
	}
	for _, c := range []byte(v) {
		if !(isAlnum(c) || strings.IndexByte("-._~%!$&'()*+,;=:[]", c) >= 0) {
			return false
		}
	}
	return true
}

// isChunked: a Transfer-Encoding list that is chunked alone, empty elements ignored
// (RFC 9110 5.6.1).
func isChunked(v string) bool {
	n := 0
	for _, e := range strings.Split(v, ",") {
		switch e = strings.Trim(e, " \t"); {
		case e == "":
		case strings.EqualFold(e, "chunked"):
			n++
		default:
			return false
		}
	}
	return n == 1
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isHex(c byte) bool   { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
func isTchar(c byte) bool { return isAlnum(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 }
