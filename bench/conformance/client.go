package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

// Result is what one target did with one case, seen from the client.
type Result struct {
	Statuses []int  `json:"statuses"`          // final (non-1xx) answers, in order
	Interim  int    `json:"interim,omitempty"` // 1xx answers
	Closed   bool   `json:"closed"`            // the target closed (or reset) the connection
	Hung     bool   `json:"hung,omitempty"`    // neither answered nor closed in time
	Garbage  string `json:"garbage,omitempty"` // bytes that are not an HTTP/1 answer
	Err      string `json:"err,omitempty"`     // dial error
}

// grace: how long to wait, once the answers the client expects are in, for an extra
// answer or for the target to close.
const grace = 400 * time.Millisecond

// thenDelay: how long the client waits for 100 Continue before sending the rest.
const thenDelay = time.Second

// Send runs one case's bytes against addr within timeout.
func Send(ctx context.Context, addr string, raw, then []byte, halfClose, noBody bool, want int, timeout time.Duration) Result {
	var res Result
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	deadline, _ := ctx.Deadline()
	c.SetWriteDeadline(deadline)
	_, werr := c.Write(raw)
	thenAt := time.Now().Add(thenDelay)
	needThen := then != nil && werr == nil
	if halfClose && !needThen && werr == nil {
		c.(*net.TCPConn).CloseWrite()
	}
	var buf []byte
	pos := 0
	var graceEnd time.Time
	tmp := make([]byte, 64<<10)
	for {
		// Parse every complete answer in.
		for res.Garbage == "" {
			status, n, err := parseResponse(buf[pos:], false, noBody)
			if err != nil {
				res.Garbage = strconv.Quote(string(buf[pos:min(len(buf), pos+40)]))
				break
			}
			if n == 0 {
				break
			}
			pos += n
			if status < 200 {
				res.Interim++
			} else {
				res.Statuses = append(res.Statuses, status)
			}
		}
		if needThen && (res.Interim > 0 || !time.Now().Before(thenAt)) {
			needThen = false
			if len(res.Statuses) == 0 {
				if _, err := c.Write(then); err == nil && halfClose {
					c.(*net.TCPConn).CloseWrite()
				}
			}
		}
		if len(res.Statuses) >= want && graceEnd.IsZero() {
			graceEnd = time.Now().Add(grace)
		}
		if res.Garbage != "" && graceEnd.IsZero() {
			graceEnd = time.Now().Add(grace)
		}
		rd := deadline
		if !graceEnd.IsZero() && graceEnd.Before(rd) {
			rd = graceEnd
		}
		if needThen && thenAt.Before(rd) {
			rd = thenAt
		}
		c.SetReadDeadline(rd)
		n, err := c.Read(tmp)
		if res.Garbage == "" {
			buf = append(buf, tmp[:n]...)
		}
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			now := time.Now()
			if needThen && !now.Before(thenAt) && now.Before(deadline) && ctx.Err() == nil {
				continue
			}
			if !graceEnd.IsZero() && !now.Before(graceEnd) {
				return res // answered, still open
			}
			res.Hung = len(res.Statuses) < want && res.Garbage == ""
			return res
		}
		// EOF or reset: an answer read to the close is complete now.
		res.Closed = true
		if res.Garbage == "" && pos < len(buf) {
			status, n, perr := parseResponse(buf[pos:], true, noBody)
			switch {
			case perr != nil || n == 0:
				res.Garbage = strconv.Quote(string(buf[pos:min(len(buf), pos+40)]))
			case status < 200:
				res.Interim++
			default:
				res.Statuses = append(res.Statuses, status)
			}
		}
		return res
	}
}

var errGarbage = errors.New("not an HTTP/1 answer")

// parseResponse parses one answer at the start of b: its status and length, or n == 0
// when more bytes are needed. atEOF: b is all there will be (a body without a length ends
// here). noBody: answers to HEAD.
func parseResponse(b []byte, atEOF, noBody bool) (status, n int, err error) {
	if len(b) < 12 {
		if len(b) > 0 && !bytes.HasPrefix([]byte("HTTP/1."), b[:min(len(b), 7)]) {
			return 0, 0, errGarbage
		}
		if atEOF && len(b) > 0 {
			return 0, 0, errGarbage
		}
		return 0, 0, nil
	}
	if !bytes.HasPrefix(b, []byte("HTTP/1.")) || b[8] != ' ' {
		return 0, 0, errGarbage
	}
	status, err = strconv.Atoi(string(b[9:12]))
	if err != nil || status < 100 {
		return 0, 0, errGarbage
	}
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if atEOF || len(b) > 1<<20 {
			return 0, 0, errGarbage
		}
		return 0, 0, nil
	}
	head := b[:end+2]
	n = end + 4
	cl, chunked := -1, false
	for _, line := range bytes.Split(head, []byte("\r\n"))[1:] {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch string(bytes.ToLower(bytes.TrimSpace(name))) {
		case "content-length":
			if v, err := strconv.Atoi(string(value)); err == nil && v >= 0 {
				cl = v
			}
		case "transfer-encoding":
			chunked = bytes.Contains(bytes.ToLower(value), []byte("chunked"))
		}
	}
	switch {
	case status < 200 || status == 204 || status == 304 || noBody:
		return status, n, nil
	case chunked:
		m, err := chunkedLen(b[n:])
		if err != nil {
			return 0, 0, err
		}
		if m == 0 {
			if atEOF {
				return status, len(b), nil // cut short by the close: take what came
			}
			return 0, 0, nil
		}
		return status, n + m, nil
	case cl >= 0:
		if len(b) < n+cl {
			if atEOF {
				return status, len(b), nil
			}
			return 0, 0, nil
		}
		return status, n + cl, nil
	default:
		if atEOF {
			return status, len(b), nil
		}
		return 0, 0, nil
	}
}

// chunkedLen is the length of the chunked body at the start of b, 0 if incomplete.
func chunkedLen(b []byte) (int, error) {
	p := 0
	for {
		i := bytes.Index(b[p:], []byte("\r\n"))
		if i < 0 {
			return 0, nil
		}
		line := b[p : p+i]
		if semi := bytes.IndexByte(line, ';'); semi >= 0 {
			line = line[:semi]
		}
		size, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil || size < 0 || size > 1<<30 {
			return 0, fmt.Errorf("answer chunk size %q: %w", line, errGarbage)
		}
		p += i + 2
		if size == 0 {
			for {
				j := bytes.Index(b[p:], []byte("\r\n"))
				if j < 0 {
					return 0, nil
				}
				p += j + 2
				if j == 0 {
					return p, nil
				}
			}
		}
		if len(b) < p+int(size)+2 {
			return 0, nil
		}
		p += int(size) + 2
	}
}
