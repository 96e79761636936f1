package conformance

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The recording upstream: a raw TCP server (not net/http, so that it sees the exact bytes a
// proxy sends) with a strict HTTP/1.1 framing reader. Every request it reads is recorded;
// anything ambiguous or malformed is recorded as such and the connection is closed.

// Record is what the upstream saw of one request.
type Record struct {
	State   string   // complete, malformed or aborted
	Reason  string   // why malformed or aborted
	Kind    string   // conf, smuggled, or "" when unattributed
	Keys    []string // the case keys this record is attributed to
	Headers []string // field names, as received
	Body    string
}

// The answer every request gets: the entry takes an answer without Fenec-Shard: 1 for a
// failed router.
const upstreamAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nFenec-Shard: 1\r\nFenec-Home: eu\r\n\r\n"

var (
	keyRE   = regexp.MustCompile(`/(conf|smuggled)/([A-Za-z0-9_.~-]+)`) // case keys in targets and raw bytes
	token   = "[!#$%&'*+.^_`|~0-9A-Za-z-]+"
	tokenRE = regexp.MustCompile("^" + token + "$")
	// chunkRE is chunk-size [chunk-ext] (RFC 9112 7.1): *( BWS ";" BWS name [ BWS "=" BWS
	// ( token / quoted-string ) ] ).
	chunkRE = regexp.MustCompile("^([0-9A-Fa-f]+)(?:[ \t]*;[ \t]*" + token + "(?:[ \t]*=[ \t]*(?:" + token +
		`|"(?:[^"\\\x00-\x08\x0a-\x1f\x7f]|\\[^\x00-\x08\x0a-\x1f\x7f])*"))?)*$`)
	hostRE   = regexp.MustCompile(`^(?:\[[^\]]*\](?::[0-9]*)?|(?:[^\[:][^:]*)?(?::[0-9]*)?)$`)
	digitsRE = regexp.MustCompile(`^[0-9]+$`)
)

// Upstream is the recording server.
type Upstream struct {
	ln    net.Listener
	mu    sync.Mutex // guards the following fields
	recs  []Record
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
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns[c] = struct{}{}
			u.mu.Unlock()
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				u.serve(c)
				u.mu.Lock()
				delete(u.conns, c)
				u.mu.Unlock()
				c.Close()
			}()
		}
	}()
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

// deadlineReader bounds each read: a proxy's pooled connection idle for 30 s is closed.
type deadlineReader struct{ c net.Conn }

func (d deadlineReader) Read(p []byte) (int, error) {
	d.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	return d.c.Read(p)
}

func (u *Upstream) serve(c net.Conn) {
	br := bufio.NewReaderSize(deadlineReader{c}, 64<<10)
	for {
		req, err := ReadRequest(br, func() { io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n") })
		if req == nil {
			return // clean EOF between requests
		}
		rec := Record{State: "complete", Body: string(req.Body)}
		for _, h := range req.Headers {
			rec.Headers = append(rec.Headers, h[0])
		}
		if m := keyRE.FindStringSubmatch(req.Target); m != nil {
			rec.Kind, rec.Keys = m[1], []string{m[2]}
		} else if m := keyRE.FindSubmatch(req.Raw[:min(len(req.Raw), req.HeadLen, 4096)]); m != nil {
			rec.Kind, rec.Keys = "conf", []string{string(m[2])} // e.g. GET * with the key in a header
		}
		if err != nil {
			// Whatever else the proxy had sent on this connection belongs to this record.
			rest, _ := br.Peek(br.Buffered())
			rec.Kind, rec.Keys = "", nil
			for _, m := range keyRE.FindAllSubmatch(append(req.Raw, rest...), -1) {
				if string(m[1]) == "smuggled" {
					rec.Kind = "smuggled"
				}
				if k := string(m[2]); !slices.Contains(rec.Keys, k) {
					rec.Keys = append(rec.Keys, k)
				}
			}
			var m *MalformedError
			if rec.State, rec.Reason = "aborted", err.Error(); errors.As(err, &m) {
				rec.State, rec.Reason = "malformed", m.Reason
			}
		}
		u.mu.Lock()
		u.recs = append(u.recs, rec)
		u.mu.Unlock()
		if err != nil {
			return
		}
		ans := upstreamAnswer
		if req.Method != "HEAD" {
			ans += "ok"
		}
		if _, err := io.WriteString(c, ans); err != nil || req.Close {
			return
		}
	}
}

// Request is one request as the strict reader read it.
type Request struct {
	Raw                     []byte // the head's bytes as read so far (and, when malformed, the body read so far)
	HeadLen                 int
	Method, Target, Version string
	Headers                 [][2]string
	Body                    []byte
	Close                   bool
}

// MalformedError is a request the strict reader refuses to frame.
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
	line, err := readLine(br, &r.Raw, 4<<20)
	if err != nil && len(r.Raw) == 0 {
		return nil, err
	} else if err != nil {
		return r, err
	}
	if err := r.requestLine(line); err != nil {
		return r, err
	}
	var cl, te []string
	hosts := 0
	for {
		line, err := readLine(br, &r.Raw, 4<<20-len(r.Raw))
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
			if hosts++; !validHost(value) {
				return r, malformed("invalid Host %q", value)
			}
		case "connection":
			for _, t := range strings.Split(value, ",") {
				r.Close = r.Close || strings.EqualFold(strings.TrimSpace(t), "close")
			}
		}
	}
	r.HeadLen, r.Close = len(r.Raw), r.Close || r.Version == "HTTP/1.0"
	switch {
	case r.Version == "HTTP/1.1" && hosts != 1 || hosts > 1:
		return r, malformed("%d Host fields on %s", hosts, r.Version)
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
	case len(cl) == 1 && (!digitsRE.MatchString(cl[0]) || len(strings.TrimLeft(cl[0], "0")) > 15):
		return r, malformed("invalid Content-Length %q", cl[0])
	}
	n := int64(0)
	if len(cl) == 1 {
		n, _ = strconv.ParseInt(cl[0], 10, 64)
	}
	if (len(te) == 1 || n > 0) && expect100 != nil && first(r.Headers, "expect") == "100-continue" {
		expect100()
	}
	if len(te) == 1 {
		return r, r.readChunked(br)
	}
	r.Body = make([]byte, n)
	got, err := io.ReadFull(br, r.Body)
	r.Body = r.Body[:got]
	r.Raw = append(r.Raw, r.Body...)
	if err != nil {
		return r, errAborted
	}
	return r, nil
}

