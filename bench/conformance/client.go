package conformance

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"time"
)

// Result is what one target did with one case, seen from the client.
type Result struct {
	Statuses []int  // final (non-1xx) answers, in order
	Interim  int    // 1xx answers
	Closed   bool   // the target closed (or reset) the connection
	Hung     bool   // neither answered nor closed in time
	Garbage  string // bytes that are not an HTTP/1 answer
	Err      string // dial error
}

// Send runs one case's bytes against addr within timeout: raw, then (after 100 Continue, or
// 1 s without it) then, the write side shut after all with halfClose; it reads answers (to
// HEAD with noBody) until want final ones are in and 400 ms more have passed for an extra
// answer or the close.
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
	defer context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })()
	deadline, _ := ctx.Deadline()
	c.SetWriteDeadline(deadline)
	_, werr := c.Write(raw)
	thenAt, needThen := time.Now().Add(time.Second), then != nil && werr == nil
	if halfClose && !needThen && werr == nil {
		c.(*net.TCPConn).CloseWrite()
	}
	var buf []byte
	var graceEnd time.Time
	// take parses every complete answer in buf; atEOF, buf is all there will be, and one
	// answer is taken, read to the close.
	take := func(atEOF bool) {
		for res.Garbage == "" && len(buf) > 0 {
			status, n, err := parseResponse(buf, atEOF, noBody)
			if err != nil || n == 0 {
				if err != nil || atEOF {
					res.Garbage = strconv.Quote(string(buf[:min(len(buf), 40)]))
				}
				return
			}
			if buf = buf[n:]; status < 200 {
				res.Interim++
			} else {
				res.Statuses = append(res.Statuses, status)
			}
			if atEOF {
				return
			}
		}
	}
	tmp := make([]byte, 64<<10)
	for {
		take(false)
		if needThen && (res.Interim > 0 || !time.Now().Before(thenAt)) {
			if needThen = false; len(res.Statuses) == 0 {
				if _, err := c.Write(then); err == nil && halfClose {
					c.(*net.TCPConn).CloseWrite()
				}
			}
		}
		if (len(res.Statuses) >= want || res.Garbage != "") && graceEnd.IsZero() {
			graceEnd = time.Now().Add(400 * time.Millisecond)
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
		switch now := time.Now(); {
		case err == nil:
		case !errors.Is(err, os.ErrDeadlineExceeded): // EOF or reset: an answer read to the close is complete now
			res.Closed = true
			take(true)
			return res
		case needThen && !now.Before(thenAt) && now.Before(deadline) && ctx.Err() == nil:
		case !graceEnd.IsZero() && !now.Before(graceEnd):
			return res // answered, still open
		default:
			res.Hung = len(res.Statuses) < want && res.Garbage == ""
			return res
		}
	}
}

var errGarbage = errors.New("not an HTTP/1 answer")

// parseResponse parses one answer at the start of b: its status and length, or n == 0
// when more bytes are needed. atEOF: b is all there will be (a body without a length ends
// here). noBody: answers to HEAD.
func parseResponse(b []byte, atEOF, noBody bool) (status, n int, err error) {
	switch {
	case len(b) < 12 && (len(b) > 0 && !bytes.HasPrefix([]byte("HTTP/1."), b[:min(len(b), 7)]) || atEOF && len(b) > 0):
		return 0, 0, errGarbage
	case len(b) < 12:
		return 0, 0, nil
	case !bytes.HasPrefix(b, []byte("HTTP/1.")) || b[8] != ' ':
		return 0, 0, errGarbage
	}
	if status, err = strconv.Atoi(string(b[9:12])); err != nil || status < 100 {
		return 0, 0, errGarbage
	}
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 && (atEOF || len(b) > 1<<20) {
		return 0, 0, errGarbage
	} else if end < 0 {
		return 0, 0, nil
	}
	n, cl, chunked := end+4, -1, false
	for _, line := range bytes.Split(b[:end+2], []byte("\r\n"))[1:] {
		name, value, _ := bytes.Cut(line, []byte(":"))
		switch value = bytes.TrimSpace(value); string(bytes.ToLower(bytes.TrimSpace(name))) {
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
		} else if m > 0 {
			return status, n + m, nil
		}
	case cl >= 0 && len(b) >= n+cl:
		return status, n + cl, nil
	}
	if atEOF {
		return status, len(b), nil // cut short by the close, or read to it: take what came
	}
	return 0, 0, nil
}

// chunkedLen is the length of the chunked body at the start of b, 0 if incomplete.
func chunkedLen(b []byte) (int, error) {
	for p := 0; ; {
		i := bytes.Index(b[p:], []byte("\r\n"))
		if i < 0 {
			return 0, nil
		}
		line, _, _ := bytes.Cut(b[p:p+i], []byte(";"))
		size, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil || size < 0 || size > 1<<30 {
			return 0, errGarbage
		}
		if p += i + 2; size == 0 { // the trailer section, to its empty line
			for j := 1; j != 0; p += j + 2 {
				if j = bytes.Index(b[p:], []byte("\r\n")); j < 0 {
					return 0, nil
				}
			}
			return p, nil
		}
		if len(b) < p+int(size)+2 {
			return 0, nil
		}
		p += int(size) + 2
	}
}