// first is the first value of header name, lower-cased ("" if none).
func first(hs [][2]string, name string) string {
	for _, h := range hs {
		if strings.EqualFold(h[0], name) {
			return strings.ToLower(h[1])
		}
	}
	return ""
}

func (r *Request) readChunked(br *bufio.Reader) error {
	for {
		line, err := readLine(br, &r.Raw, 1<<20)
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
		data := make([]byte, size+2)
		got, err := io.ReadFull(br, data)
		r.Raw = append(r.Raw, data[:got]...)
		r.Body = append(r.Body, data[:min(got, int(size))]...)
		if err != nil {
			return errAborted
		}
		if !bytes.HasSuffix(data, []byte("\r\n")) {
			return malformed("no CRLF after chunk data")
		}
	}
	for { // the trailer section
		line, err := readLine(br, &r.Raw, 1<<20)
		if err != nil || len(line) == 0 {
			return err
		}
		if _, _, err := parseField(line); err != nil {
			return malformed("trailer: %s", err.(*MalformedError).Reason)
		}
	}
}

// parseChunkLine parses chunk-size [chunk-ext] (without its CRLF), RFC 9112 section 7.1.
func parseChunkLine(line []byte) (int64, error) {
	m := chunkRE.FindSubmatch(line)
	if m == nil {
		return 0, malformed("chunk line %q", trunc(line))
	}
	if len(m[1]) > 15 {
		return 0, malformed("chunk size of %d digits", len(m[1]))
	}
	return strconv.ParseInt(string(m[1]), 16, 64)
}

func trunc(b []byte) string { return string(b[:min(len(b), 40)]) }

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
		if err != nil && len(*raw) == start {
			return nil, io.EOF
		} else if err != nil {
			return nil, errAborted
		}
		break
	}
	line := (*raw)[start:]
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, malformed("bare LF")
	}
	if line = line[:len(line)-2]; bytes.IndexByte(line, '\r') >= 0 {
		return nil, malformed("bare CR")
	}
	return line, nil
}

func (r *Request) requestLine(line []byte) error {
	if len(line) == 0 {
		return malformed("empty line before the request line")
	}
	parts := strings.Split(string(line), " ")
	if len(parts) != 3 {
		return malformed("request line of %d words: %q", len(parts), trunc(line))
	}
	r.Method, r.Target, r.Version = parts[0], parts[1], parts[2]
	t, bad := r.Target, strings.IndexFunc(r.Target, func(c rune) bool { return c <= 0x20 || c >= 0x7f })
	switch {
	case !tokenRE.MatchString(r.Method):
		return malformed("method %q", r.Method)
	case t == "":
		return malformed("empty request target")
	case bad >= 0:
		return malformed("byte %#x in the request target", t[bad])
	case r.Method == "CONNECT":
		return malformed("CONNECT (this upstream does not tunnel)")
	case t == "*" && r.Method != "OPTIONS":
		return malformed("* target on %s", r.Method)
	case t[0] == '/' && strings.Contains(t, "#"):
		return malformed("fragment in the request target")
	case t != "*" && t[0] != '/' && !strings.HasPrefix(t, "http://") && !strings.HasPrefix(t, "https://"):
		return malformed("request target %q", t)
	case r.Version != "HTTP/1.1" && r.Version != "HTTP/1.0":
		return malformed("version %q", r.Version)
	}
	return nil
}

// parseField parses name ":" OWS value OWS strictly.
func parseField(line []byte) (string, string, error) {
	name, value, ok := bytes.Cut(line, []byte(":"))
	switch value = bytes.Trim(value, " \t"); {
	case line[0] == ' ' || line[0] == '\t':
		return "", "", malformed("obs-fold (a line starting with whitespace)")
	case !ok:
		return "", "", malformed("field line without a colon: %q", trunc(line))
	case !tokenRE.Match(name):
		return "", "", malformed("field name %q", trunc(name))
	}
	for _, c := range value {
		if c != '\t' && (c < 0x20 || c == 0x7f) {
			return "", "", malformed("byte %#x in the value of %s", c, name)
		}
	}
	return string(name), string(value), nil
}

// validHost: a Host of reg-name, IPv4 or IP-literal characters, with at most one port, of
// digits.
func validHost(v string) bool {
	for _, c := range []byte(v) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.IndexByte("-._~%!$&'()*+,;=:[]", c) >= 0) {
			return false
		}
	}
	return hostRE.MatchString(v)
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
